"""Kernels for ops the tracing JIT records (``size``: a shape read as a value)."""
import numpy as np


def size(a, dim):
    """The length of dimension ``dim`` of ``a`` as a 0-d int64 array (a traced shape value)."""
    return np.array(a.shape[dim], np.int64)


def copy_inplace(dst, src):
    """Write ``src`` into ``dst`` (broadcasting, unsafe cast) and return ``dst``."""
    np.copyto(dst, src, casting="unsafe")
    return dst
