"""1x1 convolution as a batched GEMM per image and group, with no im2col.

Stride and padding are applied by selecting (and for padding, zero-filling) the sampled pixels
first; for stride 1 and no padding the input is used as it is. Work is split over images (and for
a batch of one over GEMM columns or the reduction) by ``parallel``.

Small outputs in a batch run one GEMM over the whole batch instead (``_batched``): N > 1 and
Ho*Wo <= ``BATCH_MAX_PIXELS`` (ResNet's 7x7 stage), or <= ``BATCH_MAX_PIXELS_GATHER`` for weight
gradients and strided layers (14x14). The sampled input is copied once into (C, N*Ho*Wo) (the
stride's gather and the copy are one pass), gy into (K, N*Ho*Wo), and for the forward and input
gradient the (K or C, N*Ho*Wo) product is copied back into NCHW. A GEMM of 49 columns per image
runs far below the BLAS's rate, and the weight gradient's per-image products each cost an (K, C)
accumulation too. Intel Xeon, OpenBLAS, one thread, CPU ms, min of 4 interleaved rounds, 8
images, per image -> batch, forward / input / weight: 512x7x7->2048 16.2/20.2/19.2 ->
11.8/12.4/11.0; 2048x7x7->512 14.9/19.9/28.4 -> 11.6/12.0/20.5; 1024x14x14->2048 stride 2
33.1/44.4/42.3 -> 22.4/25.3/21.3; 512x28x28->1024 stride 2 24.3/27.7/25.8 -> 23.6/26.7/23.0;
stride-1 14x14 weight gradients 27.0 -> 24.2 (1024->512), 12.4 -> 12.6, 13.1 -> 12.7, but their
forward and input gradients lost (11.1 -> 12.4, 11.5 -> 13.7), and at 28x28 every direction
lost (11.6 -> 14.5).
"""
import numpy as np

from ember.kernels.transpose import transposed

from . import im2col, parallel
from .workspace import buffer, owned, padded


BATCH_MAX_PIXELS = 64             # one GEMM over the batch up to this many output pixels
BATCH_MAX_PIXELS_GATHER = 196     # (weight gradients and strided layers: up to this many)


def supports(g, direction):
    return g.R == 1 and g.S == 1


def _batched(g, direction):
    """Whether ``direction`` of ``g`` runs as one GEMM over the batch (module docstring)."""
    limit = (BATCH_MAX_PIXELS_GATHER if direction == "weight" or g.stride != (1, 1)
             else BATCH_MAX_PIXELS)
    return g.N > 1 and g.Ho * g.Wo <= limit


def by_channel(x, g, slot):
    """Input pixels read by a 1x1 kernel, laid out (groups, C/groups, N*Ho*Wo) in workspace
    ``slot`` (one strided copy)."""
    if g.stride == (1, 1) and not any(g.padding):
        src = x.reshape(g.N, g.C, g.Ho, g.Wo)
    else:
        xp = padded(x, g.padding, "direct1x1.pad")
        sh, sw = g.stride
        src = xp[:, :, :sh * (g.Ho - 1) + 1:sh, :sw * (g.Wo - 1) + 1:sw]
    out = buffer(slot, (g.C, g.N, g.Ho, g.Wo), x.dtype)
    np.copyto(out, src.transpose(1, 0, 2, 3))
    return out.reshape(g.groups, g.Cg, g.N * g.Ho * g.Wo)


def _gy_by_channel(gy, g):
    """gy laid out (groups, K/groups, N*Ho*Wo)."""
    L = g.Ho * g.Wo
    out = buffer("direct1x1.gyk", (g.K, g.N, L), gy.dtype)
    np.copyto(out, gy.reshape(g.N, g.K, L).transpose(1, 0, 2))
    return out.reshape(g.groups, g.Kg, g.N * L)


def _to_images(prod, g, rows, out):
    """Copy a (groups, rows/groups, N*L) product into ``out`` (N, rows, L)."""
    np.copyto(out, prod.reshape(rows, g.N, -1).transpose(1, 0, 2))


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
    if _batched(g, "forward"):
        xc = by_channel(x, g, "direct1x1.xc")
        prod = buffer("direct1x1.prod", (g.groups, g.Kg, xc.shape[-1]), x.dtype)
        parallel.matmul(wm, xc, prod)
        _to_images(prod, g, g.K, y.reshape(g.N, g.K, -1))
        return y
    parallel.matmul(wm, sampled(x, g), y.reshape(g.N, g.groups, g.Kg, g.Ho * g.Wo))
    return y


def input_grad(gy, w, g):
    wt = w.reshape(g.groups, g.Kg, g.Cg).transpose(0, 2, 1)
    plain = g.stride == (1, 1) and not any(g.padding)
    if _batched(g, "input"):
        gyk = _gy_by_channel(gy, g)
        prod = parallel.matmul(wt, gyk, buffer("direct1x1.prod", (g.groups, g.Cg, gyk.shape[-1]),
                                               gy.dtype))
        if plain:
            gx = np.empty(g.input_shape, gy.dtype)
            _to_images(prod, g, g.C, gx.reshape(g.N, g.C, -1))
            return gx
        gxs = prod.reshape(g.C, g.N, g.Ho, g.Wo).transpose(1, 0, 2, 3)   # scattered below
    elif plain:
        gx = np.empty(g.input_shape, gy.dtype)
        gyg = np.ascontiguousarray(gy).reshape(g.N, g.groups, g.Kg, g.Ho * g.Wo)
        parallel.matmul(wt, gyg, gx.reshape(g.N, g.groups, g.Cg, g.H * g.W))
        return gx
    else:
        gyg = np.ascontiguousarray(gy).reshape(g.N, g.groups, g.Kg, g.Ho * g.Wo)
        gxs = parallel.matmul(wt, gyg, buffer("direct1x1.gxs",
                                              (g.N, g.groups, g.Cg, g.Ho * g.Wo),
                                              gy.dtype)).reshape(g.N, g.C, g.Ho, g.Wo)
    pt, pb, pl, pr = g.padding
    gxp = buffer("direct1x1.gxpad", (g.N, g.C, g.Hp, g.Wp), gy.dtype)
    gxp.fill(0)
    sh, sw = g.stride
    gxp[:, :, :sh * (g.Ho - 1) + 1:sh, :sw * (g.Wo - 1) + 1:sw] = gxs
    return owned(gxp[:, :, pt:pt + g.H, pl:pl + g.W])


def weight_grad(gy, x, g):
    # the GEMM's output gets the longer side as rows (faster in OpenBLAS) unless the weight is
    # large (its transposed copy back then costs more): im2col's rule (``im2col.swapped``)
    swap = im2col.swapped(g)
    shape = (g.groups, g.Cg, g.Kg) if swap else (g.groups, g.Kg, g.Cg)
    if _batched(g, "weight"):
        xc, gyk = by_channel(x, g, "direct1x1.xc"), _gy_by_channel(gy, g)
        a, b = (xc, gyk.transpose(0, 2, 1)) if swap else (gyk, xc.transpose(0, 2, 1))
        gw = parallel.matmul(a, b, np.empty(shape, gy.dtype))
        if swap:
            gw = transposed(gw)
        return gw.reshape(g.weight_shape)
    gyg = np.ascontiguousarray(gy).reshape(g.N, g.groups, g.Kg, g.Ho * g.Wo)
    xs = sampled(x, g)

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
        gw = transposed(gw)
    return gw.reshape(g.weight_shape)
