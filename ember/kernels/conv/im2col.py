"""im2col + one GEMM per group: the general algorithm, for every geometry and direction.

Columns are laid out (groups, C/groups * R * S, N * Ho * Wo) so each group is one large GEMM; when
each image alone gives a wide enough GEMM (Ho*Wo >= ``PER_IMAGE_MIN``) the forward pass uses the
per-image layout (N, groups, C/groups * R * S, Ho * Wo) instead, whose product is already in NCHW
order. The input gradient is, for stride 1 and K <= C, the forward pass of the flipped,
transposed problem (columns of gy, K*R*S rows), else the transposed GEMM followed by col2im
(columns of C*R*S rows, R*S strided adds): whichever column buffer is smaller.
"""
import numpy as np
from numpy.lib.stride_tricks import as_strided

from .transform import input_grad_problem
from .workspace import buffer, padded

PER_IMAGE_MIN = 1024


def supports(g, direction):
    return True


def windows(xp, g):
    """View (N, C, R, S, Ho, Wo) of the padded input ``xp`` under every kernel tap."""
    sn, sc, sh, sw = xp.strides
    (th, tw), (dh, dw) = g.stride, g.dilation
    return as_strided(xp, (g.N, g.C, g.R, g.S, g.Ho, g.Wo),
                      (sn, sc, sh * dh, sw * dw, sh * th, sw * tw), writeable=False)


def columns_by_group(x, g, slot):
    """Columns (groups, C/groups*R*S, N*Ho*Wo) of ``x`` in workspace ``slot``."""
    win = windows(padded(x, g.padding, slot + ".pad"), g)
    cols = buffer(slot, (g.C, g.R, g.S, g.N, g.Ho, g.Wo), x.dtype)
    np.copyto(cols, win.transpose(1, 2, 3, 0, 4, 5))
    return cols.reshape(g.groups, g.Cg * g.R * g.S, g.N * g.Ho * g.Wo)


def forward(x, w, g):
    L = g.Ho * g.Wo
    wm = w.reshape(g.groups, g.Kg, g.Cg * g.R * g.S)
    y = np.empty(g.output_shape, x.dtype)
    if L >= PER_IMAGE_MIN or g.N == 1:
        win = windows(padded(x, g.padding, "im2col.pad"), g)
        cols = buffer("im2col.cols", win.shape, x.dtype)
        np.copyto(cols, win)
        cols = cols.reshape(g.N, g.groups, g.Cg * g.R * g.S, L)
        np.matmul(wm, cols, out=y.reshape(g.N, g.groups, g.Kg, L))
        return y
    cols = columns_by_group(x, g, "im2col.cols")
    prod = buffer("im2col.prod", (g.groups, g.Kg, g.N * L), x.dtype)
    np.matmul(wm, cols, out=prod)
    np.copyto(y.reshape(g.N, g.K, L), prod.reshape(g.K, g.N, L).transpose(1, 0, 2))
    return y


def col2im(gcols, g, dtype):
    """Sum columns (N, C, R, S, Ho, Wo) back into a fresh (N, C, H, W) gradient."""
    pt, pb, pl, pr = g.padding
    gxp = buffer("im2col.gxpad", (g.N, g.C, g.Hp, g.Wp), dtype)
    gxp.fill(0)
    (sh, sw), (dh, dw) = g.stride, g.dilation
    hspan, wspan = sh * (g.Ho - 1) + 1, sw * (g.Wo - 1) + 1
    for r in range(g.R):
        for s in range(g.S):
            gxp[:, :, r * dh:r * dh + hspan:sh, s * dw:s * dw + wspan:sw] += gcols[:, :, r, s]
    return np.ascontiguousarray(gxp[:, :, pt:pt + g.H, pl:pl + g.W])


def input_grad(gy, w, g):
    if g.stride == (1, 1) and g.Kg <= g.Cg:
        return forward(*input_grad_problem(gy, w, g))
    L = g.Ho * g.Wo
    wt = w.reshape(g.groups, g.Kg, g.Cg * g.R * g.S).transpose(0, 2, 1)
    gcols = buffer("im2col.cols", (g.N, g.groups, g.Cg * g.R * g.S, L), gy.dtype)
    np.matmul(wt, np.ascontiguousarray(gy).reshape(g.N, g.groups, g.Kg, L), out=gcols)
    return col2im(gcols.reshape(g.N, g.C, g.R, g.S, g.Ho, g.Wo), g, gy.dtype)


def weight_grad(gy, x, g):
    cols = columns_by_group(x, g, "im2col.cols")
    L = g.Ho * g.Wo
    gyt = buffer("im2col.gyt", (g.K, g.N, L), gy.dtype)
    np.copyto(gyt, gy.reshape(g.N, g.K, L).transpose(1, 0, 2))
    gw = np.empty((g.groups, g.Kg, g.Cg * g.R * g.S), gy.dtype)
    np.matmul(gyt.reshape(g.groups, g.Kg, g.N * L), cols.transpose(0, 2, 1), out=gw)
    return gw.reshape(g.weight_shape)
