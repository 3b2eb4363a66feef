"""Numba kernels of the depthwise convolution (``depthwise``: groups == C, m filters per
channel, K = m*C): each plane loops over its taps with the output row as the inner, vectorised
loop. ``forward_planes`` adds the taps in ``depthwise``'s order, one IEEE operation at a time
(no ``fastmath``), as does ``input_grad_planes`` with one filter per channel, so they give its
NumPy forms' bits there; ``weight_grad_channels`` sums each tap's products in float64.

``forward_planes`` runs output planes ``[lo, hi)`` of the N*K, ``input_grad_planes`` input
planes of the N*C, ``weight_grad_channels`` filters of the K; the ``*_parallel`` drivers split
them in a ``prange`` on Numba's TBB layer (``nn.split_run`` chooses).
"""
import numpy as np
from numba import njit, prange, uint64

from ember.kernels.runtime.nbhelpers import run_bounds

# Offsets are uint64 into the flattened (C-ordered) arrays: with signed indices Numba's
# negative-index wraparound kept LLVM from vectorising the rows (2.5 ms against 0.6 for a
# (16, 32, 32, 32) 3x3 forward on one thread).


@njit(cache=True, nogil=True)
def forward_planes(xp, w, y, sh, sw, dh, dw, lo, hi):
    """Output planes [lo, hi) of y (N, C*m, Ho, Wo): plane (n, c*m + k) = sum over taps (r, s)
    of w[c*m + k, r, s] * the padded input xp[n, c] at the tap."""
    K, Ho, Wo = y.shape[1], y.shape[2], y.shape[3]
    C, Hp, Wp = xp.shape[1], xp.shape[2], xp.shape[3]
    R, S = w.shape[1], w.shape[2]
    m = K // C
    xf, wf, yf = xp.reshape(-1), w.reshape(-1), y.reshape(-1)
    for p in range(lo, hi):
        ck = p % K
        q = (p // K) * C + ck // m          # the input plane
        for i in range(Ho):
            yr = uint64((p * Ho + i) * Wo)
            for j in range(Wo):
                yf[yr + uint64(j)] = 0
            for r in range(R):
                for s in range(S):
                    wv = wf[(ck * R + r) * S + s]
                    xr = uint64((q * Hp + i * sh + r * dh) * Wp + s * dw)
                    if sw == 1:
                        for j in range(Wo):
                            yf[yr + uint64(j)] += wv * xf[xr + uint64(j)]
                    else:
                        for j in range(Wo):
                            yf[yr + uint64(j)] += wv * xf[xr + uint64(j * sw)]


@njit(cache=True, nogil=True)
def input_grad_planes(gy, w, gxp, sh, sw, dh, dw, lo, hi):
    """Input planes [lo, hi) of gxp (N, C, Hp, Wp), zeroed and padded: at each tap, taps
    outermost, += the sum over the channel's m filters k of gy[n, c*m + k] * w[c*m + k, r, s]."""
    K, Ho, Wo = gy.shape[1], gy.shape[2], gy.shape[3]
    C, Hp, Wp = gxp.shape[1], gxp.shape[2], gxp.shape[3]
    R, S = w.shape[1], w.shape[2]
    m = K // C
    gf, wf, xf = gy.reshape(-1), w.reshape(-1), gxp.reshape(-1)
    for p in range(lo, hi):
        c = p % C
        g0 = (p // C) * K + c * m           # the first output plane of the channel
        for r in range(R):
            for s in range(S):
                for i in range(Ho):
                    xr = uint64((p * Hp + i * sh + r * dh) * Wp + s * dw)
                    for k in range(m):
                        wv = wf[((c * m + k) * R + r) * S + s]
                        gr = uint64(((g0 + k) * Ho + i) * Wo)
                        if sw == 1:
                            for j in range(Wo):
                                xf[xr + uint64(j)] += gf[gr + uint64(j)] * wv
                        else:
                            for j in range(Wo):
                                xf[xr + uint64(j * sw)] += gf[gr + uint64(j)] * wv


@njit(cache=True, nogil=True)
def weight_grad_channels(gy, xp, gw, sh, sw, dh, dw, lo, hi):
    """Filters [lo, hi) of gw (C*m, R, S): gw[ck, r, s] = sum over images and output positions
    of gy[n, ck] * xp[n, ck // m] at the tap: float64 products summed per output column over
    the rows and images, then the columns."""
    N, K, Ho, Wo = gy.shape[0], gy.shape[1], gy.shape[2], gy.shape[3]
    C, Hp, Wp = xp.shape[1], xp.shape[2], xp.shape[3]
    R, S = gw.shape[1], gw.shape[2]
    m = K // C
    gf, xf, wf = gy.reshape(-1), xp.reshape(-1), gw.reshape(-1)
    acc = np.empty(Wo, np.float64)
    for ck in range(lo, hi):
        for r in range(R):
            for s in range(S):
                acc[:] = 0.0
                for n in range(N):
                    p, q = n * K + ck, n * C + ck // m
                    for i in range(Ho):
                        gr = uint64((p * Ho + i) * Wo)
                        xr = uint64((q * Hp + i * sh + r * dh) * Wp + s * dw)
                        if sw == 1:
                            for j in range(Wo):
                                acc[j] += np.float64(gf[gr + uint64(j)]) * \
                                    np.float64(xf[xr + uint64(j)])
                        else:
                            for j in range(Wo):
                                acc[j] += np.float64(gf[gr + uint64(j)]) * \
                                    np.float64(xf[xr + uint64(j * sw)])
                wf[(ck * R + r) * S + s] = acc.sum()


@njit(cache=True, nogil=True, parallel=True)
def forward_parallel(xp, w, y, sh, sw, dh, dw, parts):
    total = y.shape[0] * y.shape[1]
    for q in prange(parts):
        lo, hi = run_bounds(total, parts, q)
        if lo < hi:
            forward_planes(xp, w, y, sh, sw, dh, dw, lo, hi)


@njit(cache=True, nogil=True, parallel=True)
def input_grad_parallel(gy, w, gxp, sh, sw, dh, dw, parts):
    total = gxp.shape[0] * gxp.shape[1]
    for q in prange(parts):
        lo, hi = run_bounds(total, parts, q)
        if lo < hi:
            input_grad_planes(gy, w, gxp, sh, sw, dh, dw, lo, hi)


@njit(cache=True, nogil=True, parallel=True)
def weight_grad_parallel(gy, xp, gw, sh, sw, dh, dw, parts):
    total = gw.shape[0]
    for q in prange(parts):
        lo, hi = run_bounds(total, parts, q)
        if lo < hi:
            weight_grad_channels(gy, xp, gw, sh, sw, dh, dw, lo, hi)
