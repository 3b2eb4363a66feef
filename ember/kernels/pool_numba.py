"""Numba kernel of 2-d max pooling with indices (see ``pool.max_pool2d_forward``).

Imported lazily (never by ``import ember``); compiled once per dtype and cached on disk. One pass
over each window with torch's argmax rule as ``pool`` defines it: the first maximum in window
order wins, the first NaN wins and propagates, a window whose valid elements are all -inf
reports its first valid element. The NumPy path needs one strided pass per tap for the values and
another per tap for the indices (LeNet's first pool, (64,6,28,28) 2x2: 1.05 ms; this kernel
splits planes over threads and reads each element once). ``planes`` works on the (image,
channel) planes [lo, hi) and releases the GIL; ``planes_parallel`` runs ``parts`` runs of them in
a ``prange`` (used on Numba's TBB layer); ``planes_2x2`` is the 2x2 stride-2 window without
bounds tests. ``scatter`` is the backward: each plane's gradients added at its argmax positions.
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


@njit(cache=True, nogil=True)
def planes_2x2(x, y, idx, lo, hi):
    """``planes`` for a 2x2 window at stride 2 without padding or dilation, every window inside
    the plane (MaxPool2d(2) with even sizes or floor mode): four loads and three selects per
    output, no bounds tests (LeNet's first pool 0.72 -> 0.53 ms, one thread)."""
    C, W = x.shape[1], x.shape[3]
    Ho, Wo = y.shape[2], y.shape[3]
    for nc in range(lo, hi):
        n, c = nc // C, nc % C
        xp, yp, ip = x[n, c], y[n, c], idx[n, c]
        for i in range(Ho):
            top, bot, yr, ir = xp[2 * i], xp[2 * i + 1], yp[i], ip[i]
            base = 2 * i * W
            for j in range(Wo):
                v0, v1, v2, v3 = top[2 * j], top[2 * j + 1], bot[2 * j], bot[2 * j + 1]
                at = base + 2 * j
                best, pos, nan = v0, at, v0 != v0
                take = (not nan) & ((v1 > best) | (v1 != v1))
                best, pos, nan = (v1 if take else best), (at + 1 if take else pos), nan | (v1 != v1)
                take = (not nan) & ((v2 > best) | (v2 != v2))
                best, pos, nan = (v2 if take else best), (at + W if take else pos), nan | (v2 != v2)
                take = (not nan) & ((v3 > best) | (v3 != v3))
                yr[j] = v3 if take else best
                ir[j] = at + W + 1 if take else pos


@njit(cache=True, nogil=True)
def scatter(gy, idx, gx, lo, hi):
    """gx (P, HW), zeroed, += gy (P, L) at the per-plane positions idx (P, L), planes [lo, hi).
    Returns the number of indices outside [0, HW) (skipped)."""
    L, HW = gy.shape[1], gx.shape[1]
    bad = 0
    for p in range(lo, hi):
        g, at, dst = gy[p], idx[p], gx[p]
        for t in range(L):
            k = at[t]
            if k < 0 or k >= HW:
                bad += 1
            else:
                dst[k] += g[t]
    return bad
