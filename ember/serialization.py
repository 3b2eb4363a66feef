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
(as ``torch.save``), and the file gets ``open()``'s mode. ``load`` checks the header first:
``torch.save``'s zip archives are read by ``ember.torch_files`` (its own reader of their data,
with an allow-list of the globals they may name: never ``pickle``), and other pickle-based files
(the legacy format, plain pickles) are refused with a clear error; a truncated or corrupt file,
another format version or a missing tensor is a ``SerializationError`` naming the file and the
problem. Nothing is ever unpickled or imported.

Whole modules (``ember.save(model)``, also inside a checkpoint dict) are stored without pickle:
each module becomes a JSON entry naming its class (module and qualified name) and holding its
attribute dict (parameters, buffers and tensor attributes as tensors in the file, submodules
nested, plain values and dtypes as JSON, shared parameters and modules stored once and
referenced). An attribute that is none of these (an arbitrary object, a function that is not
ember's nor registered, a hook) is an EmberTypeError at save time naming it. ``ember.load``
rebuilds modules whatever ``weights_only`` says (building one runs no code): the class resolves
among classes registered with ``add_safe_globals`` (torch's name), ember's own nn classes, and
``nn.Module`` subclasses of modules the program has already imported (``sys.modules``, the
script's ``__main__`` included) — never by importing. The object is made with
``object.__new__`` and its attribute dict restored, without calling ``__init__``,
``__setstate__`` or anything the file names. Any other name is a SerializationError saying which
module to import or what to register. Functions held as attributes (e.g. ``activation=F.relu``)
resolve among ember's functional namespace and registered functions only. A NumPy array saved
comes back as a NumPy array, and a ``.npy`` file (``numpy.save``) loads as a Tensor (read with
``allow_pickle=False``).

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


class _DirectoryError(SerializationError, IsADirectoryError):
    """A directory given where a file is read (an IsADirectoryError, as torch raises)."""


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


# the modules that hold what ember.nn.modules.misc held until it was split by torch's names
_FORMERLY_MISC = {f"ember.nn.modules.{m}" for m in ("channelshuffle", "distance", "fold", "padding",
                                                     "pixelshuffle", "upsampling")}


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
            if cls.__module__ in _FORMERLY_MISC:   # files saved before the move name them so
                out[f"ember.nn.modules.misc.{cls.__qualname__}"] = cls
    return out


def _ember_hook_classes():
    """name -> class of the hook objects ember's own nn utilities register on modules
    (``nn.utils.weight_norm``, ``spectral_norm``, the pruning methods of ``nn.utils.prune``):
    plain attribute holders, rebuilt like modules. A fixed list, never a name read from a
    file."""
    from ember.nn.utils import prune
    from ember.nn.utils.spectral_norm import SpectralNorm
    from ember.nn.utils.weight_norm import WeightNorm
    pruning = (prune.Identity, prune.RandomUnstructured, prune.L1Unstructured,
               prune.RandomStructured, prune.LnStructured, prune.CustomFromMask,
               prune.PruningContainer)
    return {_default_name(c): c for c in (WeightNorm, SpectralNorm) + pruning}


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
    """Identity memo for one save: shared modules (anywhere) and shared tensors (inside
    modules) are stored once."""

    def __init__(self):
        self.ids, self.objs = {}, []

    def add(self, obj):
        self.ids[id(obj)] = len(self.ids)
        self.objs.append(obj)  # keep alive so ids stay unique during this save
        return self.ids[id(obj)]


def _function_name(fn):
    for name, obj in list(_SAFE.items()):
        if obj is fn:
            return name
    for name, obj in _ember_functions().items():
        if obj is fn:
            return name
    return None


def _lookup(modname, qualname):
    """The object ``qualname`` names in the already imported module ``modname``: plain
    dictionary lookups in ``sys.modules`` and class namespaces, never an import, a module
    ``__getattr__`` or a descriptor. Raises _Unknown (kind, name, reason)."""
    full = f"{modname}.{qualname}"
    mod = sys.modules.get(modname) if isinstance(modname, str) else None
    if not isinstance(mod, types.ModuleType):
        raise _Unknown("class", full, "not_imported", modname)
    obj, parts = mod, qualname.split(".") if isinstance(qualname, str) else [""]
    for part in parts:
        space = vars(obj) if isinstance(obj, (types.ModuleType, type)) else {}
        if not part or part not in space:
            raise _Unknown("class", full, "missing", modname)
        obj = space[part]
    return obj


def _class_method(cls, name):
    """The plain function ``name`` defined on ``cls`` or a base (class dictionaries only, no
    descriptor runs), or None."""
    for klass in cls.__mro__:
        fn = vars(klass).get(name)
        if fn is not None:
            return fn if isinstance(fn, types.FunctionType) else None
    return None


def _module_class_where(cls, path):
    """[module, qualname] of a Module subclass, checked to resolve back to ``cls`` (a class
    made inside a function, or shadowed since, cannot be found again at load)."""
    where = [cls.__module__, cls.__qualname__]
    try:
        found = _lookup(*where)
    except _Unknown:
        found = None
    if found is not cls:
        raise EmberTypeError(
            f"ember.save: cannot save the module at '{path or '<root>'}': its class "
            f"{_default_name(cls)} cannot be found by that name in its module (a class defined "
            "inside a function, or replaced since), so ember.load could not resolve it; define "
            "it at module level or register it with "
            f"ember.serialization.add_safe_globals([({cls.__name__}, 'a.unique.name')])")
    return where


def _class_ref(cls, path):
    """The JSON reference to a Module subclass: its registered name, or its module and
    qualified name."""
    name = next((n for n, c in list(_SAFE.items()) if c is cls), None)
    if name is not None:
        return {"__module__": name}
    return {"__module__": _default_name(cls), "__where__": _module_class_where(cls, path)}


_MEMBERS = ("_parameters", "_buffers", "_modules")  # named by the module's path, as state_dict


def _encode_module(obj, path, tensors, memo):
    if "parametrizations" in obj.__dict__.get("_modules", {}):
        raise EmberRuntimeError(f"ember.save: serialization of parametrized modules is only "
                                f"supported through state_dict() (as torch); the module at "
                                f"'{path or '<root>'}' is parametrized")
    out = _class_ref(type(obj), path)
    out["__id__"] = memo.add(obj)
    out["__state__"] = {k: _encode(v, path if k in _MEMBERS else _join(path, k), tensors, memo,
                                   True)
                        for k, v in obj.__dict__.items()}
    return out


# ---------------------------------------------------------------------------- encoding
def _encode(obj, path, tensors, memo, inside=False):
    """Replace tensors in ``obj`` by {"__tensor__": key}, filling ``tensors``; return JSON data.
    Modules are stored once per save (``memo``); inside a module (``inside``) shared tensors are
    too, and sets, devices, Module classes and named functions are accepted as attributes."""
    if "ember.nn" in sys.modules:  # else no Module exists yet
        from ember.nn.modules.module import Module
    else:
        Module = ()
    if Module and isinstance(obj, Module):
        if id(obj) in memo.ids:
            return {"__ref__": memo.ids[id(obj)]}
        return _encode_module(obj, path, tensors, memo)
    if isinstance(obj, Tensor) or _is_torch_tensor(obj) or isinstance(obj, np.ndarray):
        if inside and id(obj) in memo.ids:
            return {"__ref__": memo.ids[id(obj)]}
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
        if inside:
            out["__id__"] = memo.add(obj)
        return out
    if isinstance(obj, dict):
        if all(isinstance(k, str) for k in obj) and "__tensor__" not in obj:
            return {"__dict__": {k: _encode(v, _join(path, k), tensors, memo, inside)
                                 for k, v in obj.items()},
                    "__ordered__": isinstance(obj, OrderedDict)}
        items = []
        for k, v in obj.items():
            if not isinstance(k, (str, int, float, bool)) and k is not None:
                raise EmberTypeError(f"ember.save: dict keys must be str, int, float, bool or "
                                     f"None, got {type(k).__name__} at '{path or '<root>'}'")
            items.append([k, _encode(v, _join(path, str(k)), tensors, memo, inside)])
        return {"__items__": items, "__ordered__": isinstance(obj, OrderedDict)}
    from ember.tensor import Size, device
    if isinstance(obj, Size):
        return {"__size__": [int(d) for d in obj]}
    if isinstance(obj, tuple):
        return {"__tuple__": [_encode(v, _join(path, str(i)), tensors, memo, inside)
                              for i, v in enumerate(obj)]}
    if isinstance(obj, list):
        return [_encode(v, _join(path, str(i)), tensors, memo, inside) for i, v in enumerate(obj)]
    if isinstance(obj, (set, frozenset)) and inside:
        return {"__set__": [_encode(v, path, tensors, memo, inside)
                            for v in sorted(obj, key=repr)],
                "__frozen__": isinstance(obj, frozenset)}
    if isinstance(obj, (np.integer, np.floating, np.bool_)):
        return obj.item()
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    from ember import _dtype
    if isinstance(obj, _dtype.dtype):
        return {"__dtype__": obj.name}
    if isinstance(obj, device):
        return {"__device__": str(obj)}
    if inside and Module and isinstance(obj, type) and issubclass(obj, Module):
        return {"__type__": _class_ref(obj, path)}
    if inside and type(obj).__module__.startswith("ember.nn.utils.") and \
            _ember_hook_classes().get(_default_name(type(obj))) is type(obj):
        return {"__hook__": _default_name(type(obj)),
                "__state__": {k: _encode(v, _join(path, k), tensors, memo, inside)
                              for k, v in vars(obj).items()}}
    if inside and Module and isinstance(obj, types.MethodType) and \
            isinstance(obj.__self__, Module):
        name = obj.__func__.__name__
        if _class_method(type(obj.__self__), name) is obj.__func__:
            return {"__method__": name,
                    "__self__": _encode(obj.__self__, path, tensors, memo, inside)}
    if inside and callable(obj) and not isinstance(obj, type):
        name = _function_name(obj)
        if name is not None:
            return {"__function__": name}
        raise EmberTypeError(f"ember.save: the module attribute at '{path}' is the function "
                             f"{obj!r}, which is neither an ember function nor registered; "
                             "register it with ember.serialization.add_safe_globals([fn]) "
                             "(or remove it, e.g. a hook, before saving)")
    what = "the module attribute" if inside else "the object"
    raise EmberTypeError(
        f"ember.save: cannot serialize {what} at '{path or '<root>'}' of type "
        f"{type(obj).__module__}.{type(obj).__qualname__} (supported: tensors, ndarrays, dicts, "
        "lists, tuples, numbers, strings, None, dtypes, devices, modules; ember never pickles)")


class _Unknown(Exception):
    """A structure entry naming a class or function ember does not resolve:
    (kind, name, reason, module name)."""


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
        if "__type__" in data:
            return _resolve_class(data["__type__"], ctx)
        if "__hook__" in data:  # a hook object of ember's nn utilities
            cls = _ember_hook_classes().get(data["__hook__"])
            if cls is None:
                raise _Unknown("class", str(data["__hook__"]), "unregistered", None)
            hook = object.__new__(cls)
            hook.__dict__.update({k: _decode(v, tensors, ctx)
                                  for k, v in data["__state__"].items()})
            return hook
        if "__method__" in data:  # a module's own method (e.g. a hook it registered)
            from ember.nn.modules.module import Module
            owner, name = _decode(data["__self__"], tensors, ctx), data["__method__"]
            fn = _class_method(type(owner), name) if isinstance(owner, Module) and \
                isinstance(name, str) else None
            if fn is None:
                raise _Unknown("function", f"{type(owner).__qualname__}.{name}", "function",
                               None)
            return types.MethodType(fn, owner)
        if "__size__" in data:
            from ember.tensor import Size
            return Size(int(d) for d in data["__size__"])
        if "__device__" in data:
            from ember.tensor import device
            return device(str(data["__device__"]))
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
            if fn is None:
                fn = ctx.ember_functions().get(name)
            if fn is None or isinstance(fn, type):
                raise _Unknown("function", name, "function", None)
            return fn
    return data


def _resolve_class(ref, ctx):
    """The Module subclass a class reference names: a registered name, one of ember's nn
    classes, or (``__where__``) a class of an already imported module; _Unknown otherwise."""
    from ember.nn.modules.module import Module
    name = ref["__module__"]
    if not isinstance(name, str):
        raise _Unknown("class", repr(name), "unregistered", None)
    cls = _SAFE.get(name)
    if cls is None:
        cls = ctx.ember_classes().get(name)
    if cls is None:
        where = ref.get("__where__")
        if where is None:
            raise _Unknown("class", name, "unregistered", None)
        modname, qualname = where
        cls = _lookup(modname, qualname)
        name = f"{modname}.{qualname}"
    if not (isinstance(cls, type) and issubclass(cls, Module)):
        raise _Unknown("class", name, "not_module", None)
    return cls


def _decode_module(data, tensors, ctx):
    cls = _resolve_class(data, ctx)
    obj = object.__new__(cls)  # no __init__, __new__ or __setstate__ of the class runs
    ctx.objs[data["__id__"]] = obj
    state = {k: _decode(v, tensors, ctx) for k, v in data["__state__"].items()}
    obj.__dict__.update(state)
    return obj


class _LoadCtx:
    def __init__(self):
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
    """Write ``obj`` (a tensor, a whole ``nn.Module``, or dicts/lists/tuples of these, numbers
    and strings: state dicts, optimizer state dicts, checkpoints) to the path or binary file
    object ``f``.

    Writing to a path is atomic. Raises EmberTypeError (a TypeError) naming the object or
    module attribute it cannot store (there is no pickle fallback).
    """
    if pickle_module is not None:
        raise EmberValueError("ember.save never pickles; pickle_module is not supported")
    tensors = {}
    structure = _encode(obj, "", tensors, _ObjCtx())
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
        raise _DirectoryError(f"{name!r} is a directory, not a file") from None


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


def _unknown_message(kind, cname, reason, modname):
    """The explanation of a name ember.load does not resolve (see _Unknown)."""
    short = cname.rpartition(".")[2]
    register = (f"register it with ember.serialization.add_safe_globals([{short}]) before "
                "loading")
    if reason == "not_imported":
        where = "the script that saved it (define the class in the script that loads, or " \
            "import it)" if modname == "__main__" else f"module {modname!r}"
        return (f"the class {cname!r} from {where}, which this program has not imported; "
                f"import {modname} before ember.load, or {register}. ember never imports a "
                "module a file names")
    if reason == "missing" and modname == "__main__":
        return (f"the class {cname!r} of the script that saved it, which the running script "
                f"does not define; define or import {short} in the script before ember.load "
                f"(as torch.load needs), or {register}")
    if reason == "missing":
        return (f"the class {cname!r}, which module {modname!r} does not define; import the "
                f"module that defines it, or {register}")
    if reason == "not_module":
        return (f"the name {cname!r}, which is not an ember.nn.Module subclass; ember.load "
                "rebuilds only Module subclasses and never calls anything a file names")
    if kind == "function":
        return (f"the function {cname!r}, which is neither one of ember's functions nor an "
                f"allowed global; {register}")
    return f"the class {cname!r}, which is not an allowed global; {register}"


def load(f, map_location=None, pickle_module=None, *, weights_only=True, mmap=None, **kwargs):
    """Read an object written by ``save`` (or any safetensors file, as a flat dict of tensors)
    from a path or binary file object.

    Whole modules load whatever ``weights_only`` says: their classes resolve only among
    registered classes, ember's nn classes and Module subclasses of already imported modules,
    and rebuilding them runs none of their code. Raises UnsafeFileError (a RuntimeError) for
    pickle files and anything that is not safetensors, SerializationError for a truncated or
    corrupt file, a format version this ember does not read, a missing tensor or a name that
    does not resolve (saying which module to import or what to register); ``map_location`` may
    only name the cpu.
    """
    if map_location is not None and str(map_location).split(":")[0] not in ("cpu",):
        if not callable(map_location) and not isinstance(map_location, dict):
            raise EmberRuntimeError(f"ember.load: only the cpu device exists, got map_location="
                                    f"{map_location!r}: ember runs only on the CPU, so use "
                                    f"map_location='cpu' (or leave it out)")
    data, name = read_bytes(f)
    if data[:6] == b"\x93NUMPY":
        import io
        try:
            return Tensor._make(np.load(io.BytesIO(data), allow_pickle=False))
        except ValueError as e:
            raise UnsafeFileError(f"ember.load: {name} is a .npy file ember cannot read "
                                  f"without unpickling ({e})") from None
    if data[:2] == b"PK":       # torch.save's zip archive: read without unpickling
        from ember import torch_files
        return torch_files.read(data, name)
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
        return _decode(structure, tensors, _LoadCtx())
    except _Unknown as e:
        raise SerializationError(f"ember.load: {name} holds {_unknown_message(*e.args)}") \
            from None
    except _Missing as e:
        raise SerializationError(f"ember.load: {name}: the structure names tensor "
                                 f"{e.args[0]!r}, which the file does not contain") from None
    except (KeyError, TypeError, ValueError, AttributeError, RecursionError) as e:
        raise SerializationError(f"ember.load: {name}: corrupt '{_META_KEY}' structure "
                                 f"({type(e).__name__}: {e})") from None
