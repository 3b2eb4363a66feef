"""Implicit GEMM for stride 1: shifted GEMMs over the padded input flattened across the batch.

The padded input is stored channel-major as xt (C, N*Hp*Wp + tail). With stride 1, output position
q = (n*Hp + i)*Wp + j under tap (r, s) reads xt[:, q + r*dh*Wp + s*dw], so each tap is one GEMM
W[:, :, r, s] @ xt[:, off:off + M] over a plain slice, with no im2col copy. Positions with i >= Ho or
j >= Wo are computed and discarded (a (Hp*Wp)/(Ho*Wo) overhead). The forward pass accumulates taps
over column chunks that stay in cache; the weight gradient is one GEMM per tap against gy scattered
into the same flattened layout. Input gradient: the forward pass of the transposed problem. Column chunks (forward) and taps (weight
gradient) are split over threads by ``parallel.run``.
"""
import numpy as np

from . import parallel
from .grad_as_forward import input_grad_via_forward
from .workspace import buffer, owned, zero_border

CHUNK = 2048


def supports(g, direction):
    return g.stride == (1, 1)


def flattened(x, g):
    """Padded input as xt (C, N*Hp*Wp + tail) in the workspace, with the tail zeroed."""
    M = g.N * g.Hp * g.Wp
    tail = g.dilation[0] * (g.R - 1) * g.Wp + g.dilation[1] * (g.S - 1)
    flat = buffer("implicit.xt", (g.C * (M + tail),), x.dtype)
    xt = flat.reshape(g.C, M + tail)
    xt[:, M:] = 0
    body = flat.reshape(g.C, M + tail)[:, :M].reshape(g.C, g.N, g.Hp, g.Wp)
    zero_border(body, g.padding)
    pt, pl = g.padding[0], g.padding[2]
    body[:, :, pt:pt + g.H, pl:pl + g.W] = x.transpose(1, 0, 2, 3)
    return xt, M


def offsets(g):
    return [(r, s, r * g.dilation[0] * g.Wp + s * g.dilation[1])
            for r in range(g.R) for s in range(g.S)]


def forward(x, w, g):
    xt, M = flattened(x, g)
    wt = np.ascontiguousarray(w.transpose(2, 3, 0, 1))
    yfull = buffer("implicit.y", (g.K, M), x.dtype)
    taps = offsets(g)
    nchunks = -(-M // CHUNK)

    def chunk(lo, hi):
        tmp = buffer("implicit.tmp", (g.Kg, CHUNK), x.dtype)
        for ci in range(lo, hi):
            column_block(ci * CHUNK, min(M, (ci + 1) * CHUNK), tmp)

    def column_block(m0, m1, tmp):
        for gi in range(g.groups):
            ks, cs = slice(gi * g.Kg, (gi + 1) * g.Kg), slice(gi * g.Cg, (gi + 1) * g.Cg)
            out = yfull[ks, m0:m1]
            t = tmp[:, :m1 - m0]
            for n, (r, s, off) in enumerate(taps):
                if n == 0:
                    np.matmul(wt[r, s, ks], xt[cs, m0 + off:m1 + off], out=out)
                else:
                    np.matmul(wt[r, s, ks], xt[cs, m0 + off:m1 + off], out=t)
                    out += t
    parallel.run(chunk, nchunks)
    y = yfull.reshape(g.K, g.N, g.Hp, g.Wp)[:, :, :g.Ho, :g.Wo].transpose(1, 0, 2, 3)
    return owned(y)


def weight_grad(gy, x, g):
    xt, M = flattened(x, g)
    gyp = buffer("implicit.gy", (g.K, g.N, g.Hp, g.Wp), gy.dtype)
    zero_border(gyp, (0, g.Hp - g.Ho, 0, g.Wp - g.Wo))
    gyp[:, :, :g.Ho, :g.Wo] = gy.transpose(1, 0, 2, 3)
    gyp = gyp.reshape(g.K, M)
    jobs = [(gi, r, s, off) for gi in range(g.groups) for r, s, off in offsets(g)]
    # the GEMM's output gets the longer side as rows (faster in OpenBLAS, see im2col.weight_grad)
    if g.Kg < g.Cg:
        gwt = np.empty((g.R, g.S, g.groups, g.Cg, g.Kg), gy.dtype)

        def chunk(lo, hi):
            for gi, r, s, off in jobs[lo:hi]:
                ks, cs = slice(gi * g.Kg, (gi + 1) * g.Kg), slice(gi * g.Cg, (gi + 1) * g.Cg)
                parallel.matmul(xt[cs, off:off + M], gyp[ks].T, gwt[r, s, gi])
        parallel.run(chunk, len(jobs))
        return np.ascontiguousarray(gwt.transpose(2, 4, 3, 0, 1)).reshape(g.weight_shape)
    gw = np.empty((g.R, g.S, g.K, g.Cg), gy.dtype)

    def chunk(lo, hi):
        for gi, r, s, off in jobs[lo:hi]:
            ks, cs = slice(gi * g.Kg, (gi + 1) * g.Kg), slice(gi * g.Cg, (gi + 1) * g.Cg)
            parallel.matmul(gyp[ks], xt[cs, off:off + M].T, gw[r, s, ks])
    parallel.run(chunk, len(jobs))
    return np.ascontiguousarray(gw.transpose(2, 3, 0, 1))


input_grad = input_grad_via_forward(forward)
