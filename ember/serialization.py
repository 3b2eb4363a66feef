"""``ember.save`` / ``ember.load``: safe serialization with safetensors, never pickle.

File layout: one safetensors file. Tensors are stored under their dotted path in the saved
object (a flat state dict keeps its own keys, so torch's ``safetensors.torch.load_file`` reads
it as a state dict). Everything that is not a tensor — nesting, numbers, strings, tuples,
integer dict keys (optimizer state) — goes to a JSON document in the header metadata under
``"ember"``. A safetensors file without that entry (e.g. written by PyTorch) loads as a flat
dict of tensors.

Writes are atomic (``ember.utils.files.atomic_write``): the bytes go to a temporary file in the
destination folder, are flushed and fsync'ed, then ``os.replace``d over the destination, so a
failed save leaves the previous file intact; a symbolic link is written through to its target
(as ``torch.save``), and the file gets ``open()``'s mode. ``load`` checks the header first and refuses pickle-based files (``torch.save``'s zip
or legacy format, plain pickles) with a clear error instead of unpickling them; a truncated or
corrupt file, another format version or a missing tensor is a ``SerializationError`` naming the
file and the problem. Nothing is ever unpickled or imported.

Whole modules (``ember.save(model)``, also inside a checkpoint dict) are stored without pickle:
each module becomes a JSON entry naming its class and holding its attribute dict (parameters,
buffers and tensor attributes as tensors in the file, submodules nested, shared parameters and
modules stored once and referenced). ``ember.load(f, weights_only=False)`` rebuilds them with
``cls.__new__`` and the saved attributes, resolving class names only through a registry:
ember's own nn classes, and classes and functions the user allowed with ``add_safe_globals``
(torch's name). With ``weights_only=True`` (the default, as torch) only the latter resolve. A
name in neither is a SerializationError naming it; nothing is ever imported. Functions held as
attributes (e.g. ``activation=F.relu``) resolve the same way (ember's functional namespace, or
registered). A NumPy array saved comes back as a NumPy array, and a ``.npy`` file
(``numpy.save``) loads as a Tensor (read with ``allow_pickle=False``).

``add_safe_globals`` also registers custom autograd Functions for ``ember.jit.load``, which
resolves the names a file holds only through that registry.
"""
import json
import os
import struct
import sys
import threading
import types
from collections import OrderedDict

import numpy as np

from ember._optional import require
from ember.errors import EmberRuntimeError, EmberTypeError, EmberValueError
from ember.tensor import Tensor

from ember.utils.files import atomic_write

__all__ = ["save", "load", "UnsafeFileError", "SerializationError", "add_safe_globals",
           "get_safe_globals", "clear_safe_globals", "safe_globals"]

_META_KEY = "ember"
_FORMAT = 1


class SerializationError(EmberRuntimeError):
    """A file that cannot be read as what it claims to be: truncated, a corrupt header, another
    format version, a missing tensor, a name that is not registered."""


class UnsafeFileError(SerializationError):
    """The file is not a safetensors file (for instance a pickle); ember will not execute it."""


# ---------------------------------------------------------------------------- safe globals
_SAFE = {}  # name -> class or function allowed by add_safe_globals (not autograd Functions)
_safe_lock = threading.Lock()


def _is_autograd_function(obj):
    from ember.autograd.function import Function
    return isinstance(obj, type) and issubclass(obj, Function)


def _default_name(obj):
    return f"{obj.__module__}.{obj.__qualname__}"


def add_safe_globals(safe_globals):
    """Allow these classes and functions to be resolved by name when loading: each entry is a
    Module subclass, an autograd Function or a Python function (named
    ``"<module>.<qualname>"``) or a ``(obj, name)`` pair, as in
    ``torch.serialization.add_safe_globals``. Module subclasses (and functions they hold) become
    loadable by ``ember.load``; custom autograd Functions are registered for ``ember.jit.load``
    (``ember.jit.register_function``, raising its errors)."""
    from ember.autograd.function import register_function
    if not isinstance(safe_globals, (list, tuple)):
        raise EmberTypeError(f"add_safe_globals: expected a list of classes, functions or "
                             f"(object, name) pairs, got {type(safe_globals).__name__}")
    for entry in safe_globals:
        obj, name = entry if isinstance(entry, tuple) and len(entry) == 2 else (entry, None)
        if _is_autograd_function(obj):
            register_function(obj, name) if name is not None else register_function(obj)
            continue
        from ember.nn.modules.module import Module
        if not (isinstance(obj, type) and issubclass(obj, Module)) and \
                not isinstance(obj, types.FunctionType):
            raise EmberTypeError(f"add_safe_globals: expected an ember.nn.Module subclass, a "
                                 f"subclass of ember.autograd.Function or a Python function, "
                                 f"got {obj!r}")
        if name is None:
            name = _default_name(obj)
        if not isinstance(name, str) or not name:
            raise EmberTypeError(f"add_safe_globals: name must be a non-empty string, got "
                                 f"{name!r}")
        with _safe_lock:
            held = _SAFE.get(name)
            if held is not None and held is not obj:
                raise EmberValueError(f"add_safe_globals: the name {name!r} is already "
                                      f"registered for {held!r}")
            _SAFE[name] = obj


def get_safe_globals():
    """The registered classes, functions and autograd Functions, as ``(obj, name)`` pairs."""
    from ember.autograd.function import registered_functions
    return [(cls, name) for name, cls in registered_functions().items()] + \
        [(obj, name) for name, obj in _SAFE.items()]


def clear_safe_globals():
    """Forget every registered class, function and autograd Function."""
    from ember.autograd import function
    with function._named_lock:
        function._NAMED.clear()
    with _safe_lock:
        _SAFE.clear()


class safe_globals:
    """Context manager: ``add_safe_globals(entries)`` on entry; on exit the names it added are
    registered no more."""

    def __init__(self, safe_globals):
        self.entries = safe_globals
        self.added = []
        self.added_safe = []

    def __enter__(self):
        from ember.autograd import function
        before, before_safe = set(function.registered_functions()), set(_SAFE)
        add_safe_globals(self.entries)
        self.added = [n for n in function.registered_functions() if n not in before]
        self.added_safe = [n for n in _SAFE if n not in before_safe]
        return self

    def __exit__(self, *exc):
        from ember.autograd import function
        with function._named_lock:
            for name in self.added:
                function._NAMED.pop(name, None)
        with _safe_lock:
            for name in self.added_safe:
                _SAFE.pop(name, None)
        return False


def _ember_classes():
    """name -> class of ember's own nn modules (the explicit registry whole-module loads
    resolve without add_safe_globals): every Module subclass defined in ember.nn."""
    import ember.nn  # noqa: F401 - fixed ember modules, never a name read from a file
    from ember.nn.modules.module import Module
    from ember.nn.parallel import data_parallel  # noqa: F401
    out, todo = {}, [Module]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__module__.startswith("ember.nn."):
            out[_default_name(cls)] = cls
    return out


def _ember_functions():
    """name -> function of ember.nn.functional and ember's top-level functions (activations
    modules hold as attributes)."""
    import ember
    from ember.nn import functional
    out = {}
    for prefix, mod in (("ember.nn.functional.", functional), ("ember.", ember)):
        for k, v in vars(mod).items():
            if not k.startswith("_") and callable(v) and not isinstance(v, type):
                out.setdefault(prefix + k, v)
    return out


class _ObjCtx:
    """Identity memo for one save/load: shared modules and parameters are stored once."""

    def __init__(self):
        self.ids, self.objs, self.funcs = {}, [], None


def _function_name(fn):
    for name, obj in list(_SAFE.items()):
        if obj is fn:
            return name
    for name, obj in _ember_functions().items():
        if obj is fn:
            return name
    return None


def _encode_module(obj, path, tensors, ctx):
    cls = type(obj)
    name = next((n for n, c in list(_SAFE.items()) if c is cls), None)
    if name is None and cls.__module__.startswith("ember.nn."):
        name = _default_name(cls)
    if name is None:
        raise EmberTypeError(f"ember.save: cannot save the module at '{path or '<root>'}': its "
                             f"class {_default_name(cls)} is not an ember.nn class; register it "
                             f"first with ember.serialization.add_safe_globals([{cls.__name__}]) "
                             "(loading needs the same registration)")
    ctx.ids[id(obj)] = len(ctx.ids)
    ctx.objs.append(obj)  # keep alive so ids stay unique during this save
    state = {k: _encode(v, _join(path, k), tensors, ctx) for k, v in obj.__dict__.items()}
    return {"__module__": name, "__id__": ctx.ids[id(obj)], "__state__": state}


# ---------------------------------------------------------------------------- encoding
def _encode(obj, path, tensors, ctx=None):
    """Replace tensors in ``obj`` by {"__tensor__": key}, filling ``tensors``; return JSON data.
    Inside a module (``ctx`` set) shared tensors and modules are stored once and referenced."""
    if "ember.nn" in sys.modules:  # else no Module exists yet
        from ember.nn.modules.module import Module
    else:
        Module = ()
    if Module and isinstance(obj, Module):
        if ctx is None:
            ctx = _ObjCtx()
        if id(obj) in ctx.ids:
            return {"__ref__": ctx.ids[id(obj)]}
        return _encode_module(obj, path, tensors, ctx)
    if isinstance(obj, Tensor) or _is_torch_tensor(obj) or isinstance(obj, np.ndarray):
        if ctx is not None and id(obj) in ctx.ids:
            return {"__ref__": ctx.ids[id(obj)]}
        arr = _as_array(obj)
        key = path or "tensor"
        base, n = key, 1
        while key in tensors:
            key = f"{base}#{n}"
            n += 1
        tensors[key] = arr if arr.flags.c_contiguous else np.array(arr, order="C")
        out = {"__tensor__": key}
        if arr.dtype.kind == "c":  # as its real view (..., 2): safetensors has no complex128
            part = np.float32 if arr.dtype == np.complex64 else np.float64
            tensors[key] = tensors[key].view(part).reshape(arr.shape + (2,))
            out["__complex__"] = True
        if isinstance(obj, np.ndarray):
            out["__numpy__"] = True
        elif isinstance(obj, Tensor):
            from ember.nn.parameter import Parameter
            if isinstance(obj, Parameter):
                out["__param__"] = bool(obj.requires_grad)
            elif obj.requires_grad and obj.grad_fn is None:
                out["__requires_grad__"] = True
        if ctx is not None:
            ctx.ids[id(obj)] = len(ctx.ids)
            ctx.objs.append(obj)
            out["__id__"] = ctx.ids[id(obj)]
        return out
    if isinstance(obj, dict):
        if all(isinstance(k, str) for k in obj) and "__tensor__" not in obj:
            return {"__dict__": {k: _encode(v, _join(path, k), tensors, ctx)
                                 for k, v in obj.items()},
                    "__ordered__": isinstance(obj, OrderedDict)}
        items = []
        for k, v in obj.items():
            if not isinstance(k, (str, int, float, bool)) and k is not None:
                raise EmberTypeError(f"ember.save: dict keys must be str, int, float, bool or "
                                     f"None, got {type(k).__name__}")
            items.append([k, _encode(v, _join(path, str(k)), tensors, ctx)])
        return {"__items__": items, "__ordered__": isinstance(obj, OrderedDict)}
    if isinstance(obj, tuple):
        return {"__tuple__": [_encode(v, _join(path, str(i)), tensors, ctx)
                              for i, v in enumerate(obj)]}
    if isinstance(obj, list):
        return [_encode(v, _join(path, str(i)), tensors, ctx) for i, v in enumerate(obj)]
    if isinstance(obj, (set, frozenset)) and ctx is not None:
        return {"__set__": [_encode(v, path, tensors, ctx) for v in sorted(obj, key=repr)],
                "__frozen__": isinstance(obj, frozenset)}
    if isinstance(obj, (np.integer, np.floating, np.bool_)):
        return obj.item()
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    from ember import _dtype
    if isinstance(obj, _dtype.dtype):
        return {"__dtype__": obj.name}
    if ctx is not None and callable(obj):
        name = _function_name(obj)
        if name is not None:
            return {"__function__": name}
        raise EmberTypeError(f"ember.save: the module attribute at '{path}' is the function "
                             f"{obj!r}, which is neither an ember function nor registered; "
                             "register it with ember.serialization.add_safe_globals([fn]) "
                             "(or remove it, e.g. a hook, before saving)")
    raise EmberTypeError(f"ember.save: cannot serialize an object of type {type(obj).__name__} "
                         f"at '{path or '<root>'}' (supported: tensors, ndarrays, dicts, lists, "
                         "tuples, numbers, strings, None, modules)")


class _Unknown(Exception):
    """A structure entry naming a class or function no registry holds."""


def _complex_of(arr, key):
    """The complex array stored as its real view ``arr`` (float32/float64, last dim 2)."""
    if arr.dtype not in (np.float32, np.float64) or arr.ndim == 0 or arr.shape[-1] != 2:
        raise SerializationError(f"ember.load: tensor {key!r} is marked complex but holds "
                                 f"{arr.dtype}{list(arr.shape)} (expected float32/float64 with "
                                 "a last dimension of 2)")
    whole = np.complex64 if arr.dtype == np.float32 else np.complex128
    return np.ascontiguousarray(arr).view(whole)[..., 0]


def _decode(data, tensors, ctx=None):
    if isinstance(data, list):
        return [_decode(v, tensors, ctx) for v in data]
    if isinstance(data, dict):
        if "__tensor__" in data:
            key = data["__tensor__"]
            if not isinstance(key, str) or key not in tensors:
                raise _Missing(key)
            if data.get("__complex__"):
                tensors[key] = _complex_of(tensors[key], key)
            if data.get("__numpy__"):
                return tensors[key]
            if "__param__" in data:
                from ember.nn.parameter import Parameter
                t = Parameter(Tensor._make(tensors[key]), requires_grad=data["__param__"])
            else:
                t = Tensor._make(tensors[key])
                if data.get("__requires_grad__"):
                    t.requires_grad_(True)
            if "__id__" in data and ctx is not None:
                ctx.objs[data["__id__"]] = t
            return t
        if "__ref__" in data:
            return ctx.objs[data["__ref__"]]
        if "__module__" in data:
            return _decode_module(data, tensors, ctx)
        if "__tuple__" in data:
            return tuple(_decode(v, tensors, ctx) for v in data["__tuple__"])
        if "__items__" in data:
            d = OrderedDict() if data.get("__ordered__") else {}
            for k, v in data["__items__"]:
                d[k] = _decode(v, tensors, ctx)
            return d
        if "__dict__" in data:
            d = OrderedDict() if data.get("__ordered__") else {}
            for k, v in data["__dict__"].items():
                d[k] = _decode(v, tensors, ctx)
            return d
        if "__set__" in data:
            items = [_decode(v, tensors, ctx) for v in data["__set__"]]
            return frozenset(items) if data.get("__frozen__") else set(items)
        if "__dtype__" in data:
            from ember import _dtype
            return _dtype._by_name(data["__dtype__"])
        if "__function__" in data:
            name = data["__function__"]
            fn = _SAFE.get(name)
            if fn is None and not ctx.weights_only:
                fn = ctx.ember_functions().get(name)
            if fn is None:
                raise _Unknown("function", name)
            return fn
    return data


def _decode_module(data, tensors, ctx):
    name = data["__module__"]
    cls = _SAFE.get(name)
    if cls is None and not ctx.weights_only:
        cls = ctx.ember_classes().get(name)
    if cls is None:
        raise _Unknown("class", name)
    from ember.nn.modules.module import Module
    if not (isinstance(cls, type) and issubclass(cls, Module)):
        raise _Unknown("class", name)
    obj = cls.__new__(cls)
    ctx.objs[data["__id__"]] = obj
    state = {k: _decode(v, tensors, ctx) for k, v in data["__state__"].items()}
    obj.__dict__.update(state)
    return obj


class _LoadCtx:
    def __init__(self, weights_only):
        self.weights_only = weights_only
        self.objs = {}
        self._classes = self._functions = None

    def ember_classes(self):
        if self._classes is None:
            self._classes = _ember_classes()
        return self._classes

    def ember_functions(self):
        if self._functions is None:
            self._functions = _ember_functions()
        return self._functions


def _join(path, key):
    return f"{path}.{key}" if path else key


def _is_torch_tensor(obj):
    return type(obj).__module__.startswith("torch") and hasattr(obj, "detach") and \
        hasattr(obj, "numpy")


def _as_array(obj):
    if isinstance(obj, Tensor):
        return obj._data
    if isinstance(obj, np.ndarray):
        return obj
    return obj.detach().cpu().numpy()


# ---------------------------------------------------------------------------- save
def save(obj, f, pickle_module=None, pickle_protocol=None, _use_new_zipfile_serialization=True):
    """Write ``obj`` (a tensor, or dicts/lists/tuples of tensors, numbers and strings: state
    dicts, optimizer state dicts, checkpoints) to the path or binary file object ``f``.

    Writing to a path is atomic. Raises TypeError for objects it cannot store (there is no
    pickle fallback).
    """
    if pickle_module is not None:
        raise EmberValueError("ember.save never pickles; pickle_module is not supported")
    tensors = {}
    structure = _encode(obj, "", tensors)
    meta = {_META_KEY: json.dumps({"format": _FORMAT, "structure": structure})}
    st_save = require("safetensors.numpy", feature="ember.save").save
    for k, a in tensors.items():
        if a.dtype.kind not in "biuf" and a.dtype.name != "bfloat16":
            raise EmberTypeError(f"ember.save: tensor '{k}' has unsupported dtype {a.dtype}")
    payload = st_save(tensors, metadata=meta)
    if hasattr(f, "write"):
        f.write(payload)
        return
    atomic_write(f, payload)


# ---------------------------------------------------------------------------- load
class _Missing(Exception):
    """A structure entry naming a tensor the file does not hold."""


_ITEMSIZE = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "I16": 2, "U16": 2,
             "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}


def read_bytes(f):
    """(bytes, display name) of a path or binary file object."""
    if hasattr(f, "read"):
        return f.read(), repr(getattr(f, "name", "<file object>"))
    name = os.fspath(f)
    try:
        with open(name, "rb") as fh:
            return fh.read(), repr(name)
    except IsADirectoryError:
        raise SerializationError(f"{name!r} is a directory, not a file") from None


def _check_header(data, name, who="ember.load"):
    """The parsed safetensors header of ``data`` (validated: every tensor entry's dtype, shape
    and byte range fit the file); UnsafeFileError for pickles and other formats,
    SerializationError for a truncated or corrupt safetensors file."""
    if len(data) > 8 and data[8:9] == b"{":
        return _safetensors_header(data, name, who)
    if data[:2] == b"PK":
        raise UnsafeFileError(f"{who}: {name} is a zip archive (torch.save's or torch.jit.save's "
                              "format), which contains a pickle; ember refuses to unpickle files "
                              "because that can run arbitrary code. Convert it with safetensors "
                              "(e.g. safetensors.torch.save_file(state_dict, path)) and load "
                              "that.")
    if data[:1] == b"\x80" or data[:1] in (b"(", b"]", b"}", b"c"):
        raise UnsafeFileError(f"{who}: {name} looks like a pickle file; ember refuses to "
                              "unpickle because that can run arbitrary code. Save it as "
                              "safetensors instead.")
    what = "it is empty" if not data else f"only {len(data)} bytes" if len(data) <= 8 else \
        "no valid header"
    raise UnsafeFileError(f"{who}: {name} is not a safetensors file ({what}); ember reads only "
                          "safetensors files")


def _safetensors_header(data, name, who):
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise SerializationError(f"{who}: {name} is truncated: its header claims {n} bytes but "
                                 f"the file has only {len(data) - 8} after the length field")
    try:
        header = json.loads(data[8:8 + n])
    except (ValueError, RecursionError) as e:
        raise SerializationError(f"{who}: {name} has a corrupt safetensors header (not valid "
                                 f"JSON: {e})") from None
    if not isinstance(header, dict):
        raise SerializationError(f"{who}: {name} has a corrupt safetensors header (a JSON "
                                 f"{type(header).__name__}, expected an object)")
    size = len(data) - 8 - n
    for key, entry in header.items():
        if key == "__metadata__":
            if not isinstance(entry, dict) or not all(isinstance(v, str) for v in entry.values()):
                raise SerializationError(f"{who}: {name}: corrupt header: __metadata__ must map "
                                         "strings to strings")
            continue
        try:
            dt, shape, (b, e) = entry["dtype"], entry["shape"], entry["data_offsets"]
            ok = isinstance(dt, str) and all(isinstance(d, int) and d >= 0 for d in shape) \
                and isinstance(b, int) and isinstance(e, int) and 0 <= b <= e
        except (KeyError, TypeError, ValueError):
            ok = False
        if not ok:
            raise SerializationError(f"{who}: {name}: corrupt header entry for tensor {key!r}: "
                                     f"{entry!r} (expected dtype, shape and data_offsets)")
        if e > size:
            raise SerializationError(f"{who}: {name} is truncated: tensor {key!r} needs bytes "
                                     f"[{b}, {e}) of the data, which has only {size}")
        item = _ITEMSIZE.get(dt)
        count = 1
        for d in shape:
            count *= d
        if item is not None and count * item != e - b:
            raise SerializationError(f"{who}: {name}: corrupt header: tensor {key!r} of dtype "
                                     f"{dt} and shape {list(shape)} needs {count * item} bytes, "
                                     f"its data_offsets give {e - b}")
    return header


def _bf16_as_i16(data, header):
    """``data`` with the header's BF16 entries declared I16 (same width): safetensors' NumPy
    reader has no bfloat16, the bits are viewed back as bfloat16 after reading. Only the dtype
    fields change (the header is re-encoded from the parsed JSON, so a tensor name or metadata
    string equal to a dtype name is left alone); data offsets are relative to the data section,
    which is kept as it is."""
    (n,) = struct.unpack("<Q", data[:8])
    edited = {k: (dict(v, dtype="I16") if k != "__metadata__" and v["dtype"] == "BF16" else v)
              for k, v in header.items()}
    text = json.dumps(edited, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)   # safetensors pads its header to 8 bytes with spaces
    return struct.pack("<Q", len(text)) + text + data[8 + n:]


def read_safetensors(data, name, who="ember.load"):
    """(header, metadata, {key: writable ndarray}) of safetensors bytes; the errors of
    ``_check_header``, and SerializationError for data safetensors itself rejects."""
    header = _check_header(data, name, who)
    st_load = require("safetensors.numpy", feature=who).load
    bf16 = [k for k, v in header.items() if k != "__metadata__" and v["dtype"] == "BF16"]
    if bf16:
        data = _bf16_as_i16(data, header)
    try:
        tensors = st_load(data)
    except Exception as e:  # noqa: BLE001 - safetensors' own error types; re-raised as ours
        raise SerializationError(f"{who}: {name} is not a valid safetensors file: {e}") from None
    tensors = {k: np.array(v, copy=True) if not v.flags.writeable else v
               for k, v in tensors.items()}
    if bf16:
        from ember._dtype import bfloat16_dtype
        for k in bf16:
            tensors[k] = tensors[k].view(bfloat16_dtype().numpy)
    return header, header.get("__metadata__") or {}, tensors


def load(f, map_location=None, pickle_module=None, *, weights_only=True, mmap=None, **kwargs):
    """Read an object written by ``save`` (or any safetensors file, as a flat dict of tensors)
    from a path or binary file object.

    Raises UnsafeFileError (a RuntimeError) for pickle files and anything that is not
    safetensors, SerializationError for a truncated or corrupt file, a format version this
    ember does not read or a missing tensor; ``map_location`` may only name the cpu.
    """
    if map_location is not None and str(map_location).split(":")[0] not in ("cpu",):
        if not callable(map_location) and not isinstance(map_location, dict):
            raise EmberRuntimeError(f"ember.load: only the cpu device exists, got "
                                    f"{map_location!r}")
    data, name = read_bytes(f)
    if data[:6] == b"\x93NUMPY":
        import io
        try:
            return Tensor._make(np.load(io.BytesIO(data), allow_pickle=False))
        except ValueError as e:
            raise UnsafeFileError(f"ember.load: {name} is a .npy file ember cannot read "
                                  f"without unpickling ({e})") from None
    header, metadata, tensors = read_safetensors(data, name)
    meta = metadata.get(_META_KEY)
    if meta is None:
        order = sorted(tensors, key=lambda k: header[k]["data_offsets"][0]
                       if k in header else 0)
        return OrderedDict((k, Tensor._make(tensors[k])) for k in order)
    try:
        doc = json.loads(meta)
        version, structure = doc["format"], doc["structure"]
    except (ValueError, KeyError, TypeError, RecursionError) as e:
        raise SerializationError(f"ember.load: {name}: corrupt '{_META_KEY}' metadata "
                                 f"({type(e).__name__}: {e}); expected a JSON object with "
                                 "'format' and 'structure'") from None
    if version != _FORMAT:
        raise SerializationError(f"ember.load: {name} was written in format version "
                                 f"{version!r}; this ember reads version {_FORMAT}")
    try:
        return _decode(structure, tensors, _LoadCtx(bool(weights_only)))
    except _Unknown as e:
        kind, cname = e.args
        hint = (" It is one of ember's own; pass weights_only=False to load whole modules, or "
                "allow it with ember.serialization.add_safe_globals.") if weights_only and \
            (cname.startswith("ember.") and (cname in _ember_classes() or
                                            cname in _ember_functions())) else \
            (f" Register it with ember.serialization.add_safe_globals([{cname.rpartition('.')[2]}])"
             " before loading (and load with weights_only=False for whole modules); ember never "
             "imports names a file holds.")
        raise SerializationError(f"ember.load: {name} holds the {kind} {cname!r}, which is not "
                                 f"an allowed global.{hint}") from None
    except _Missing as e:
        raise SerializationError(f"ember.load: {name}: the structure names tensor "
                                 f"{e.args[0]!r}, which the file does not contain") from None
    except (KeyError, TypeError, ValueError, AttributeError, RecursionError) as e:
        raise SerializationError(f"ember.load: {name}: corrupt '{_META_KEY}' structure "
                                 f"({type(e).__name__}: {e})") from None
