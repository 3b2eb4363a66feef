"""im2col + GEMM: the general algorithm, for every geometry and direction.

The batch is cut into chunks of images, one per thread (``parallel.run``), and each chunk into
sub-batches whose column buffer stays under ``SUBBATCH_BYTES`` (so the columns are still in cache
when the GEMM reads them, and the workspace stays small; more for small outputs, ``subbatch``).
Column layouts:

- per image (N, groups, C/groups*R*S, Ho*Wo) when one image gives a wide enough GEMM
  (Ho*Wo >= ``PER_IMAGE_MIN``, or a batch of one) or the weight is thin (K/groups*C/groups*R*S <=
  ``PER_IMAGE_MAX_WEIGHT``): the product is already in NCHW order;
- by group (groups, C/groups*R*S, n*Ho*Wo) otherwise: one wider GEMM per group and sub-batch,
  then one transposed copy of the (small) product into NCHW.

The input gradient is, for stride 1 and K <= C, the forward pass of the flipped, transposed problem
(columns of gy, K*R*S rows), else the transposed GEMM followed by col2im (columns of C*R*S rows,
R*S strided adds): whichever column buffer is smaller. Other strides: the GEMM per image, or
over a sub-batch when Ho*Wo < ``PER_IMAGE_MIN`` (gy copied into (K, n*Ho*Wo)), then the
col2im one padded plane at a time in cache (``im2col_numba.add_strided``; NumPy's slice adds
while it compiles, same bits). One thread, CPU ms, 8 images, 3x3 stride 2, slice adds -> Numba
(-> sub-batch GEMM): 128x56x56 46.4 -> 28.9; 256x28x28 48.1 -> 32.9 (33.7); 512x14x14 66.0
-> 46.7 -> 28.4 (torch 2.13 one thread 31, 24, 26). The weight gradient is one GEMM per
sub-batch (gy as (K, n*Ho*Wo) against the columns), accumulated per thread, partial sums added in
chunk order. A batch of one splits its GEMM instead (``parallel.matmul``).
"""
import dataclasses

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ember.kernels.transpose import transposed

from . import parallel
from .grad_as_forward import input_grad_problem
from .workspace import buffer, padded, zero_border

PER_IMAGE_MIN = 1024
# Thin weights (K/g * C/g*R*S at most this) take the per-image layout at any Ho*Wo: their GEMM is so
# cheap per output element that the by-group layout's transposed copy of the product costs more
# than the wider GEMM saves (forward, interleaved medians: (32,3,32,32)->32 5x5 1.69 vs 1.83 ms,
# LeNet conv1 (64,1,28,28)->6 5x5 0.55 vs 0.93 ms, conv2 (64,6,14,14)->16 5x5 0.83 vs 0.88 ms).
PER_IMAGE_MAX_WEIGHT = 8192
# Thin stride-1 forward passes with short output rows (Wo <= ROWS_MAX_WO, where the window copy
# moves runs of only Wo elements) build their columns over rows of the padded width
# (``_forward_rows``) when that widens the GEMM by at most ROWS_MAX_WIDENING (Wp / Wo).
# LeNet conv2 (64,6,14,14)->16 5x5: 0.80 -> 0.67 ms; with pad 2: 1.38 -> 1.15 ms. Not for long
# rows: the first layer (32,3,32,32)->32 5x5 went 1.56 -> 3.49 ms (the single-threaded crop copy
# also takes the page faults of the fresh 3 MiB result that the GEMM's threads take otherwise).
ROWS_MAX_WO = 16
ROWS_MAX_WIDENING = 2.0
SUBBATCH_BYTES = 4 << 20
# Outputs of at most SMALL_OUTPUT_PIXELS pixels (ResNet's 7x7 stage) take sub-batches of up to
# SMALL_OUTPUT_SUBBATCH times SUBBATCH_BYTES: the by-group GEMM's columns (or, for the weight
# gradient, its reduction) are n*49 long, and a whole batch of 8 ran faster than two sub-batches
# of 4 (one thread, CPU ms, min of 6 interleaved, 8 images, 4 -> 16 MiB): 512x7x7->512 3x3
# forward 23.3 -> 21.4, input gradient 29.2 -> 28.0, weight 44.6 -> 42.1; 512x14x14 3x3 stride 2
# forward 23.9 -> 22.6, weight 45.2 -> 42.3; at 14x14 outputs (256x28x28 stride 2) the forward
# did not gain (27.1 vs 27.8).
SMALL_OUTPUT_PIXELS = 64
SMALL_OUTPUT_SUBBATCH = 4


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
    """Images per sub-batch: the columns of at most SUBBATCH_BYTES (SMALL_OUTPUT_SUBBATCH times
    that for outputs of at most SMALL_OUTPUT_PIXELS pixels), at least one image."""
    per_image = g.C * g.R * g.S * g.Ho * g.Wo * itemsize
    limit = SUBBATCH_BYTES * (SMALL_OUTPUT_SUBBATCH if g.Ho * g.Wo <= SMALL_OUTPUT_PIXELS else 1)
    return max(1, limit // max(1, per_image))


def _sub(g, n):
    return dataclasses.replace(g, N=n)


def forward(x, w, g):
    L, CRS = g.Ho * g.Wo, g.Cg * g.R * g.S
    wm = w.reshape(g.groups, g.Kg, CRS)
    y = np.empty(g.output_shape, x.dtype)
    per_image = L >= PER_IMAGE_MIN or g.N == 1 or g.Kg * CRS <= PER_IMAGE_MAX_WEIGHT
    if (per_image and g.stride == (1, 1) and g.Kg * CRS <= PER_IMAGE_MAX_WEIGHT
            and g.Wo <= ROWS_MAX_WO and g.Wp <= ROWS_MAX_WIDENING * g.Wo):
        return _forward_rows(x, w, g)
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


def _forward_rows(x, w, g):
    """Stride-1 forward with columns over rows of the padded width (thin weights).

    For output row i and tap (r, s), the inputs of columns j = 0..Wp-1 are one contiguous run of
    the flattened padded plane starting at (i + r*dh)*Wp + s*dw, so the column buffer
    (n, C, R, S, Ho*Wp) is a copy of R*S*C runs of Ho*Wp elements per image (instead of
    Ho*R*S*C runs of Wo); the GEMM computes Wp - Wo junk columns per row, dropped when the
    product is copied into y. Each padded plane has dw*(S-1) spare elements so no run leaves it.
    """
    CRS, Lp = g.Cg * g.R * g.S, g.Ho * g.Wp
    (dh, dw), tail = g.dilation, g.dilation[1] * (g.S - 1)
    pt, pl = g.padding[0], g.padding[2]
    plane = g.Hp * g.Wp + tail
    wm = w.reshape(g.groups, g.Kg, CRS)
    y = np.empty(g.output_shape, x.dtype)
    nb = max(1, SUBBATCH_BYTES // max(1, g.C * g.R * g.S * Lp * x.itemsize))

    def chunk(lo, hi):
        for n0 in range(lo, hi, nb):
            n1 = min(hi, n0 + nb)
            n = n1 - n0
            xp = buffer("im2col.xrows", (n, g.C, plane), x.dtype)
            xp[:, :, g.Hp * g.Wp:] = 0
            body = xp[:, :, :g.Hp * g.Wp].reshape(n, g.C, g.Hp, g.Wp)
            zero_border(body, g.padding)
            body[:, :, pt:pt + g.H, pl:pl + g.W] = x[n0:n1]
            sn, sc, se = xp.strides
            win = as_strided(xp, (n, g.C, g.R, g.S, Lp), (sn, sc, dh * g.Wp * se, dw * se, se),
                             writeable=False)
            cols = buffer("im2col.cols", win.shape, x.dtype)
            np.copyto(cols, win)
            prod = buffer("im2col.prod", (n, g.groups, g.Kg, Lp), x.dtype)
            parallel.matmul(wm, cols.reshape(n, g.groups, CRS, Lp), prod)
            np.copyto(y[n0:n1], prod.reshape(n, g.K, g.Ho, g.Wp)[..., :g.Wo])
    parallel.run(chunk, g.N)
    return y


def col2im(gcols, g, out, by_channel=False):
    """Sum columns (n, C, R, S, Ho, Wo) back into ``out`` (n, C, H, W); ``by_channel``: columns
    laid out (C, R, S, n, Ho, Wo). One padded plane at a time in cache
    (``im2col_numba.add_strided``) when its kernel is ready, else R*S strided slice adds over
    the sub-batch (the same sums in the same order: the same bits)."""
    pt, pb, pl, pr = g.padding
    n = out.shape[0]
    nb_add = _numba_kernel("add_strided", gcols.dtype)
    if nb_add is not None:
        (sh, sw), (dh, dw) = g.stride, g.dilation
        shape = (g.C, g.R, g.S, n, g.Ho, g.Wo) if by_channel else \
            (n * g.C, g.R, g.S, 1, g.Ho, g.Wo)
        nb_add(gcols.reshape(shape), by_channel, sh, sw, dh, dw, g.Wp, pt, pl,
               np.empty(g.Hp * g.Wp, gcols.dtype), out)
        return
    gcols = (gcols.reshape(g.C, g.R, g.S, n, g.Ho, g.Wo).transpose(3, 0, 1, 2, 4, 5)
             if by_channel else gcols.reshape(n, g.C, g.R, g.S, g.Ho, g.Wo))
    gxp = buffer("im2col.gxpad", (n, g.C, g.Hp, g.Wp), gcols.dtype)
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
    if g.stride == (1, 1):
        return _input_grad_rows(gy, w, g)
    L, CRS = g.Ho * g.Wo, g.Cg * g.R * g.S
    wt = w.reshape(g.groups, g.Kg, CRS).transpose(0, 2, 1)
    gy = np.ascontiguousarray(gy)
    gx = np.empty(g.input_shape, gy.dtype)
    nb = subbatch(g, gy.itemsize)

    by_channel = L < PER_IMAGE_MIN and min(nb, g.N) > 1

    def chunk(lo, hi):
        for n0 in range(lo, hi, nb):
            n1 = min(hi, n0 + nb)
            n = n1 - n0
            if by_channel:   # one GEMM over the sub-batch: (C*R*S, K) @ (K, n*Ho*Wo)
                gyk = buffer("im2col.gyt", (g.K, n, L), gy.dtype)
                np.copyto(gyk, gy[n0:n1].reshape(n, g.K, L).transpose(1, 0, 2))
                gcols = buffer("im2col.cols", (g.groups, CRS, n * L), gy.dtype)
                parallel.matmul(wt, gyk.reshape(g.groups, g.Kg, n * L), gcols)
            else:
                gcols = buffer("im2col.cols", (n, g.groups, CRS, L), gy.dtype)
                parallel.matmul(wt, gy[n0:n1].reshape(n, g.groups, g.Kg, L), gcols)
            col2im(gcols, g, gx[n0:n1], by_channel)
    parallel.run(chunk, g.N)
    return gx


USE_NUMBA = True
_signatures = {}


def _numba_kernel(name, dtype):
    """``im2col_numba``'s ``name`` (``add_runs``, ``add_strided``, ``flip_transpose``) when it
    can run now for ``dtype`` (float32/float64; compiled or in the disk cache), else None: the
    NumPy path runs (under background compilation, while it compiles)."""
    dtype = np.dtype(dtype)
    if not USE_NUMBA or dtype not in (np.float32, np.float64):
        return None
    from ember.kernels.runtime import compiler
    nb = compiler.kernel_module(__name__ + "_numba")
    if nb is None:
        return None
    kernel = getattr(nb, name)
    sig = _signatures.get((name, dtype))
    if sig is None:
        a1, a3, i1 = np.empty(1, dtype), np.empty((1, 1, 1), dtype), np.empty(1, np.int64)
        a4 = np.empty((1,) * 4, dtype)
        args = ((a3, i1, 0, 0, 0, a1, a3) if name == "add_runs" else
                (a4, a4) if name == "flip_transpose" else
                (np.empty((1,) * 6, dtype), False, 0, 0, 0, 0, 0, 0, 0, a1, a4))
        sig = _signatures[(name, dtype)] = compiler.signature(*args)
    return kernel if compiler.ready(kernel, sig) else None


def _numba_add_runs(dtype):
    return _numba_kernel("add_runs", dtype)


def _input_grad_rows(gy, w, g):
    """Stride-1 input gradient by GEMM + col2im on rows of the padded width.

    gy is zero-extended from Wo to Wp = Wo + dilation*(S-1) columns, so the GEMM's columns for
    tap (r, s) land on one contiguous run of the flattened padded plane at offset r*dh*Wp + s*dw:
    col2im becomes R*S adds of (n*C, Ho*Wp) contiguous rows instead of strided (.., Ho, Wo)
    windows (LeNet conv2 input gradient 1.96 -> see docs/conv.md). The zero columns of gy give
    zero contributions; each plane has (S-1)*dw spare elements so the runs never overlap.
    """
    CRS, Lp = g.Cg * g.R * g.S, g.Ho * g.Wp
    (dh, dw), tail = g.dilation, g.dilation[1] * (g.S - 1)
    pt, pl = g.padding[0], g.padding[2]
    wt = w.reshape(g.groups, g.Kg, CRS).transpose(0, 2, 1)
    gx = np.empty(g.input_shape, gy.dtype)
    nb = max(1, SUBBATCH_BYTES // max(1, CRS * g.groups * Lp * gy.itemsize))
    offsets = [r * dh * g.Wp + s * dw for r in range(g.R) for s in range(g.S)]
    offs = np.array(offsets, np.int64)
    nb_add = _numba_add_runs(gy.dtype)

    def chunk(lo, hi):
        for n0 in range(lo, hi, nb):
            n1 = min(hi, n0 + nb)
            n = n1 - n0
            gyp = buffer("im2col.gyrows", (n, g.K, g.Ho, g.Wp), gy.dtype)
            gyp[..., g.Wo:] = 0
            gyp[..., :g.Wo] = gy[n0:n1]
            gcols = buffer("im2col.cols", (n, g.groups, CRS, Lp), gy.dtype)
            parallel.matmul(wt, gyp.reshape(n, g.groups, g.Kg, Lp), gcols)
            taps = gcols.reshape(n * g.C, g.R * g.S, Lp)
            plane = g.Hp * g.Wp + tail
            if nb_add is not None:
                nb_add(taps, offs, g.Wp, pt, pl, np.empty(plane, gy.dtype),
                       gx[n0:n1].reshape(n * g.C, g.H, g.W))
                continue
            gxp = buffer("im2col.gxrows", (n * g.C, plane), gy.dtype)
            gxp.fill(0)
            for t, off in enumerate(offsets):
                gxp[:, off:off + Lp] += taps[:, t]
            planes = gxp[:, :g.Hp * g.Wp].reshape(n, g.C, g.Hp, g.Wp)
            np.copyto(gx[n0:n1], planes[:, :, pt:pt + g.H, pl:pl + g.W])
    parallel.run(chunk, g.N)
    return gx


# Above this many weight elements the product is dW itself, not dW^T copied back into
# (K, C*R*S) order. With NumPy's strided copy back (~9 ms for (512, 2304) float32, more than
# the GEMM), ms swapped / not, two threads: (8, 256, 14, 14) -> 512 3x3/2 16.3 / 7.2; (8, 512,
# 7, 7) -> 512 35.4 / 15.3; (8, 256, 14, 14) -> 256 11.0 / 8.8; (8, 128, 28, 28) -> 256 3x3/2
# 5.3 / 5.1; below: (8, 64, 56, 56) -> 128 3x3/2 5.1 / 5.5, (64, 16, 32, 32) -> 32 5x5 12.7 /
# 17.6. With the tiled copy (``kernels.transpose``) large weights still lose: (8, 2048, 7, 7)
# -> 512 1x1 (``direct1x1``) 4.9 / 3.8.
SWAP_MAX_ELEMENTS = 1 << 18


def swapped(g):
    """Whether ``weight_grad`` computes dW^T = cols @ gy^T (then copied back): K/g < C/g*R*S
    and at most SWAP_MAX_ELEMENTS weight elements."""
    CRS = g.Cg * g.R * g.S
    return g.Kg < CRS and g.Kg * CRS * g.groups <= SWAP_MAX_ELEMENTS


def weight_grad(gy, x, g):
    L, CRS = g.Ho * g.Wo, g.Cg * g.R * g.S
    nb = subbatch(g, x.itemsize)
    # OpenBLAS's "A @ B^T" GEMM with a long reduction runs 1.2-1.6x faster when the output has
    # more rows than columns (measured: 32x75 49 vs 69 GFLOP/s, 16x150 37 vs 60, 64x576 69 vs 84,
    # one thread), so the product is computed as dW^T = cols @ gy^T (``swapped``).
    swap = swapped(g)
    shape = (g.groups, CRS, g.Kg) if swap else (g.groups, g.Kg, CRS)

    def chunk(lo, hi):
        acc = np.empty(shape, gy.dtype)
        for n0 in range(lo, hi, nb):
            n1 = min(hi, n0 + nb)
            n = n1 - n0
            cols = columns_by_group(x[n0:n1], _sub(g, n), "im2col.cols")
            gyt = buffer("im2col.gyt", (g.K, n, L), gy.dtype)
            np.copyto(gyt, gy[n0:n1].reshape(n, g.K, L).transpose(1, 0, 2))
            gyt = gyt.reshape(g.groups, g.Kg, n * L)
            a, b = (cols, gyt.transpose(0, 2, 1)) if swap else (gyt, cols.transpose(0, 2, 1))
            if n0 == lo:
                parallel.matmul(a, b, acc)
            else:
                acc += parallel.matmul(a, b, buffer("im2col.gwpart", acc.shape, gy.dtype))
        return acc
    parts = parallel.run(chunk, g.N)
    gw = parts[0]
    for p in parts[1:]:
        gw += p
    if swap:
        gw = transposed(gw)
    return gw.reshape(g.weight_shape)

