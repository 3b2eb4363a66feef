"""1x1 convolution as a batched GEMM per image and group, with no im2col.

Stride and padding are applied by selecting (and for padding, zero-filling) the sampled pixels
first; for stride 1 and no padding the input is used as it is.
"""
import numpy as np

from .workspace import buffer, padded


def supports(g, direction):
    return g.R == 1 and g.S == 1


def sampled(x, g):
    """Input pixels read by a 1x1 kernel: (N, groups, C/groups, Ho*Wo)."""
    if g.stride == (1, 1) and not any(g.padding):
        xs = x
    else:
        xp = padded(x, g.padding, "direct1x1.pad")
        sh, sw = g.stride
        xs = xp[:, :, :sh * (g.Ho - 1) + 1:sh, :sw * (g.Wo - 1) + 1:sw]
    if not xs.flags.c_contiguous:
        out = buffer("direct1x1.x", xs.shape, xs.dtype)
        np.copyto(out, xs)
        xs = out
    return xs.reshape(g.N, g.groups, g.Cg, g.Ho * g.Wo)


def forward(x, w, g):
    y = np.empty(g.output_shape, x.dtype)
    wm = w.reshape(g.groups, g.Kg, g.Cg)
    np.matmul(wm, sampled(x, g), out=y.reshape(g.N, g.groups, g.Kg, g.Ho * g.Wo))
    return y


def input_grad(gy, w, g):
    wt = w.reshape(g.groups, g.Kg, g.Cg).transpose(0, 2, 1)
    gyg = np.ascontiguousarray(gy).reshape(g.N, g.groups, g.Kg, g.Ho * g.Wo)
    if g.stride == (1, 1) and not any(g.padding):
        gx = np.empty(g.input_shape, gy.dtype)
        np.matmul(wt, gyg, out=gx.reshape(g.N, g.groups, g.Cg, g.H * g.W))
        return gx
    gxs = np.matmul(wt, gyg).reshape(g.N, g.C, g.Ho, g.Wo)
    pt, pb, pl, pr = g.padding
    gxp = buffer("direct1x1.gxpad", (g.N, g.C, g.Hp, g.Wp), gy.dtype)
    gxp.fill(0)
    sh, sw = g.stride
    gxp[:, :, :sh * (g.Ho - 1) + 1:sh, :sw * (g.Wo - 1) + 1:sw] = gxs
    return np.ascontiguousarray(gxp[:, :, pt:pt + g.H, pl:pl + g.W])


def weight_grad(gy, x, g):
    gyg = np.ascontiguousarray(gy).reshape(g.N, g.groups, g.Kg, g.Ho * g.Wo)
    xs = sampled(x, g)
    if g.N == 1:
        gw = np.matmul(gyg[0], xs[0].transpose(0, 2, 1))
    else:
        gw = np.matmul(gyg, xs.transpose(0, 1, 3, 2)).sum(axis=0)
    return np.ascontiguousarray(gw, dtype=gy.dtype).reshape(g.weight_shape)
