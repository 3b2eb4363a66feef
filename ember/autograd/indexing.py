"""``Tensor.__getitem__`` / ``__setitem__``: turn a Python index into a kernel key, then dispatch."""
import warnings

import numpy as np

from ember.autograd import _generated as G
from ember.errors import EmberRuntimeError

_U8 = np.dtype(np.uint8)


def _tensor_cls():
    from ember.tensor import Tensor
    return Tensor


def to_key(key):
    """Convert tensors and lists inside an index to ndarrays; validate the element types. A
    uint8 index is a mask, as in torch (with its deprecation warning where it has dimensions)."""
    Tensor = _tensor_cls()
    if isinstance(key, tuple):
        return tuple(_one(k, Tensor) for k in key)
    return _one(key, Tensor)


def _byte_mask(a):
    """A uint8 index array as the bool mask torch reads it as."""
    if a.ndim:
        warnings.warn("indexing with dtype ember.uint8 is now deprecated, please use a dtype "
                      "ember.bool instead.", UserWarning, stacklevel=6)
    return a != 0


def _one(k, Tensor):
    if isinstance(k, Tensor):
        a = k._data
        if a.dtype.kind == "f":
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        return _byte_mask(a) if a.dtype == _U8 else a
    if isinstance(k, range):
        return np.arange(k.start, k.stop, k.step, dtype=np.int64)
    if isinstance(k, (list,)):
        if not k:
            return np.zeros(0, np.int64)
        a = np.asarray([x._data if isinstance(x, Tensor) else x for x in k])
        if a.dtype.kind == "f":
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        return a
    if isinstance(k, np.ndarray):
        return _byte_mask(np.asarray(k)) if k.dtype == _U8 else np.asarray(k)
    if k is None or k is Ellipsis or isinstance(k, (int, np.integer, slice, bool)):
        if isinstance(k, slice) and k.step is not None and k.step <= 0:
            raise ValueError("step must be greater than zero")
        return k
    raise IndexError(f"only integers, slices (`:`), ellipsis (`...`), None and long or byte "
                     f"tensors are valid indices (got {type(k).__name__})")


def _check_byte_mask_fill(name, key, values, accumulate):
    """torch writes a one-element value through one mask index with ``masked_fill_``, which
    refuses a uint8 mask: the same call raises here."""
    if accumulate:
        return
    keys = key if isinstance(key, tuple) else (key,)
    advanced = [k for k in keys if k is not None and k is not Ellipsis
                and not isinstance(k, (int, np.integer, slice, bool))]
    if len(advanced) != 1:
        return
    k = advanced[0]
    a = getattr(k, "_data", k)
    if a.__class__ is not np.ndarray or a.dtype != _U8 or not a.ndim:
        return
    size = np.size(getattr(values, "_data", values))
    if size == 1:
        raise EmberRuntimeError(f"{name}: masked_fill_ only supports boolean masks, but got mask "
                                "with dtype uint8 (torch fills a one-element value through one "
                                "mask index with masked_fill_; use a bool mask)")


def getitem(t, key):
    """``t[key]``: basic indexing returns a view; advanced indexing a copy."""
    return G.getitem(t, to_key(key))


def setitem(t, key, value):
    """``t[key] = value`` in place (recorded by autograd as index_put)."""
    _check_byte_mask_fill("setitem", key, value, False)
    G.index_put_(t, to_key(key), value, False)


def index_put(t, indices, values, accumulate=False, inplace=False):
    """``index_put`` / ``index_put_`` with ``indices`` a tuple of index tensors (torch's
    dtype rule: the values' dtype must be the tensor's); other keys (slices, ints) write as
    ``t[key] = values``, which casts."""
    name = "index_put_" if inplace else "index_put"
    src, dst = getattr(values, "_data", None), getattr(t, "_data", None)
    tensor_keys = all(isinstance(getattr(i, "_data", i), np.ndarray) for i in indices)
    if tensor_keys and src is not None and dst is not None and src.dtype != dst.dtype:
        raise EmberRuntimeError(f"{name}: Index put requires the source and destination dtypes "
                                f"match, got {dst.dtype} for the destination and {src.dtype} "
                                "for the source (setitem casts; index_put does not)")
    _check_byte_mask_fill(name, tuple(indices), values, accumulate)
    fn = G.index_put_ if inplace else G.index_put
    return fn(t, to_key(tuple(indices)), values, accumulate)
