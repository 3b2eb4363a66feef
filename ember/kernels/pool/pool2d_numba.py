"""Numba kernel of 2-d max pooling with indices (see ``pool.max_pool2d_forward``).

Imported lazily (never by ``import ember``); compiled once per dtype and cached on disk. One pass
over each window with torch's argmax rule as ``pool`` defines it: the first maximum in window
order wins, the last NaN wins and propagates, a window whose valid elements are all -inf
reports its first valid element. The NumPy path needs one strided pass per tap for the values and
another per tap for the indices (LeNet's first pool, (64,6,28,28) 2x2: 1.05 ms; this kernel
splits planes over threads and reads each element once). ``planes`` works on the (image,
channel) planes [lo, hi) and releases the GIL; ``planes_parallel`` runs ``parts`` runs of them in
a ``prange`` (used on Numba's TBB layer); ``planes_2x2`` is the 2x2 stride-2 window without
bounds tests (``planes_2x2_parallel`` its runs in a ``prange``); ``planes_values`` computes the
values alone (inference), ``planes_values_parallel`` its runs in a ``prange``;
``adaptive_planes`` the windows of adaptive pooling. ``scatter`` is the backward: each plane's
gradients added at its argmax positions (``scatter_parallel`` over runs of planes in a
``prange``).
"""
import numpy as np
from numba import njit, prange

from ember.kernels.runtime.nbhelpers import run_bounds

_FAR = np.int64(1) << 62   # flat position of a padding column: loses every tie


@njit(cache=True, nogil=True)
def _walk(xp, kh, kw, sh, sw, ph, pw, dh, dw, yp, ip):
    """One plane by torch's walk of each window: ``v > best`` or a NaN replaces (so the first
    maximum and the last NaN win), starting from -inf at the first valid element. Used for
    planes whose windows hold a NaN."""
    H, W = xp.shape
    Ho, Wo = yp.shape
    for i in range(Ho):
        r0 = i * sh - ph
        for j in range(Wo):
            c0 = j * sw - pw
            best = xp.dtype.type(-np.inf)
            at = -1
            for a in range(kh):
                r = r0 + a * dh
                if r < 0 or r >= H:
                    continue
                for b in range(kw):
                    q = c0 + b * dw
                    if q < 0 or q >= W:
                        continue
                    v = xp[r, q]
                    if at < 0:
                        at = r * W + q
                    if (v > best) | (v != v):
                        best = v
                        at = r * W + q
            yp[i, j] = best
            ip[i, j] = at


@njit(cache=True, nogil=True)
def _first_max(v, p, best, at):
    """The winner of (best, at) and a later element (v, p) of a window: the larger value; on
    a tie the smaller flat position (the earlier in window order). Selects, no branches (NaN:
    the plane is redone by ``_walk``)."""
    take = (v > best) | ((v == best) & (p < at))
    return max(v, best), (p if take else at)


@njit(cache=True, nogil=True)
def planes(x, kh, kw, sh, sw, ph, pw, dh, dw, y, idx, lo, hi):
    """y, idx (N, C, Ho, Wo) of the max pool of x (N, C, H, W) for planes n*C + c in [lo, hi).

    Separable, in two passes per output row: the winner (value, flat position) of each input
    column over the window's rows inside the plane, over contiguous rows; then of each window's
    columns, one pass per column tap, a tie going to the earlier row. Columns outside the plane
    hold (-inf, BIG), which loses every tie. The per-element choices are selects: the scalar
    window walk with bounds tests and data-dependent branches cost ~7 ns per tap (ResNet-18's
    stem pool, (1,64,112,112) 3x3/2: 13.7 ms). Three window rows, and three-tap windows at
    stride 1 or 2 without dilation, run loops with literal strides that keep the winner in
    registers, which LLVM vectorizes (the stem pool, one thread: 1.7 -> 0.9 ms). A plane whose
    window rows hold a NaN is redone by ``_walk``."""
    N, C, H, W = x.shape
    Ho, Wo = y.shape[2], y.shape[3]
    Wn = max(W + pw, (Wo - 1) * sw + dw * (kw - 1) + 1)
    val = np.full(Wn, -np.inf, x.dtype)
    pos = np.full(Wn, _FAR, np.int64)
    vv, pp = val[pw:pw + W], pos[pw:pw + W]          # the plane's columns
    span = sw * (Wo - 1) + 1
    for nc in range(lo, hi):
        n, c = nc // C, nc % C
        xp, yp, ip = x[n, c], y[n, c], idx[n, c]
        nan = False
        for i in range(Ho):
            r0 = i * sh - ph
            a0 = 0 if r0 >= 0 else (-r0 + dh - 1) // dh      # window rows [a0, a1) in the plane
            a1 = min(kh, (H - 1 - r0) // dh + 1)
            if a0 >= a1:                                     # none (dilation): -inf at -1
                vv[:] = -np.inf
                pp[:] = -1
            elif a1 - a0 == 3:      # literal rows: one pass, in registers (vectorizes)
                ra, rb, rc = r0 + a0 * dh, r0 + (a0 + 1) * dh, r0 + (a0 + 2) * dh
                xa, xb, xc = xp[ra], xp[rb], xp[rc]
                for q in range(W):
                    va, vb_, vc = xa[q], xb[q], xc[q]
                    nan |= (va != va) | (vb_ != vb_) | (vc != vc)
                    best, at = _first_max(vb_, rb * W + q, va, ra * W + q)
                    best, at = _first_max(vc, rc * W + q, best, at)
                    vv[q] = best
                    pp[q] = at
            else:
                r = r0 + a0 * dh
                row = xp[r]
                base = r * W
                for q in range(W):
                    v = row[q]
                    nan |= v != v
                    vv[q] = v
                    pp[q] = base + q
                for a in range(a0 + 1, a1):
                    r = r0 + a * dh
                    row = xp[r]
                    base = r * W
                    for q in range(W):
                        v, cur = row[q], vv[q]
                        nan |= v != v
                        gt = v > cur
                        vv[q] = max(v, cur)
                        pp[q] = base + q if gt else pp[q]
            yr, ir = yp[i], ip[i]
            if kw == 3 and sw == 2 and dw == 1:   # literal strides, in registers (vectorizes)
                for j in range(Wo):
                    q = 2 * j
                    best, at = _first_max(val[q + 1], pos[q + 1], val[q], pos[q])
                    yr[j], ir[j] = _first_max(val[q + 2], pos[q + 2], best, at)
                continue
            if kw == 3 and sw == 1 and dw == 1:
                for j in range(Wo):
                    best, at = _first_max(val[j + 1], pos[j + 1], val[j], pos[j])
                    yr[j], ir[j] = _first_max(val[j + 2], pos[j + 2], best, at)
                continue
            yr[:] = val[0:span:sw]
            ir[:] = pos[0:span:sw]
            for b in range(1, kw):
                off = b * dw
                vb, pb = val[off:off + span:sw], pos[off:off + span:sw]
                for j in range(Wo):
                    yr[j], ir[j] = _first_max(vb[j], pb[j], yr[j], ir[j])
        if nan:
            _walk(xp, kh, kw, sh, sw, ph, pw, dh, dw, yp, ip)


@njit(cache=True, nogil=True)
def _nan_max(v, cur):
    """The larger of v and cur, NaN when either is: a select, which vectorizes."""
    return v if (v > cur) | (v != v) else cur


@njit(cache=True, nogil=True)
def planes_values(x, kh, kw, sh, sw, ph, pw, dh, dw, y, lo, hi):
    """``planes`` without positions, for inference: y (N, C, Ho, Wo) for planes [lo, hi).
    The same two passes per output row (the column maxima over the window's rows, then the
    window's column taps); a NaN replaces, so it propagates; a window with no element inside
    the plane (dilation) is -inf. Three-tap windows at stride 1 or 2 without dilation (every
    pool of ResNet, SqueezeNet, GoogLeNet, DenseNet) run loops with literal strides and offsets
    that accumulate in registers, which LLVM vectorizes: SqueezeNet's first pool, (1, 64, 111,
    111) 3x3/2 ceil mode, one thread: NumPy taps 2.8 ms; these loops with a runtime stride,
    kernel size or dilation 1.7 ms (0.8 with only the dilation at run time); literal 0.44 ms."""
    N, C, H, W = x.shape
    Ho, Wo = y.shape[2], y.shape[3]
    Wn = max(W + pw, (Wo - 1) * sw + dw * (kw - 1) + 1)
    val = np.full(Wn, -np.inf, x.dtype)
    vv = val[pw:pw + W]
    for nc in range(lo, hi):
        n, c = nc // C, nc % C
        xp, yp = x[n, c], y[n, c]
        for i in range(Ho):
            r0 = i * sh - ph
            a0 = 0 if r0 >= 0 else (-r0 + dh - 1) // dh
            a1 = min(kh, (H - 1 - r0) // dh + 1)
            if a1 - a0 == 3:
                ra, rb, rc = xp[r0 + a0 * dh], xp[r0 + (a0 + 1) * dh], xp[r0 + (a0 + 2) * dh]
                for q in range(W):
                    vv[q] = _nan_max(rc[q], _nan_max(rb[q], ra[q]))
            elif a0 >= a1:
                vv[:] = -np.inf
            else:
                vv[:] = xp[r0 + a0 * dh]
                for a in range(a0 + 1, a1):
                    row = xp[r0 + a * dh]
                    for q in range(W):
                        vv[q] = _nan_max(row[q], vv[q])
            yr = yp[i]
            if kw == 3 and sw == 2 and dw == 1:
                for j in range(Wo):
                    yr[j] = _nan_max(val[2 * j + 2], _nan_max(val[2 * j + 1], val[2 * j]))
            elif kw == 3 and sw == 1 and dw == 1:
                for j in range(Wo):
                    yr[j] = _nan_max(val[j + 2], _nan_max(val[j + 1], val[j]))
            else:
                for j in range(Wo):
                    m = val[sw * j]
                    for b in range(1, kw):
                        m = _nan_max(val[sw * j + b * dw], m)
                    yr[j] = m


@njit(cache=True, nogil=True, parallel=True)
def planes_parallel(x, kh, kw, sh, sw, ph, pw, dh, dw, y, idx, parts):
    total = x.shape[0] * x.shape[1]
    for r in prange(parts):
        lo, hi = run_bounds(total, parts, r)
        if lo < hi:
            planes(x, kh, kw, sh, sw, ph, pw, dh, dw, y, idx, lo, hi)


@njit(cache=True, nogil=True, parallel=True)
def planes_values_parallel(x, kh, kw, sh, sw, ph, pw, dh, dw, y, parts):
    total = x.shape[0] * x.shape[1]
    for r in prange(parts):
        lo, hi = run_bounds(total, parts, r)
        if lo < hi:
            planes_values(x, kh, kw, sh, sw, ph, pw, dh, dw, y, lo, hi)


@njit(cache=True, nogil=True)
def planes_2x2(x, y, idx, lo, hi):
    """``planes`` for a 2x2 window at stride 2 without padding or dilation, every window inside
    the plane (MaxPool2d(2) with even sizes or floor mode), in two passes per output row: the
    winner of each column pair (top or bottom) over the contiguous row, which vectorizes, then
    of the two columns of each window; ties go to the earlier element in window order, NaNs to
    the later one, as torch's walk (the lower row within a column, the smaller flat position
    across the two). LeNet's first
    pool, one thread: 0.72 ms (``planes``) -> 0.36 ms."""
    C, W = x.shape[1], x.shape[3]
    Ho, Wo = y.shape[2], y.shape[3]
    W2 = 2 * Wo
    col = np.empty(W2, x.dtype)
    low = np.empty(W2, np.int64)      # W where the bottom element won, else 0
    for nc in range(lo, hi):
        n, c = nc // C, nc % C
        xp, yp, ip = x[n, c], y[n, c], idx[n, c]
        for i in range(Ho):
            top, bot, yr, ir = xp[2 * i], xp[2 * i + 1], yp[i], ip[i]
            for w in range(W2):
                a, b = top[w], bot[w]
                take = (b > a) | (b != b)
                col[w] = b if take else a
                low[w] = W if take else 0
            base = 2 * i * W
            for j in range(Wo):
                left, right = col[2 * j], col[2 * j + 1]
                rl, rr = low[2 * j], low[2 * j + 1]
                earlier = rr < rl
                take = (((left == left) & ((right > left) | (right != right)))
                        | ((right == left) & earlier)
                        | ((right != right) & (left != left) & (rr >= rl)))
                yr[j] = right if take else left
                ir[j] = base + 2 * j + (rr + 1 if take else rl)


@njit(cache=True, nogil=True, parallel=True)
def planes_2x2_parallel(x, y, idx, parts):
    total = x.shape[0] * x.shape[1]
    for r in prange(parts):
        lo, hi = run_bounds(total, parts, r)
        if lo < hi:
            planes_2x2(x, y, idx, lo, hi)


@njit(cache=True, nogil=True)
def adaptive_planes(x, rs, re, cs, ce, y, idx, lo, hi):
    """Adaptive max pooling of planes [lo, hi): output (i, j) is the max of rows [rs[i], re[i])
    and columns [cs[j], ce[j]) by torch's walk (a value above the max or a NaN takes over, so
    the first maximum wins and the last NaN; an all -inf window reports its first element)."""
    C, W = x.shape[1], x.shape[3]
    Ho, Wo = y.shape[2], y.shape[3]
    for nc in range(lo, hi):
        n, c = nc // C, nc % C
        for i in range(Ho):
            for j in range(Wo):
                best = -np.inf
                at = rs[i] * W + cs[j]
                for h in range(rs[i], re[i]):
                    for w in range(cs[j], ce[j]):
                        v = x[n, c, h, w]
                        if v > best or v != v:
                            best = v
                            at = h * W + w
                y[n, c, i, j] = best
                idx[n, c, i, j] = at


@njit(cache=True, nogil=True)
def scatter(gy, idx, gx, lo, hi):
    """Planes [lo, hi) of gx (P, HW) zeroed, then += gy (P, L) at the per-plane positions
    idx (P, L) (each plane zeroed just before its adds, while it is in cache: no separate
    zeroing pass over gx). Returns the number of indices outside [0, HW) (skipped)."""
    L, HW = gy.shape[1], gx.shape[1]
    bad = 0
    for p in range(lo, hi):
        g, at, dst = gy[p], idx[p], gx[p]
        dst[:] = 0
        for t in range(L):
            k = at[t]
            if k < 0 or k >= HW:
                bad += 1
            else:
                dst[k] += g[t]
    return bad


@njit(cache=True, nogil=True, parallel=True)
def scatter_parallel(gy, idx, gx, parts):
    """``scatter`` of all planes in ``parts`` runs of a ``prange``; the count of bad indices."""
    P = gy.shape[0]
    bad = 0
    for r in prange(parts):
        lo, hi = run_bounds(P, parts, r)
        if lo < hi:
            bad += scatter(gy, idx, gx, lo, hi)
    return bad
