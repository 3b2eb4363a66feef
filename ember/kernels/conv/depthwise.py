"""Depthwise convolution (groups == C, one input channel per group, K = m*C) without GEMMs.

Each direction is R*S fused multiply-adds over strided views of the padded input: the output
(N, C, m, Ho, Wo) accumulates w[:, :, r, s] * x_rs, the input gradient scatters gy * w back into
the padded input, and the weight gradient reduces gy * x_rs over (N, Ho, Wo) per tap.
"""
import numpy as np

from .im2col import windows
from .workspace import buffer, owned, padded


def supports(g, direction):
    return g.is_depthwise


def forward(x, w, g):
    m = g.K // g.C
    win = windows(padded(x, g.padding, "depthwise.pad"), g)
    y = np.empty((g.N, g.C, m, g.Ho, g.Wo), x.dtype)
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


def input_grad(gy, w, g):
    m = g.K // g.C
    gyv = gy.reshape(g.N, g.C, m, g.Ho, g.Wo)
    wv = w.reshape(g.C, m, g.R, g.S)
    gxp = buffer("depthwise.gxpad", (g.N, g.C, g.Hp, g.Wp), gy.dtype)
    gxp.fill(0)
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
    win = windows(padded(x, g.padding, "depthwise.pad"), g)
    gyv = gy.reshape(g.N, g.C, m, g.Ho, g.Wo)
    gw = np.empty((g.C, m, g.R, g.S), gy.dtype)
    for r in range(g.R):
        for s in range(g.S):
            gw[:, :, r, s] = np.einsum("ncmij,ncij->cm", gyv, win[:, :, r, s])
    return gw.reshape(g.weight_shape)
