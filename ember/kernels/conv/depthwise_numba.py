"""Numba kernels of the depthwise convolution (``depthwise``: groups == C == K, one filter per
channel): each (image, channel) plane loops over its taps with the output row as the inner,
vectorised loop. ``forward_planes`` and ``input_grad_planes`` add the taps in ``depthwise``'s
order, one IEEE operation at a time (no ``fastmath``), so they give its NumPy forms' bits;
``weight_grad_channels`` sums each tap's products over the images in float64.

``*_planes(..., lo, hi)`` run planes ``[lo, hi)`` of the (N*C) planes, ``weight_grad_channels``
channels ``[lo, hi)``; the ``*_parallel`` drivers split them in a ``prange`` on Numba's TBB
layer (``nn.split_run`` chooses).
"""
import numpy as np
from numba import njit, prange

from ember.kernels.runtime.nbhelpers import run_bounds


@njit(cache=True, nogil=True)
def forward_planes(xp, w, y, sh, sw, dh, dw, lo, hi):
    """y[n, c] = sum over taps (r, s) of w[c, r, s] * the padded input xp[n, c] at the tap."""
    C, Ho, Wo = y.shape[1], y.shape[2], y.shape[3]
    R, S = w.shape[1], w.shape[2]
    for p in range(lo, hi):
        n, c = p // C, p % C
        for i in range(Ho):
            row = y[n, c, i]
            for j in range(Wo):
                row[j] = 0
            for r in range(R):
                xr = xp[n, c, i * sh + r * dh]
                for s in range(S):
                    wv = w[c, r, s]
                    o = s * dw
                    for j in range(Wo):
                        row[j] += wv * xr[o + j * sw]


@njit(cache=True, nogil=True)
def input_grad_planes(gy, w, gxp, sh, sw, dh, dw, lo, hi):
    """gxp[n, c] (zeroed, padded) += w[c, r, s] * gy[n, c] at each tap, taps outermost."""
    C, Ho, Wo = gy.shape[1], gy.shape[2], gy.shape[3]
    R, S = w.shape[1], w.shape[2]
    for p in range(lo, hi):
        n, c = p // C, p % C
        for r in range(R):
            for s in range(S):
                wv = w[c, r, s]
                o = s * dw
                for i in range(Ho):
                    g = gy[n, c, i]
                    dst = gxp[n, c, i * sh + r * dh]
                    for j in range(Wo):
                        dst[o + j * sw] += g[j] * wv


@njit(cache=True, nogil=True)
def weight_grad_channels(gy, xp, gw, sh, sw, dh, dw, lo, hi):
    """gw[c, r, s] = sum over images and output positions of gy * xp at the tap (float64)."""
    N, Ho, Wo = gy.shape[0], gy.shape[2], gy.shape[3]
    R, S = gw.shape[1], gw.shape[2]
    for c in range(lo, hi):
        for r in range(R):
            for s in range(S):
                o = s * dw
                acc = 0.0
                for n in range(N):
                    for i in range(Ho):
                        g = gy[n, c, i]
                        xr = xp[n, c, i * sh + r * dh]
                        for j in range(Wo):
                            acc += np.float64(g[j]) * np.float64(xr[o + j * sw])
                gw[c, r, s] = acc


@njit(cache=True, nogil=True, parallel=True)
def forward_parallel(xp, w, y, sh, sw, dh, dw, parts):
    total = y.shape[0] * y.shape[1]
    for q in prange(parts):
        lo, hi = run_bounds(total, parts, q)
        if lo < hi:
            forward_planes(xp, w, y, sh, sw, dh, dw, lo, hi)


@njit(cache=True, nogil=True, parallel=True)
def input_grad_parallel(gy, w, gxp, sh, sw, dh, dw, parts):
    total = gy.shape[0] * gy.shape[1]
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
