"""Register-blocked direct convolution (no im2col, no GEMM) for thin layers, groups == 1.

Forward: the weight is repacked once per call to (C*R*S, Kp), K padded with zeros to whole
vector blocks, its rows one vector longer (``WEIGHT_ROW_PADDING``); for each block of P output
pixels of a row and Kp-block of V vectors a Numba micro-kernel (``direct_numba``) keeps P*V
vector accumulators in registers and, per tap (c, r, s), broadcasts P input pixels against V
weight vectors (one FMA each), then stores them to a row buffer (pixels, Kp, the weight's row
stride); each finished output row is transposed into NCHW in register tiles. One image on
several threads splits its output rows (``row_parts``).
Weight gradient: gy of each image is transposed to (Ho*Wo, Kp) in register tiles; per block of T
taps (12 or 24, the remainder in powers of two: no padding taps) and Kp-block a micro-kernel holds
the T*V accumulators (a block of dW^T) in registers over the whole image. Any stride, padding and
dilation: taps are offsets into each zero-padded image.

Work is split over images in a ``prange`` driver on Numba's TBB layer, else with
``parallel.run`` (ember's threads; the kernels release the GIL); weight-gradient partial sums
are added in chunk order, so a given thread count gives the same bits. While a driver compiles
the one-thread kernel runs its runs over ember's pool (``ready``). Needs Numba: without it
``supports`` is False and the selector falls back.
"""
import numpy as np

from ember.kernels.runtime import threadpool
from ember.kernels.transpose import transposed

from . import parallel
from .geometry import tap_offsets

_kernels = None
TBB = True   # run on Numba's TBB layer when it is the threading layer (``_tbb_parts``)
SLIDE = True   # the forward's sliding variant where it applies (``_slide``)
# The forward of one image from SPLIT_MIN_FLOPS runs its output rows in SPLIT_PER_THREAD runs
# per thread over Numba's TBB threads (``row_parts``; the inference plan's mode "direct_split"
# from its own, timed ``plan.DIRECT_SPLIT_MIN_FLOPS``): the same products in the same order,
# the same bits. Below it, waking TBB's workers costs what the split saves (a ResNet-style
# net's 4.7-MFLOP layers at batch 1 ran 243/252 -> 254/266 us a call in its plan on the Xeon;
# SqueezeNet's 1x1 (1, 64, 55, 55) -> 16, 6.2 MFLOP, 80 -> 51).
SPLIT_MIN_FLOPS = 5e6
SPLIT_PER_THREAD = 2
# Vectors of padding after each row of the packed forward weight: with rows of a power-of-two
# size (Kp = 256 floats: 1 KiB) the column panel a pixel block reads over its taps fell into
# 1/16 of the cache sets and streamed from L3 at every block. ``forward_image``, one AVX-512
# thread (Intel Xeon, 2 MiB L2), float32, ms without -> with one vector: (1, 256, 14, 14) 3x3
# -> 256 3.46 -> 1.63, (1, 512, 7, 7) 3x3 -> 512 4.97 -> 2.89, (1, 512, 7, 7) 1x1 -> 2048
# 1.68 -> 1.05, (1, 1024, 14, 14) 1x1 -> 256 0.92 -> 0.70, (1, 128, 14, 14) 3x3 -> 128 0.35 ->
# 0.32 (two and three vectors: no better).
WEIGHT_ROW_PADDING = 1


def kernels():
    """The Numba kernel module, or None when Numba is unavailable."""
    global _kernels
    if _kernels is None:
        try:
            from . import direct_numba
        except ImportError:
            _kernels = False
        else:
            _kernels = direct_numba
    return _kernels or None


def supports(g, direction):
    """Whether the direct kernels can compute ``direction`` for ``g`` (Numba installed; not
    imported here: ``ready`` says whether the kernel can run now)."""
    from ember.kernels.runtime import compiler
    return (g.groups == 1 and (direction in ("forward", "weight")
                               or (direction == "input" and g.stride == (1, 1)))
            and _kernels is not False and compiler.available())


_signatures = {}


def ready(direction, g, dtype, force=False):
    """Whether the one-thread kernel ``forward`` / ``weight_grad`` / ``input_grad`` runs for
    ``g`` and ``dtype`` can run now (``compiler.ready``: compiled or loaded from the disk cache;
    else, under background compilation, queued and False, so the selector picks a NumPy / BLAS
    algorithm meanwhile). Where TBB splits the images, its ``prange`` driver is queued once that
    kernel is ready: the call splits images over ember's pool until the driver is compiled (the
    same runs, the same bits; a driver's compile re-optimises the kernel it calls and took 2-4x
    the kernel's own: 3.9 / 3.9 / 6.8 s against 2.2 / 1.0 / 1.9 on a Zen 4)."""
    from ember.kernels.runtime import compiler
    if not force and compiler.importing(__name__ + "_numba"):
        return False   # Numba's first import runs on the compile thread
    if kernels() is None:
        return False
    kernel, sig = _signature(direction, g, dtype, False)
    if not compiler.ready(kernel, sig, force):
        return False
    if not force:       # (a call, forcing, asks for its driver itself)
        _driver(direction, g, dtype)
    return True


def _driver(direction, g, dtype):
    """(parts, the ``prange`` driver of ``direction``) when TBB splits ``g``'s images into
    ``parts`` runs, the driver None while it compiles (queued); (0, None) when TBB does not
    split them."""
    parts = _tbb_parts(g.N)
    if not parts:
        return 0, None
    from ember.kernels.runtime import compiler
    kernel, sig = _signature(direction, g, dtype, True)
    return parts, (kernel if compiler.ready(kernel, sig, later=True) else None)


def _signature(direction, g, dtype, parallel_):
    """(dispatcher, Numba argument types) of the call ``forward`` / ``weight_grad`` /
    ``input_grad`` makes: the ``prange`` driver if ``parallel_``, else the one-thread kernel."""
    from ember.kernels.runtime import compiler
    key = (direction, np.dtype(dtype).str, parallel_)
    sig = _signatures.get(key)
    if sig is None:
        a2, a4 = np.empty((0, 0), dtype), np.empty((0, 0, 0, 0), dtype)
        off = np.empty(0, np.int64)
        if direction == "forward":
            args = (a4, 0, 0, 0, 0, a2, np.empty(0, dtype), a2, off, a4) + (0,) * 5 + \
                (False,) + (0,) * (1 if parallel_ else 2)
        elif direction == "input":
            args = (a4, a2, off, a4) + (0,) * (12 if parallel_ else 13)
        else:
            args = (a4, a4, 0, 0, 0, 0, off) + (0,) * (6 if parallel_ else 7)
        sig = _signatures[key] = compiler.signature(*args)
    name = {"forward": "forward", "input": "input_grad", "weight": "weight"}[direction] + \
        ("_parallel" if parallel_ else "")
    return getattr(kernels(), name), sig


def _lanes(dtype):
    return kernels().lanes(np.dtype(dtype).itemsize)


def _vectors(K, dtype):
    """Vectors per K block: 2 when K fills more than one vector, else 1."""
    return 2 if K > _lanes(dtype) else 1


# Cost of one tap of one pixel block beyond its P*V FMAs, in FMAs (``_pixels``): the offset
# load, the address arithmetic and the weight loads. Fitted on one AVX-512 thread, GFLOP/s of
# the block sizes for (C, K, Wo): (16, 64, 55) P=14 79 > 10 76 > 8 74 > 7 73 > 5 68;
# (64, 256, 13) P=7 77 > 8 68 > 5 64 > 10 62 > 6 53; (128, 32, 14) 14 105 > 7 94 > 8 84 > 5 77.
BLOCK_OVERHEAD = 4
# Largest pixel block of the runtime-stride kernel: LLVM keeps one x pointer per pixel there
# and spills them at 14 (stride 2, GFLOP/s of P=14 / 10 / 8: (64, 128, 57) -> 29 wide 39 / 79 /
# 69; (3, 64, 224) -> 112 wide 32 / 42 / 44).
MAX_STRIDED_PIXELS = 10


def _pixels(Wo, V=1, S=0, stride=1):
    """Output pixels per block: the P of ``direct_numba.forward_pixels(V)`` (those whose P*V
    accumulators, V weight vectors and a broadcast fit the host's vector registers; with a
    sliding width S, ``slide_pixels(V, S)``; at most ``MAX_STRIDED_PIXELS`` with a stride) with
    the least work per tap over a row, ceil(Wo / P) blocks of P*V FMAs and
    ``BLOCK_OVERHEAD`` each (the last block overlaps the one before it rather than run
    short), then the largest; 1 for rows shorter than 5. Fewest wasted pixels alone picked
    P = 5 for a row of 55 (10 accumulators: 68 against 79 GFLOP/s at 14)."""
    if Wo < 5:
        return 1
    k = kernels()
    top = Wo if stride == 1 else min(Wo, MAX_STRIDED_PIXELS)
    fits = [p for p in (k.slide_pixels(V, S) if S else k.forward_pixels(V)) if 1 < p <= top]
    return min(fits, key=lambda p: (-(-Wo // p) * (p * V + BLOCK_OVERHEAD), -p)) if fits else 1


def _slide(g, V):
    """Sliding width of the forward kernel for ``g`` (its S when stride and dilation along rows
    are 1, S is one of ``SLIDE_WIDTHS`` and a block of at least 8 accumulators fits), else 0."""
    k = kernels()
    if g.stride[1] != 1 or g.dilation[1] != 1 or g.S not in k.SLIDE_WIDTHS or g.Wo < 5:
        return 0
    return g.S if any(p <= g.Wo for p in k.slide_pixels(V, g.S)) else 0


def _tbb_parts(n_images):
    """Runs of images for the ``prange`` drivers when Numba's threading layer is TBB and more
    than one thread may run (its workers take work within microseconds; ember's pool costs ~100
    us per hand-over on this VM), else 0 (split over ember's pool with ``parallel.run``)."""
    from ember.kernels.runtime import threads
    if not TBB or not parallel.parallel_possible():
        return 0
    return threads.tbb_parts(n_images, parallel.threads(), parallel.CHUNKS_PER_THREAD)


def row_parts(g, P, threads, min_flops=None):
    """Runs of output rows for the forward of ``g``'s one image split over ``threads`` threads
    of Numba's TBB layer (``direct_numba.forward_rows_split`` / ``forward_image_split``), or 0
    when that does not apply: several images, a pixel block P longer than a row, under
    ``min_flops`` (default ``SPLIT_MIN_FLOPS``), one thread, another layer."""
    from ember.kernels.runtime import threads as rt_threads
    if min_flops is None:
        min_flops = SPLIT_MIN_FLOPS
    if not TBB or g.N != 1 or P > g.Wo or g.flops() < min_flops:
        return 0
    return rt_threads.tbb_parts(g.Ho, threads, SPLIT_PER_THREAD)


_forward_plans = {}


def _forward_plan(g, dtype):
    """(V, Kp, off, S, P) of the forward kernel for ``g`` (kept per geometry and the SLIDE
    setting: a LeNet-sized call is ~200 us, and these took ~10 us of Python)."""
    key = (g.key(), np.dtype(dtype).str, SLIDE)
    plan = _forward_plans.get(key)
    if plan is None:
        V = _vectors(g.K, dtype)
        KB = V * _lanes(dtype)
        S = _slide(g, V) if SLIDE else 0
        plan = (V, -(-g.K // KB) * KB, tap_offsets(g), S, _pixels(g.Wo, V, S, g.stride[1]))
        if len(_forward_plans) > 256:
            _forward_plans.clear()
        _forward_plans[key] = plan
    return plan


def pack(w, bias, g, dtype):
    """The forward kernel's operands for weight ``w`` and ``bias`` (or None): (wp (C*R*S, Kp +
    L), the weight transposed, zero beyond K: Kp columns in whole blocks of V vectors, then one
    vector of row padding (``WEIGHT_ROW_PADDING``); bp (Kp,) the bias zero-padded, or empty
    without one) and the kernel's plan (V, Kp, off, S, P). The kernels' row buffers take wp's
    row stride."""
    plan = _forward_plan(g, dtype)
    Kp = plan[1]
    wp = np.empty((g.C * g.R * g.S, Kp + WEIGHT_ROW_PADDING * _lanes(dtype)), dtype)
    wp[:, g.K:] = 0   # (only the padding: zeroing the whole weight first cost a pass over it)
    transposed(w.reshape(g.K, -1), out=wp[:, :g.K])
    bp = np.zeros(Kp if bias is not None else 0, dtype)
    if bias is not None:
        bp[:g.K] = bias
    return wp, bp, plan


def forward(x, w, g, bias=None, residual=None, relu=False):
    """The convolution of x by w, plus ``bias`` (K,) when given (added to each row's sums in
    the kernel, before the transpose into NCHW), plus ``residual`` (the output's shape) when
    given, then ReLU when ``relu`` (per image in the kernel, eager's order of operations)."""
    k = kernels()
    ready("forward", g, x.dtype, force=True)
    wp, bp, (V, Kp, off, S, P) = pack(w, bias, g, x.dtype)
    rs = (np.empty((0, 0), x.dtype) if residual is None
          else np.ascontiguousarray(residual, x.dtype).reshape(g.N, -1))
    y = np.empty(g.output_shape, x.dtype)
    sh, sw = g.stride

    x = np.ascontiguousarray(x)     # padded image by image in the kernel
    pt, pb, pl, pr = g.padding
    # (a batch of one runs outside ``parallel.policy``: selector._SERIAL_FOR_ONE)
    parts = 0 if threadpool.inside() else row_parts(g, P, parallel.threads())
    if parts and _split_ready(g, x.dtype):
        xp = x
        if pt or pb or pl or pr:
            xp = np.zeros((1, g.C, g.H + pt + pb, g.W + pl + pr), x.dtype)
            k.pad_rows(x, pt, pl, xp)
        L = _lanes(x.dtype)
        if g.Wo >= L:
            rowbufs = np.empty((parts, sums_size(g.Wo, wp)), x.dtype)
            k.forward_rows_split(xp, wp, bp, rs, off, y, sh, sw, P, V, S, bool(relu), rowbufs,
                                 parts)
        else:
            acc = np.empty(sums_size(g.Ho * g.Wo, wp), x.dtype)
            k.forward_image_split(xp, xp, 0, 0, wp, bp, rs, off, acc, _EMPTY3[x.dtype.str], y,
                                  sh, sw, P, V, S, bool(relu), 1, 1, 1, 1, parts)
        return y
    parts, driver = _driver("forward", g, x.dtype)
    if driver is not None:
        driver(x, pt, pb, pl, pr, wp, bp, rs, off, y, sh, sw, P, V, S, bool(relu), parts)
        return y

    def chunk(lo, hi):
        k.forward(x, pt, pb, pl, pr, wp, bp, rs, off, y, sh, sw, P, V, S, bool(relu), lo, hi)
    parallel.run(chunk, g.N)
    return y


def sums_size(pixels, wp):
    """Elements of a buffer of the forward kernels' sums for ``pixels`` output pixels (rounded up
    to whole L x L transpose tiles) with the packed weight ``wp``'s row stride."""
    L = _lanes(wp.dtype)
    return -(-pixels // L) * L * wp.shape[1]


_EMPTY3 = {np.dtype(t).str: np.empty((0, 0, 0), t) for t in (np.float32, np.float64)}


def _split_ready(g, dtype):
    """Whether the kernels of the split forward of one image are compiled (else queued in the
    background, and ``forward`` runs the one-thread kernel meanwhile: the same bits)."""
    from ember.kernels.runtime import compiler
    k = kernels()
    key = ("split", np.dtype(dtype).str)
    sigs = _signatures.get(key)
    if sigs is None:
        a1, a2 = np.empty(0, dtype), np.empty((0, 0), dtype)
        a3, a4 = _EMPTY3[np.dtype(dtype).str], np.empty((0, 0, 0, 0), dtype)
        off = np.empty(0, np.int64)
        sigs = _signatures[key] = (
            (k.pad_rows, compiler.signature(a4, 0, 0, a4)),
            (k.forward_rows_split, compiler.signature(a4, a2, a1, a2, off, a4, 0, 0, 0, 0, 0,
                                                      False, a2, 0)),
            (k.forward_image_split, compiler.signature(a4, a4, 0, 0, a2, a1, a2, off, a1, a3,
                                                       a4, 0, 0, 0, 0, 0, False, 0, 0, 0, 0, 0)))
    short = g.Wo < _lanes(dtype)
    return all(compiler.ready(fn, sig) for fn, sig in sigs
               if fn is not (k.forward_rows_split if short else k.forward_image_split))


def _weight_slide(g, V):
    """Sliding width of the weight kernel for ``g`` (its S when V = 1, stride and dilation along
    rows are 1 and S is one of ``SLIDE_WIDTHS``), else 0."""
    k = kernels()
    if (not SLIDE or V != 1 or g.stride[1] != 1 or g.dilation[1] != 1
            or g.S not in k.SLIDE_WIDTHS or k.slide_groups(g.S) < 1):
        return 0
    return g.S


def weight_grad(gy, x, g):
    k = kernels()
    ready("weight", g, x.dtype, force=True)
    V = _vectors(g.K, x.dtype)
    KB = V * _lanes(x.dtype)
    Kp = -(-g.K // KB) * KB
    off = tap_offsets(g)
    gy = np.ascontiguousarray(gy)
    sh, sw = g.stride
    S = _weight_slide(g, V)

    x = np.ascontiguousarray(x)     # padded image by image in the kernel
    pt, pb, pl, pr = g.padding
    parts, driver = _driver("weight", g, x.dtype)
    if driver is not None:
        gw = driver(gy, x, pt, pb, pl, pr, off, sh, sw, Kp, V, S, parts)
        return transposed(gw[:, :g.K]).reshape(g.weight_shape)

    def chunk(lo, hi):
        return k.weight(gy, x, pt, pb, pl, pr, off, sh, sw, Kp, V, S, lo, hi)
    # the driver's runs while it compiles, an empty one adding zeros as the driver's does
    sums = threadpool.driver_runs(chunk, g.N, parts, parallel.threads()) if parts else \
        parallel.run(chunk, g.N)
    gw = sums[0]
    for p in sums[1:]:
        gw += 0 if p is None else p
    return transposed(gw[:, :g.K]).reshape(g.weight_shape)


_input_plans = {}


def _input_plan(g, dtype):
    """(P, VX, CB, PT, QL, Hq, Wq, off) of the input-gradient kernel for ``g`` (kept per
    geometry): VX vectors of columns per segment (1 when a gx row fits one vector), and the rows
    per block P in ``INPUT_ROWS`` (at most H) with
    the lowest estimated cost: per tap and channel block max(FMAs / 2, loads / 2, 4 cycles of FMA
    latency), times the taps each row block runs (blocks near the top and bottom run fewer).
    The padded gy image is (K, Hq, Wq) with PT = P - 1 zero rows above and below and QL zero
    columns on the left; ``off`` holds the taps' offsets in it, ordered (r, k, s) so that the
    taps of a row block are one contiguous run of rows r."""
    key = (g.key(), np.dtype(dtype).str)
    plan = _input_plans.get(key)
    if plan is not None:
        return plan
    k = kernels()
    L = _lanes(dtype)
    VX = 1 if g.W <= L else 2
    pt, dh = g.padding[0], g.dilation[0]
    best = None
    for P in k.INPUT_ROWS:
        if P > g.H:
            continue
        cbmax = k.input_channels(P, VX)
        nb = -(-g.C // cbmax)
        CB = -(-g.C // nb)
        blocks = [CB] * (g.C // CB) + ([g.C % CB] if g.C % CB else [])
        per_tap = sum(max(P * VX * cb / 2, (P * VX + cb) / 2, 4) for cb in blocks)
        rows = 0
        for y0 in range(0, g.H, P):
            y0 = min(y0, g.H - P)
            r_lo = max(0, -((g.Ho - 1 - y0 - pt) // dh))
            r_hi = min(g.R - 1, (y0 + P - 1 + pt) // dh)
            rows += max(0, r_hi - r_lo + 1)
        cost = rows * per_tap
        if best is None or cost < best[0]:
            best = (cost, P, CB)
    _, P, CB = best
    pl, dw = g.padding[2], g.dilation[1]
    PT = P - 1
    QL = max(0, (g.S - 1) * dw - pl)
    Hq = g.Ho + 2 * PT
    Wq = max(g.Wo, max(g.W, VX * L) + pl) + QL
    r = np.arange(g.R)[:, None, None] * (dh * Wq)
    kk = np.arange(g.K)[None, :, None] * (Hq * Wq)
    s = np.arange(g.S)[None, None, :] * dw
    off = (kk - r - s).reshape(-1).astype(np.int64)
    if len(_input_plans) > 256:
        _input_plans.clear()
    plan = _input_plans[key] = (P, VX, CB, PT, QL, Hq, Wq, off)
    return plan


def input_grad(gy, w, g):
    """Stride-1 input gradient: gx[n, c, y, x] = sum over (k, r, s) of w[k, c, r, s] *
    gy[n, k, y + pt - r*dh, x + pl - s*dw] along rows of gx (``direct_numba.input_grad``)."""
    k = kernels()
    ready("input", g, gy.dtype, force=True)
    P, VX, CB, PT, QL, Hq, Wq, off = _input_plan(g, gy.dtype)
    wt = np.ascontiguousarray(w.transpose(2, 0, 3, 1)).reshape(g.R * g.K * g.S, g.C)
    gy = np.ascontiguousarray(gy)
    gx = np.empty(g.input_shape, gy.dtype)
    args = (gy, wt, off, gx, g.padding[0], g.padding[2], g.dilation[0], g.R, PT, QL, Hq, Wq,
            P, VX, CB)
    parts, driver = _driver("input", g, gy.dtype)
    if driver is not None:
        driver(*args, parts)
    else:   # (each image's rows alone: any split gives the same bits)
        parallel.run(lambda lo, hi: k.input_grad(*args, lo, hi), g.N)
    return gx
