"""Depthwise convolution (groups == C, one input channel per group, K = m*C) without GEMMs.

Each direction is R*S fused multiply-adds over strided views of the padded input: the output
(N, C, m, Ho, Wo) accumulates w[:, :, r, s] * x_rs, the input gradient scatters gy * w back into
the padded input, and the weight gradient reduces gy * x_rs over (N, Ho, Wo) per tap. For
float32/float64 ``depthwise_numba``'s loops run instead (each NumPy pass above wrote a full
temporary per tap: (16, 32, 32, 32) 3x3 forward + backward 9.3 -> 3.7 ms, torch 1.3; ``unfold``,
a depthwise convolution of kh*kw one-hot filters per channel, 45 -> 5 ms forward); with one filter
per channel the forward and input gradient have the NumPy forms' bits.
"""
import numpy as np

from .im2col import windows
from .workspace import buffer, owned, padded


USE_NUMBA = True
PARALLEL_SIZE = 1 << 15     # output (input-gradient) elements from which planes split over threads
_signatures = {}


def supports(g, direction):
    return g.is_depthwise


def _kernels():
    from ember.kernels.runtime import compiler
    return compiler.kernel_module("ember.kernels.conv.depthwise_numba") if USE_NUMBA else None


def _numba(name, first, args, n, size, g, direction):
    """``depthwise_numba``'s ``<name>`` over ``n`` planes or channels (``nn.split_run``: the
    kernel once it is compiled, the choice kept per geometry); False where NumPy runs (another
    dtype, Numba unavailable or its compile pending)."""
    from ember.kernels.nn import split_run
    if not USE_NUMBA or first.dtype not in (np.float32, np.float64):
        return False
    key = ("depthwise", direction, first.dtype, g.input_shape, g.weight_shape, g.stride,
           g.padding, g.dilation)
    return split_run(f"{name}_{'channels' if name == 'weight_grad' else 'planes'}",
                     f"{name}_parallel", first, args, n, size >= PARALLEL_SIZE, key,
                     _signatures, _kernels)


def forward(x, w, g):
    m = g.K // g.C
    xp = padded(x, g.padding, "depthwise.pad")
    y = np.empty(g.output_shape, x.dtype)
    if _numba("forward", xp, (_filters(w, g), y) + _steps(g), g.N * g.K, y.size, g,
              "forward"):
        return y
    win = windows(xp, g)
    y = y.reshape(g.N, g.C, m, g.Ho, g.Wo)
    tmp = buffer("depthwise.tmp", y.shape, x.dtype)
    wv = w.reshape(g.C, m, g.R, g.S)
    for r in range(g.R):
        for s in range(g.S):
            tap = win[:, :, None, r, s]
            coef = wv[None, :, :, r, s, None, None]
            if r == 0 and s == 0:
                np.multiply(tap, coef, out=y)
            else:
                np.multiply(tap, coef, out=tmp)
                y += tmp
    return y.reshape(g.output_shape)


def _steps(g):
    return tuple(int(v) for v in g.stride + g.dilation)


def _filters(w, g):
    return np.ascontiguousarray(w).reshape(g.K, g.R, g.S)


def input_grad(gy, w, g):
    m = g.K // g.C
    gyv = gy.reshape(g.N, g.C, m, g.Ho, g.Wo)
    wv = w.reshape(g.C, m, g.R, g.S)
    gxp = buffer("depthwise.gxpad", (g.N, g.C, g.Hp, g.Wp), gy.dtype)
    gxp.fill(0)
    pt, pl = g.padding[0], g.padding[2]
    if _numba("input_grad", np.ascontiguousarray(gy).reshape(g.N, g.K, g.Ho, g.Wo),
              (_filters(w, g), gxp) + _steps(g), g.N * g.C, gxp.size, g, "input"):
        return owned(gxp[:, :, pt:pt + g.H, pl:pl + g.W])
    tmp = buffer("depthwise.tmp", (g.N, g.C, g.Ho, g.Wo), gy.dtype)
    (sh, sw), (dh, dw) = g.stride, g.dilation
    hspan, wspan = sh * (g.Ho - 1) + 1, sw * (g.Wo - 1) + 1
    for r in range(g.R):
        for s in range(g.S):
            if m == 1:
                np.multiply(gyv[:, :, 0], wv[None, :, 0, r, s, None, None], out=tmp)
            else:
                np.einsum("ncmij,cm->ncij", gyv, wv[:, :, r, s], out=tmp)
            gxp[:, :, r * dh:r * dh + hspan:sh, s * dw:s * dw + wspan:sw] += tmp
    pt, pl = g.padding[0], g.padding[2]
    return owned(gxp[:, :, pt:pt + g.H, pl:pl + g.W])


def weight_grad(gy, x, g):
    m = g.K // g.C
    xp = padded(x, g.padding, "depthwise.pad")
    gw = np.empty((g.K, g.R, g.S), gy.dtype)
    if _numba("weight_grad", np.ascontiguousarray(gy).reshape(g.N, g.K, g.Ho, g.Wo),
              (xp, gw) + _steps(g), g.K, gy.size, g, "weight"):
        return gw.reshape(g.weight_shape)
    win = windows(xp, g)
    gyv = gy.reshape(g.N, g.C, m, g.Ho, g.Wo)
    gw = gw.reshape(g.C, m, g.R, g.S)
    for r in range(g.R):
        for s in range(g.S):
            gw[:, :, r, s] = np.einsum("ncmij,ncij->cm", gyv, win[:, :, r, s])
    return gw.reshape(g.weight_shape)
