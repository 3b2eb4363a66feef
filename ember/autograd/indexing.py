"""``Tensor.__getitem__`` / ``__setitem__``: turn a Python index into a kernel key, then dispatch."""
import numpy as np

from ember.autograd import _generated as G


def _tensor_cls():
    from ember.tensor import Tensor
    return Tensor


def to_key(key):
    """Convert tensors and lists inside an index to ndarrays; validate the element types."""
    Tensor = _tensor_cls()
    if isinstance(key, tuple):
        return tuple(_one(k, Tensor) for k in key)
    return _one(key, Tensor)


def _one(k, Tensor):
    if isinstance(k, Tensor):
        a = k._data
        if a.dtype.kind == "f":
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        return a
    if isinstance(k, range):
        return np.arange(k.start, k.stop, k.step, dtype=np.int64)
    if isinstance(k, (list,)):
        if not k:
            return np.zeros(0, np.int64)
        a = np.asarray([x._data if isinstance(x, Tensor) else x for x in k])
        if a.dtype.kind == "f":
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        return a
    if k is None or k is Ellipsis or isinstance(k, (int, np.integer, slice, np.ndarray, bool)):
        if isinstance(k, slice) and k.step is not None and k.step <= 0:
            raise ValueError("step must be greater than zero")
        return k
    raise IndexError(f"only integers, slices (`:`), ellipsis (`...`), None and long or byte "
                     f"tensors are valid indices (got {type(k).__name__})")


def getitem(t, key):
    """``t[key]``: basic indexing returns a view; advanced indexing a copy."""
    return G.getitem(t, to_key(key))


def setitem(t, key, value):
    """``t[key] = value`` in place (recorded by autograd as index_put)."""
    G.index_put_(t, to_key(key), value, False)
