"""Small helpers shared by the importer functions."""
import numpy as np

import ember
from ember.errors import EmberRuntimeError


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
