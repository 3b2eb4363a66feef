"""im2col + GEMM: the general algorithm, for every geometry and direction.

The batch is cut into chunks of images, one per thread (``parallel.run``), and each chunk into
sub-batches whose column buffer stays under ``SUBBATCH_BYTES`` (so the columns are still in cache
when the GEMM reads them, and the workspace stays small). Column layouts:

- per image (N, groups, C/groups*R*S, Ho*Wo) when one image gives a wide enough GEMM
  (Ho*Wo >= ``PER_IMAGE_MIN``, or a batch of one): the product is already in NCHW order;
- by group (groups, C/groups*R*S, n*Ho*Wo) otherwise: one wider GEMM per group and sub-batch,
  then one transposed copy of the (small) product into NCHW.

The input gradient is, for stride 1 and K <= C, the forward pass of the flipped, transposed problem
(columns of gy, K*R*S rows), else the transposed GEMM followed by col2im (columns of C*R*S rows,
R*S strided adds): whichever column buffer is smaller. The weight gradient is one GEMM per
sub-batch (gy as (K, n*Ho*Wo) against the columns), accumulated per thread, partial sums added in
chunk order. A batch of one splits its GEMM instead (``parallel.matmul``).
"""
import dataclasses

import numpy as np
from numpy.lib.stride_tricks import as_strided

from . import parallel
from .transform import input_grad_problem
from .workspace import buffer, padded

PER_IMAGE_MIN = 1024
SUBBATCH_BYTES = 4 << 20


def supports(g, direction):
    return True


def windows(xp, g):
    """View (N, C, R, S, Ho, Wo) of the padded input ``xp`` under every kernel tap."""
    sn, sc, sh, sw = xp.strides
    (th, tw), (dh, dw) = g.stride, g.dilation
    return as_strided(xp, (xp.shape[0], g.C, g.R, g.S, g.Ho, g.Wo),
                      (sn, sc, sh * dh, sw * dw, sh * th, sw * tw), writeable=False)


def columns_by_group(x, g, slot):
    """Columns (groups, C/groups*R*S, n*Ho*Wo) of the n images ``x`` in workspace ``slot``."""
    n = x.shape[0]
    win = windows(padded(x, g.padding, slot + ".pad"), g)
    cols = buffer(slot, (g.C, g.R, g.S, n, g.Ho, g.Wo), x.dtype)
    np.copyto(cols, win.transpose(1, 2, 3, 0, 4, 5))
    return cols.reshape(g.groups, g.Cg * g.R * g.S, n * g.Ho * g.Wo)


def subbatch(g, itemsize):
    """Images per sub-batch: the columns of at most SUBBATCH_BYTES (at least one image)."""
    per_image = g.C * g.R * g.S * g.Ho * g.Wo * itemsize
    return max(1, SUBBATCH_BYTES // max(1, per_image))


def _sub(g, n):
    return dataclasses.replace(g, N=n)


def forward(x, w, g):
    L, CRS = g.Ho * g.Wo, g.Cg * g.R * g.S
    wm = w.reshape(g.groups, g.Kg, CRS)
    y = np.empty(g.output_shape, x.dtype)
    per_image = L >= PER_IMAGE_MIN or g.N == 1
    nb = subbatch(g, x.itemsize)

    def chunk(lo, hi):
        for n0 in range(lo, hi, nb):
            n1 = min(hi, n0 + nb)
            n, gs = n1 - n0, _sub(g, n1 - n0)
            if per_image:
                win = windows(padded(x[n0:n1], g.padding, "im2col.pad"), gs)
                cols = buffer("im2col.cols", win.shape, x.dtype)
                np.copyto(cols, win)
                parallel.matmul(wm, cols.reshape(n, g.groups, CRS, L),
                                y[n0:n1].reshape(n, g.groups, g.Kg, L))
            else:
                cols = columns_by_group(x[n0:n1], gs, "im2col.cols")
                prod = buffer("im2col.prod", (g.groups, g.Kg, n * L), x.dtype)
                parallel.matmul(wm, cols, prod)
                np.copyto(y[n0:n1].reshape(n, g.K, L), prod.reshape(g.K, n, L).transpose(1, 0, 2))
    parallel.run(chunk, g.N)
    return y


def col2im(gcols, g, out):
    """Sum columns (n, C, R, S, Ho, Wo) back into ``out`` (n, C, H, W)."""
    pt, pb, pl, pr = g.padding
    gxp = buffer("im2col.gxpad", (gcols.shape[0], g.C, g.Hp, g.Wp), gcols.dtype)
    gxp.fill(0)
    (sh, sw), (dh, dw) = g.stride, g.dilation
    hspan, wspan = sh * (g.Ho - 1) + 1, sw * (g.Wo - 1) + 1
    for r in range(g.R):
        for s in range(g.S):
            gxp[:, :, r * dh:r * dh + hspan:sh, s * dw:s * dw + wspan:sw] += gcols[:, :, r, s]
    np.copyto(out, gxp[:, :, pt:pt + g.H, pl:pl + g.W])


def input_grad(gy, w, g):
    if g.stride == (1, 1) and g.Kg <= g.Cg:
        return forward(*input_grad_problem(gy, w, g))
    L, CRS = g.Ho * g.Wo, g.Cg * g.R * g.S
    wt = w.reshape(g.groups, g.Kg, CRS).transpose(0, 2, 1)
    gy = np.ascontiguousarray(gy)
    gx = np.empty(g.input_shape, gy.dtype)
    nb = subbatch(g, gy.itemsize)

    def chunk(lo, hi):
        for n0 in range(lo, hi, nb):
            n1 = min(hi, n0 + nb)
            n = n1 - n0
            gcols = buffer("im2col.cols", (n, g.groups, CRS, L), gy.dtype)
            parallel.matmul(wt, gy[n0:n1].reshape(n, g.groups, g.Kg, L), gcols)
            col2im(gcols.reshape(n, g.C, g.R, g.S, g.Ho, g.Wo), g, gx[n0:n1])
    parallel.run(chunk, g.N)
    return gx


def weight_grad(gy, x, g):
    L, CRS = g.Ho * g.Wo, g.Cg * g.R * g.S
    nb = subbatch(g, x.itemsize)

    def chunk(lo, hi):
        acc = np.empty((g.groups, g.Kg, CRS), gy.dtype)
        for n0 in range(lo, hi, nb):
            n1 = min(hi, n0 + nb)
            n = n1 - n0
            cols = columns_by_group(x[n0:n1], _sub(g, n), "im2col.cols")
            gyt = buffer("im2col.gyt", (g.K, n, L), gy.dtype)
            np.copyto(gyt, gy[n0:n1].reshape(n, g.K, L).transpose(1, 0, 2))
            a, b = gyt.reshape(g.groups, g.Kg, n * L), cols.transpose(0, 2, 1)
            if n0 == lo:
                parallel.matmul(a, b, acc)
            else:
                acc += parallel.matmul(a, b, buffer("im2col.gwpart", acc.shape, gy.dtype))
        return acc
    parts = parallel.run(chunk, g.N)
    gw = parts[0]
    for p in parts[1:]:
        gw += p
    return gw.reshape(g.weight_shape)
