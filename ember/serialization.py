"""``ember.save`` / ``ember.load``: safe serialization with safetensors, never pickle.

File layout: one safetensors file. Tensors are stored under their dotted path in the saved
object (a flat state dict keeps its own keys, so torch's ``safetensors.torch.load_file`` reads
it as a state dict). Everything that is not a tensor — nesting, numbers, strings, tuples,
integer dict keys (optimizer state) — goes to a JSON document in the header metadata under
``"ember"``. A safetensors file without that entry (e.g. written by PyTorch) loads as a flat
dict of tensors.

Writes are atomic: the bytes go to a temporary file in the destination folder, are flushed and
fsync'ed, then ``os.replace``d over the destination, so a failed save leaves the previous file
intact. ``load`` checks the header first and refuses pickle-based files (``torch.save``'s zip
or legacy format, plain pickles) with a clear error instead of unpickling them.
"""
import json
import os
import struct
from collections import OrderedDict

import numpy as np

from ember.tensor import Tensor

from ember.utils.files import atomic_write

__all__ = ["save", "load", "UnsafeFileError"]

_META_KEY = "ember"
_FORMAT = 1


class UnsafeFileError(RuntimeError):
    """The file is not a safetensors file (for instance a pickle); ember will not execute it."""


# ---------------------------------------------------------------------------- encoding
def _encode(obj, path, tensors):
    """Replace tensors in ``obj`` by {"__tensor__": key}, filling ``tensors``; return JSON data."""
    if isinstance(obj, Tensor) or _is_torch_tensor(obj) or isinstance(obj, np.ndarray):
        arr = _as_array(obj)
        key = path or "tensor"
        base, n = key, 1
        while key in tensors:
            key = f"{base}#{n}"
            n += 1
        tensors[key] = arr if arr.flags.c_contiguous else np.array(arr, order="C")
        return {"__tensor__": key}
    if isinstance(obj, dict):
        if all(isinstance(k, str) for k in obj) and "__tensor__" not in obj:
            return {"__dict__": {k: _encode(v, _join(path, k), tensors) for k, v in obj.items()},
                    "__ordered__": isinstance(obj, OrderedDict)}
        items = []
        for k, v in obj.items():
            if not isinstance(k, (str, int, float, bool)) and k is not None:
                raise TypeError(f"ember.save: dict keys must be str, int, float, bool or None, "
                                f"got {type(k).__name__}")
            items.append([k, _encode(v, _join(path, str(k)), tensors)])
        return {"__items__": items}
    if isinstance(obj, tuple):
        return {"__tuple__": [_encode(v, _join(path, str(i)), tensors)
                              for i, v in enumerate(obj)]}
    if isinstance(obj, list):
        return [_encode(v, _join(path, str(i)), tensors) for i, v in enumerate(obj)]
    if isinstance(obj, (np.integer, np.floating, np.bool_)):
        return obj.item()
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TypeError(f"ember.save: cannot serialize an object of type {type(obj).__name__} at "
                    f"'{path or '<root>'}' (supported: tensors, ndarrays, dicts, lists, tuples, "
                    "numbers, strings, None)")


def _decode(data, tensors):
    if isinstance(data, list):
        return [_decode(v, tensors) for v in data]
    if isinstance(data, dict):
        if "__tensor__" in data:
            return Tensor._make(tensors[data["__tensor__"]])
        if "__tuple__" in data:
            return tuple(_decode(v, tensors) for v in data["__tuple__"])
        if "__items__" in data:
            return {k: _decode(v, tensors) for k, v in data["__items__"]}
        if "__dict__" in data:
            d = OrderedDict() if data.get("__ordered__") else {}
            for k, v in data["__dict__"].items():
                d[k] = _decode(v, tensors)
            return d
    return data


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
        raise ValueError("ember.save never pickles; pickle_module is not supported")
    tensors = {}
    structure = _encode(obj, "", tensors)
    meta = {_META_KEY: json.dumps({"format": _FORMAT, "structure": structure})}
    from safetensors.numpy import save as st_save
    for k, a in tensors.items():
        if a.dtype.kind not in "biuf":
            raise TypeError(f"ember.save: tensor '{k}' has unsupported dtype {a.dtype}")
    payload = st_save(tensors, metadata=meta)
    if hasattr(f, "write"):
        f.write(payload)
        return
    atomic_write(f, payload)


# ---------------------------------------------------------------------------- load
def _check_header(data, name):
    """The parsed safetensors header of ``data``; UnsafeFileError for anything else."""
    if len(data) >= 10:
        (n,) = struct.unpack("<Q", data[:8])
        if n <= len(data) - 8 and data[8:9] == b"{":
            try:
                return json.loads(data[8:8 + n])
            except ValueError:
                pass
    if data[:2] == b"PK":
        raise UnsafeFileError(f"{name} is a zip archive (torch.save's format), which contains a "
                              "pickle; ember.load refuses to unpickle files because that can run "
                              "arbitrary code. Convert it with safetensors (e.g. "
                              "safetensors.torch.save_file(state_dict, path)) and load that.")
    if data[:1] == b"\x80" or data[:1] in (b"(", b"]", b"}", b"c"):
        raise UnsafeFileError(f"{name} looks like a pickle file; ember.load refuses to unpickle "
                              "because that can run arbitrary code. Save it as safetensors "
                              "instead.")
    raise UnsafeFileError(f"{name} is not a safetensors file (no valid header); ember.load "
                          "reads only safetensors files")


def load(f, map_location=None, pickle_module=None, *, weights_only=True, mmap=None, **kwargs):
    """Read an object written by ``save`` (or any safetensors file, as a flat dict of tensors)
    from a path or binary file object.

    Raises UnsafeFileError (a RuntimeError) for pickle files and anything that is not
    safetensors; ``map_location`` may only name the cpu.
    """
    if map_location is not None and str(map_location).split(":")[0] not in ("cpu",):
        if not callable(map_location) and not isinstance(map_location, dict):
            raise RuntimeError(f"ember.load: only the cpu device exists, got {map_location!r}")
    if hasattr(f, "read"):
        data = f.read()
        name = getattr(f, "name", "the file")
    else:
        name = os.fspath(f)
        with open(name, "rb") as fh:
            data = fh.read()
    header = _check_header(data, repr(name) if not hasattr(f, "read") else name)
    from safetensors.numpy import load as st_load
    tensors = st_load(data)
    tensors = {k: np.array(v, copy=True) if not v.flags.writeable else v
               for k, v in tensors.items()}
    meta = (header.get("__metadata__") or {}).get(_META_KEY)
    if meta is None:
        order = sorted(tensors, key=lambda k: header[k]["data_offsets"][0]
                       if k in header else 0)
        return OrderedDict((k, Tensor._make(tensors[k])) for k in order)
    doc = json.loads(meta)
    return _decode(doc["structure"], tensors)
