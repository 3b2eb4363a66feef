"""1x1 convolution as a batched GEMM per image and group, with no im2col.

Stride and padding are applied by selecting (and for padding, zero-filling) the sampled pixels
first; for stride 1 and no padding the input is used as it is. Work is split over images (and for
a batch of one over GEMM columns or the reduction) by ``parallel``.
"""
import numpy as np

from . import parallel
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
    parallel.matmul(wm, sampled(x, g), y.reshape(g.N, g.groups, g.Kg, g.Ho * g.Wo))
    return y


def input_grad(gy, w, g):
    wt = w.reshape(g.groups, g.Kg, g.Cg).transpose(0, 2, 1)
    gyg = np.ascontiguousarray(gy).reshape(g.N, g.groups, g.Kg, g.Ho * g.Wo)
    if g.stride == (1, 1) and not any(g.padding):
        gx = np.empty(g.input_shape, gy.dtype)
        parallel.matmul(wt, gyg, gx.reshape(g.N, g.groups, g.Cg, g.H * g.W))
        return gx
    gxs = parallel.matmul(wt, gyg, buffer("direct1x1.gxs", (g.N, g.groups, g.Cg, g.Ho * g.Wo),
                                          gy.dtype)).reshape(g.N, g.C, g.Ho, g.Wo)
    pt, pb, pl, pr = g.padding
    gxp = buffer("direct1x1.gxpad", (g.N, g.C, g.Hp, g.Wp), gy.dtype)
    gxp.fill(0)
    sh, sw = g.stride
    gxp[:, :, :sh * (g.Ho - 1) + 1:sh, :sw * (g.Wo - 1) + 1:sw] = gxs
    return np.ascontiguousarray(gxp[:, :, pt:pt + g.H, pl:pl + g.W])


def weight_grad(gy, x, g):
    gyg = np.ascontiguousarray(gy).reshape(g.N, g.groups, g.Kg, g.Ho * g.Wo)
    xs = sampled(x, g)
    # the GEMM's output gets the longer side as rows (faster in OpenBLAS, see im2col.weight_grad)
    swap = g.Kg < g.Cg
    shape = (g.groups, g.Cg, g.Kg) if swap else (g.groups, g.Kg, g.Cg)

    def chunk(lo, hi):
        # one image at a time: (K/g x Ho*Wo) @ (Ho*Wo x C/g), accumulated in this thread
        acc = np.empty(shape, gy.dtype)
        tmp = buffer("direct1x1.gwpart", acc.shape, gy.dtype)
        for n in range(lo, hi):
            out = acc if n == lo else tmp
            if swap:
                parallel.matmul(xs[n], gyg[n].transpose(0, 2, 1), out)
            else:
                parallel.matmul(gyg[n], xs[n].transpose(0, 2, 1), out)
            if n != lo:
                acc += tmp
        return acc
    parts = parallel.run(chunk, g.N)
    gw = parts[0]
    for p in parts[1:]:
        gw += p
    if swap:
        gw = np.ascontiguousarray(gw.transpose(0, 2, 1))
    return gw.reshape(g.weight_shape)
