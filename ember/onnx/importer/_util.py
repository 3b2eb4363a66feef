"""Small helpers shared by the importer functions."""
import math
import os

import numpy as np

import ember
from ember.errors import EmberRuntimeError


def _memory_bytes():
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return 1 << 36


# the most bytes one array the importer builds from a model's numbers (a shape, a count, a
# size) may take: the machine's memory; anything larger can only fail or swap the host to death
MAX_ALLOC_BYTES = _memory_bytes()


def check_alloc(nbytes, what, cls=EmberRuntimeError):
    """Raise ``cls`` naming ``what`` when an array of ``nbytes`` would exceed
    MAX_ALLOC_BYTES (checked before allocating, so a crafted shape such as [10**12] is an error,
    not a MemoryError or the host swapping)."""
    if nbytes > MAX_ALLOC_BYTES:
        raise cls(f"{what} would take {nbytes:,} bytes, more than this machine's "
                                f"memory ({MAX_ALLOC_BYTES:,} bytes; "
                                f"ember.onnx.importer._util.MAX_ALLOC_BYTES)")


def alloc_shape(shape, dtype, what):
    """``shape`` as a tuple of ints after checking every size is >= 0 and the array of
    ``dtype`` fits (``check_alloc``); raises EmberRuntimeError naming ``what``."""
    shape = tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise EmberRuntimeError(f"{what}: negative size in shape {list(shape)}")
    check_alloc(math.prod(shape) * np.dtype(dtype).itemsize, f"{what} of shape {list(shape)}")
    return shape


def ints(t):
    """A 1-d integer tensor (or None) as a list of Python ints."""
    if t is None:
        return None
    return [int(v) for v in np.asarray(t.detach().numpy()).reshape(-1)]


def scalar(t):
    return np.asarray(t.detach().numpy()).reshape(-1)[0].item()


def const(arr):
    return ember.tensor(np.array(arr, order="C"))


def onnx_np_dtype(elem_type):
    from ember.onnx.importer.load import np_dtype_of
    return np_dtype_of(elem_type)


def ember_dtype(np_dtype):
    from ember._dtype import from_numpy_dtype
    return from_numpy_dtype(np.dtype(np_dtype))


def norm_axis(axis, rank):
    a = axis + rank if axis < 0 else axis
    if not 0 <= a < max(rank, 1):
        raise EmberRuntimeError(f"axis {axis} is out of range for rank {rank}")
    return a
