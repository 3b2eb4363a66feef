"""Numba kernels of ``reduction.cumsum``: running sums along one axis of a C-contiguous float32
or float64 array, accumulated in float64 and rounded once per output (torch's CPU kernel
accumulates float32 in double: its results, not NumPy's float32 running sum, which drifts).

Imported lazily (never by ``import ember``), compiled once per dtype and cached on disk. The
array travels flat, viewed as (outer, n, inner) around the summed axis of length n; ``lo``,
``hi`` bound the outer blocks; ``reverse`` sums from the axis's end (the gradient). With
inner > 1 each step adds a contiguous row of ``inner`` values to a float64 row of sums
(vectorised); with inner == 1 (the last axis) each row's sum is a chain of dependent adds, so
ROWS rows run side by side (independent chains).
"""
import numpy as np
from numba import njit, prange

from ember.kernels.runtime.nbhelpers import run_bounds

ROWS = 8


@njit(cache=True, nogil=True)
def cumsum_blocks(x, out, n, inner, reverse, lo, hi):
    """out = the running sums of x over axis 1 of its (outer, n, inner) view, from its start
    (from its end where ``reverse``: cumsum's gradient), for outer blocks [lo, hi)."""
    if inner == 1:
        acc = np.zeros(ROWS, np.float64)
        o = lo
        while o + ROWS <= hi:
            acc[:] = 0.0
            base = o * n
            for s in range(n):
                i = n - 1 - s if reverse else s
                for r in range(ROWS):
                    k = base + r * n + i
                    acc[r] += x[k]
                    out[k] = acc[r]
            o += ROWS
        for o in range(o, hi):
            t = 0.0
            base = o * n
            for s in range(n):
                i = n - 1 - s if reverse else s
                t += x[base + i]
                out[base + i] = t
        return
    acc = np.empty(inner, np.float64)
    for o in range(lo, hi):
        acc[:] = 0.0
        base = o * n * inner
        for s in range(n):
            row = base + (n - 1 - s if reverse else s) * inner
            for j in range(inner):
                acc[j] += x[row + j]
                out[row + j] = acc[j]


@njit(cache=True, nogil=True, parallel=True)
def cumsum_parallel(x, out, n, inner, reverse, outer, parts):
    """``cumsum_blocks`` over all ``outer`` blocks in ``parts`` runs of a ``prange``."""
    for p in prange(parts):
        lo, hi = run_bounds(outer, parts, p)
        if lo < hi:
            cumsum_blocks(x, out, n, inner, reverse, lo, hi)
