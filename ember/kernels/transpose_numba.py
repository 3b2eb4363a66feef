"""Numba kernel of ``ember.kernels.transpose``: one matrix transposed tile by tile.

Imported lazily (never by ``import ember``), compiled once per dtype and cached on disk. The
matrices travel as flat runs with their row strides, so every layout (a contiguous weight, a
padded packed weight's column block) shares one compiled signature per dtype.
"""
from numba import njit
from numpy import uintp

TILE = 16


@njit(cache=True, nogil=True)
def transpose_flat(src, M, N, srs, dst, drs):
    """dst[j * drs + i] = src[i * srs + j] for i < M, j < N: the (M, N) matrix of rows ``srs``
    elements apart transposed into rows ``drs`` apart, in TILE x TILE tiles (each read and
    written within L1). Unsigned indices: no negative-index wraparound in the inner loop."""
    T = uintp(TILE)
    M, N, srs, drs = uintp(M), uintp(N), uintp(srs), uintp(drs)
    for i0 in range(uintp(0), M, T):
        i1 = min(M, i0 + T)
        for j0 in range(uintp(0), N, T):
            j1 = min(N, j0 + T)
            for j in range(j0, j1):
                d = j * drs
                for i in range(i0, i1):
                    dst[d + i] = src[i * srs + j]
