"""Contiguous copies of transposed arrays, tile by tile.

NumPy copies ``a.T`` in the output's order, reading ``a`` down its columns. When ``a``'s rows
lie a power of two apart (512 float32: 2 KiB) the reads of a column fall into a few cache
sets, and beyond the caches the copy runs far below memory speed: (2304, 512) float32 took
7.8 ms and (2304, 256) 2.2 ms, against 1.1 and 0.48 ms in TILE x TILE tiles, each read and
written within L1 (Intel Xeon, one thread; a plain copy of (2304, 512) takes 0.34 ms). The
convolution engine's weight layouts are such transposes (``conv.direct``'s packed weight and
weight gradient, ``conv.thin``, the dW^T products of ``conv.im2col`` / ``conv.direct1x1``).

NumPy's copy of each tile still moves one element at a time through its strided loop (~2.5 ns
an element: ResNet's (512, 4608) 3x3 weight 5.7-6.1 ms on an AMD EPYC Zen 4); once its kernel
is compiled (in the background; the NumPy tiles meanwhile, the same values) a matrix whose
rows are contiguous runs ``transpose_numba.transpose_flat`` instead.
"""
import numpy as np
from numpy.lib.stride_tricks import as_strided

TILE = 64
MIN_TILED = 1 << 14   # elements of one matrix below which NumPy's copy is as fast


def tiled(M, N):
    """Whether an (M, N) matrix is copied in tiles: at least MIN_TILED elements and TILE rows
    and columns (below, the tile loop's Python costs more than it saves)."""
    return M * N >= MIN_TILED and M >= TILE and N >= TILE


def transposed(a, out=None):
    """The last two axes of ``a`` swapped, as a new C-contiguous array, or written into ``out``
    (any layout, the swapped shape) when given; in TILE x TILE tiles where ``tiled``."""
    *lead, M, N = a.shape
    if out is None:
        out = np.empty((*lead, N, M), a.dtype)
    if not tiled(M, N):
        np.copyto(out, np.swapaxes(a, -1, -2))
        return out
    kernel = _kernel(a, out)
    for idx in np.ndindex(*lead):
        src, dst = a[idx], out[idx]
        if kernel is not None:
            kernel(_flat(src), M, N, src.strides[0] // src.itemsize, _flat(dst),
                   dst.strides[0] // dst.itemsize)
            continue
        for i in range(0, N, TILE):
            for j in range(0, M, TILE):
                dst[i:i + TILE, j:j + TILE] = src[j:j + TILE, i:i + TILE].T
    return out


_signatures = {}


def _kernel(a, out):
    """``transpose_numba.transpose_flat`` when it can run now on these arrays (float32 / float64,
    the same dtype, aligned and writeable: the compiled signature's array type; each matrix's
    rows contiguous, a whole number of elements apart), else None."""
    dt = a.dtype
    if dt not in (np.float32, np.float64) or out.dtype != dt or \
            not (a.flags.aligned and out.flags.aligned and a.flags.writeable) or \
            a.strides[-1] != dt.itemsize or out.strides[-1] != dt.itemsize or \
            a.strides[-2] < 0 or out.strides[-2] < 0 or \
            a.strides[-2] % dt.itemsize or out.strides[-2] % dt.itemsize:
        return None
    from ember.kernels.runtime import compiler
    nb = compiler.kernel_module("ember.kernels.transpose_numba")
    if nb is None:
        return None
    sig = _signatures.get(dt.str)
    if sig is None:
        one = np.empty(1, dt)
        sig = _signatures[dt.str] = compiler.signature(one, 0, 0, 0, one, 0)
    return nb.transpose_flat if compiler.ready(nb.transpose_flat, sig) else None


def _flat(m):
    """The 2-D matrix ``m`` (rows contiguous) as the flat run from its first element to its
    last."""
    rows, cols = m.shape
    return as_strided(m, ((rows - 1) * (m.strides[0] // m.itemsize) + cols,), (m.itemsize,))
