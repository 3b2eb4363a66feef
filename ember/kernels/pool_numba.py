"""Numba kernel of 2-d max pooling with indices (see ``pool.max_pool2d_forward``).

Imported lazily (never by ``import ember``); compiled once per dtype and cached on disk. One pass
over each window with torch's argmax rule as ``pool`` defines it: the first maximum in window
order wins, the first NaN wins and propagates, a window whose valid elements are all -inf
reports its first valid element. The NumPy path needs one strided pass per tap for the values and
another per tap for the indices (LeNet's first pool, (64,6,28,28) 2x2: 1.05 ms; this kernel
splits planes over threads and reads each element once). ``planes`` works on the (image,
channel) planes [lo, hi) and releases the GIL; ``planes_parallel`` runs ``parts`` runs of them in
a ``prange`` (used on Numba's TBB layer).
"""
import numpy as np
from numba import njit, prange


@njit(cache=True, nogil=True)
def planes(x, kh, kw, sh, sw, ph, pw, dh, dw, y, idx, lo, hi):
    """y, idx (N, C, Ho, Wo) of the max pool of x (N, C, H, W) for planes n*C + c in [lo, hi)."""
    N, C, H, W = x.shape
    Ho, Wo = y.shape[2], y.shape[3]
    for nc in range(lo, hi):
        n, c = nc // C, nc % C
        for i in range(Ho):
            r0 = i * sh - ph
            for j in range(Wo):
                c0 = j * sw - pw
                best = x.dtype.type(-np.inf)
                at = -1
                first = -1
                found_nan = False
                for a in range(kh):
                    r = r0 + a * dh
                    if r < 0 or r >= H:
                        continue
                    for b in range(kw):
                        q = c0 + b * dw
                        if q < 0 or q >= W:
                            continue
                        v = x[n, c, r, q]
                        flat = r * W + q
                        if first < 0:
                            first = flat
                        # branch-free update (selects): data-dependent branches mispredict
                        is_nan = v != v
                        take = (not found_nan) & ((v > best) | is_nan)
                        best = v if take else best
                        at = flat if take else at
                        found_nan = found_nan | is_nan
                y[n, c, i, j] = best
                idx[n, c, i, j] = at if at >= 0 else first


@njit(cache=True, nogil=True, parallel=True)
def planes_parallel(x, kh, kw, sh, sw, ph, pw, dh, dw, y, idx, parts):
    total = x.shape[0] * x.shape[1]
    per = (total + parts - 1) // parts
    for r in prange(parts):
        lo = r * per
        hi = min(total, lo + per)
        if lo < hi:
            planes(x, kh, kw, sh, sw, ph, pw, dh, dw, y, idx, lo, hi)
