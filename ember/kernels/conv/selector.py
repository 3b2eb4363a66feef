"""Choose the convolution algorithm per (geometry, dtype, direction): ``run`` for 1-d (a 2-d
problem of height 1) and 2-d convolutions, ``run_3d`` for 3-d ones.

Order of precedence: ``ember.backends.conv.algorithm`` (forced; ValueError if it cannot handle the
problem), then the autotuner when ``ember.backends.conv.benchmark`` is True (times every capable
algorithm on the first call for a key and keeps the fastest for the process), else ``heuristic``.

Heuristic (measured on the 2-core Zen 4 VM with OpenBLAS, float32, under load from other processes,
interleaved medians; see docs/conv.md and benchmarks/conv.py):
- depthwise groups (C/groups == 1, groups == C) -> ``depthwise``;
- stride-2 forward passes of at most SPACE_TO_DEPTH_MAX_CHANNELS / 4 input channels and kernels
  of at least SPACE_TO_DEPTH_MIN_KERNEL (ResNet's 7x7/2 stem) -> ``space_to_depth`` (a 4x4
  stride-1 problem over the 12 phase channels) when that problem runs ``direct``. Intel Xeon,
  one thread, CPU ms, direct -> space_to_depth (torch): 1x3x224x224 5.7-7.7 -> 3.6-5.6 (3.0-3.3),
  8x3x224x224 34-64 -> 27-43 (20-22). Its weight gradient stays ``direct`` (45 vs 46-50);
- AVX-512 direct kernels (``_isa``): ``direct`` in every direction it supports for groups-1 layers
  with K >= DIRECT_MIN_K_FORWARD and output rows of >= WIDE_DIRECT_MIN_WO pixels (kernels
  larger than 1x1 at stride 1; in a batch also 1x1 stride 1 and the weight gradient of strided
  kernels) or >= WIDE_DIRECT_MIN_WO_STRIDED (1x1 stride 1 and strided larger kernels otherwise),
  never strided 1x1, except a thin batch of one (``thin``) (``_wide_direct``). OpenBLAS (0.3.x)
  runs its Haswell (AVX2) kernels on AMD Zen 5 (sgemm ~96 GFLOP/s on one core against ~175 with its
  SkylakeX kernels), so every GEMM path ran at AVX2 speed there while ``direct`` runs 16-lane
  FMAs. Zen 5 VM, one thread, CPU ms, interleaved min, old choice -> direct: forward
  8x64x56x56->64 3x3 winograd 12.8 -> 9.8, 1x64x56x56 3.3 -> 1.2, 8x256x14x14->256 15.1 -> 11.1,
  8x64x56x56->256 1x1 direct1x1 9.6 -> 7.7, 1x128x28x28->128 3x3 3.6 -> 1.4; input gradient
  8x64x56x56 winograd 13.0 -> 11.2, 8x256x14x14 12.0 -> 12.9 (the one loss); weight gradient
  8x64x56x56 15.7 -> 10.5, 8x256x14x14 19.8 -> 16.5. Left to the GEMM paths, where ``direct``
  lost: 1x1 at 14x14 (1x1024x14x14->256 1.46 vs 1.31), strided 1x1 (1x256x56x56->512 2.51 vs
  2.29), 7x7 outputs (1x512x7x7->512 3x3 7.0 vs 3.4 im2col; 8x512x7x7 forward 30.4 vs 23.6),
  the forward of strided 3x3 to 14x14 (8x256x28x28 /2 27.7 vs 24.2; its weight gradient 16.0 vs
  27.6 runs ``direct``). 1x1 at 14x14 in a batch: 8x256x14x14->1024 forward 6.6 vs 9.3, weight
  10.0 vs 11.5; 8x1024x14x14->256 forward 6.8 vs 9.2, input 8.2 vs 8.7, weight 8.0 vs 12.0;
  Stride-1 layers take that rule only where this host's probe (``hostprobe``, measured once
  per host and kept on disk) saw ``direct`` win: on an Intel Xeon whose OpenBLAS runs its
  SkylakeX kernels the GEMM paths win on 1x1 layers and on 3x3 layers wider than 64 channels
  (8x64x56x56->256 1x1 forward 53.3 vs 16.5 ms, 8x256x14x14->256 3x3 59.9 vs 35.1), where on
  Zen 5 ``direct`` won these layers (above); strided weight gradients keep ``direct`` by rule,
  strided forward passes up to the probe's widest 3x3 win (else the GEMM paths; Xeon, probe
  64 channels, CPU ms direct / im2col: 8x128x56x56 3x3/2 45-61 / 34-44, one image 5.2-6.6 /
  4.2-5.6, 1x64x56x56 -> 128 3.3 / 3.3);
- with two or more threads, a batch-of-one forward pass of a stride-1 kernel larger than 1x1,
  at most BATCH1_DIRECT_MAX_CHANNELS wide with output rows of >= BATCH1_DIRECT_MIN_WO pixels,
  runs ``direct`` on AVX-512 whatever the probe says (``_batch_of_one_direct``: its rows split
  over TBB, where Winograd fans out to ember's pool three times; ResNet-18 at batch 1, two
  threads, 29.4-31.4 -> 27.1-28.6 ms);
- 1x1 kernels -> ``direct1x1``;
- 3x3, stride 1, dilation 1 -> ``winograd`` when min(C/g, K/g) >= WINOGRAD_MIN_CHANNELS and the
  batch has >= WINOGRAD_MIN_TILES 4x4 output tiles (forward, input gradient), or
  min(C/g, K/g) >= WEIGHT_MIN_CHANNELS and >= WEIGHT_MIN_TILES tiles (weight gradient). Since the
  weight gradient's 36 GEMMs are split over ember's threads (``parallel``) it wins from fewer tiles
  than before: 1.8 vs 3.0 ms at 196 tiles (1x64x56x56), 11.3 vs 25.2 ms at 128 (8x256x14x14),
  17.6 vs 30.9 ms (8x128x28x28), 4.6 vs 6.7 ms (4x64x28x28 -> 128). Forward and input gradient
  also from 128 tiles (was 192) since Winograd runs on ember's own chunks in every direction
  (``parallel.OWN_THREADS_ALGORITHMS``): 8x256x14x14 forward 10.3 vs 12.1 ms, input 10.8 vs 12.7,
  and the weight gradient that follows no longer competes with OpenBLAS's spinning threads (11.2
  vs 15-19 ms); at 32 channels they tie with im2col (14.6 vs 13.4 ms, 8x32x56x56). At 16-32
  tiles (1x256x14x14, 8x512x7x7) im2col wins 2-7x. Batches below BATCH_THRESHOLD images are the
  batch-of-one inference path: the single image alone must give WINOGRAD_MIN_TILES tiles, else its
  36 GEMMs are too thin and im2col (per-image layout, output already in NCHW order) runs instead.
  WINOGRAD_MIN_TILES is 36, measured on ResNet's batch-of-one layers (one thread, CPU
  ms im2col / winograd, forward and forward+input gradient): 1x128x28x28 (49 tiles, ResNet-18/50's
  layer2) 3.32 / 1.62 and 7.24 / 3.58; 1x64x28x28 (49) 1.06 / 0.52 (``direct`` 0.88); 1x128x24x24
  (36) 2.69 / 1.41; 1x256x24x24 (36) 9.09 / 6.90; 3x256x14x14 (48) 10.2 / 9.0; 2x256x14x14 (32
  tiles) ties (13.8 / 14.4) and 3x512x7x7 (12) loses (26.5 / 47.4): from 36 tiles;
- weight gradients of wide 3x3 layers (min(C/g, K/g) >= WIDE_CHANNELS) with fewer tiles than that:
  ``winograd`` from WIDE_MIN_TILES F(4x4) tiles, below it ``winograd2x2`` (F(2x2,3x3): four times
  the tiles, additions-only transforms). ms im2col / F(4x4) / F(2x2), two threads: 1x512x7x7 (4
  tiles) 14.0 / 8.4 / 5.9; 1x256x14x14 (16) 4.3 / 2.6 / 2.4; 8x512x7x7 (32) 30.6 / 14.1 / 20.4.
  Forward passes there stay on im2col (1x512x7x7 1.9 / 8.9 / 3.6 ms; 1x256x14x14 1.9 / 2.6 /
  1.8, a tie);
- thin layers (groups 1, C*R*S <= DIRECT_MAX_TAPS, K <= DIRECT_MAX_K) -> ``direct`` (Numba
  register-blocked kernel, no column buffer) for the weight gradient, and for the forward pass when
  K >= DIRECT_MIN_K_FORWARD (at K = 6 ten of 16 vector lanes idle and im2col wins: LeNet conv1
  forward 0.66 vs 0.51 ms). Two threads, ms direct / im2col, forward and weight gradient:
  (32,3,32,32)->32 5x5 1.30/1.69, 1.07/1.6-2.8; LeNet conv2 (64,6,14,14)->16 5x5 0.43/0.71,
  0.59/1.16; (8,16,32,32)->32 3x3 0.81/1.04, 1.12/1.57; (16,3,64,64)->16 3x3 0.89/1.05,
  2.09/2.78; (16,3,32,32)->64 5x5 1.50/1.56, 2.82/3.16; at 288 taps ((8,32,16,16)->64 3x3)
  the forward only ties (0.87/0.89), hence the tap limit. Since the kernels' larger pixel blocks
  and sliding variants the limits are wider: forward up to DIRECT_MAX_TAPS_FORWARD taps (K <= 64),
  weight gradient up to DIRECT_MAX_TAPS_WEIGHT taps and DIRECT_MAX_K_WEIGHT filters, and for the
  weight gradient ``direct`` also beats Winograd below WINOGRAD_MIN_CHANNELS. Quiet machine, two
  threads, us direct / im2col (/ winograd): (1,32,16,16)->32 3x3 forward 55/86, weight 52/171;
  (8,32,16,16)->32 forward 311/588, weight 334/815/811; (1,64,8,8)->64 forward 60/94, weight
  90/245; (8,32,56,56)->32 forward 1913/6090, weight 1848/3736/3782; (8,64,14,14)->128 stride 2
  weight 636/1110; (1,128,14,14)->128 weight 521/751 (its forward ties: K > 64 stays on
  im2col). With the AVX2 kernels forced (one thread, under load) direct still led at K <= 64 and
  tied the weight gradient at K = 128. The input gradient's ``direct`` kernel (stride 1, K >= 16)
  runs in the thin-layer territory (DIRECT_MAX_TAPS). For 1x1 kernels ``direct`` also takes the
  weight gradient (ms direct / direct1x1, two threads: (64,16,32,32)->32 stride 2 0.26/0.96,
  (8,64,56,56)->128 stride 2 0.59/1.30, (8,64,56,56)->64 0.92/1.32; AVX2 forced 0.30/0.98,
  0.82/1.34, and (1,64,56,56)->128 0.17/0.15, the one loss) and strided forward passes of up to
  DIRECT_1X1_MAX_C channels ((64,16,32,32)->32 stride 2: 0.21/0.48; at 64 channels and 128
  filters direct1x1 won, 0.93/1.02 and 0.09/0.19 for one image).
  A batch of one image with stride 1 runs ``thin`` there instead (no per-call weight repacking,
  one serial row kernel), us thin / direct under load: LeNet conv2 (1,6,14,14)->16 5x5 27/37,
  (1,3,32,32)->32 5x5 75/80, (1,16,32,32)->32 3x3 72/82, (1,3,64,64)->16 3x3 40/50,
  (1,6,14,14)->64 5x5 pad 2 40/43;
- stride-1 forward passes with at most THIN_MAX_MACS multiply-adds per output pixel
  (K*C*R*S) and K < DIRECT_MIN_K_FORWARD -> ``thin`` (one axpy per tap along the image rows;
  LeNet conv1 (64,1,28,28)->6 5x5, one thread: 0.70 vs 0.95 ms im2col, batch of one 11 vs 59
  us; at (64,3,32,32)->6 5x5, 450 MACs, it only ties: 2.25 vs 2.48 ms);
- otherwise ``im2col`` (chunked over images and threads; it beat the shifted-GEMM path on every
  measured shape but LeNet's first layer weight gradient, by 1.3-10x), unless the column buffer of
  one image (its smallest sub-batch) would exceed IM2COL_MAX_BYTES, in which case stride-1 problems use
  ``implicit_gemm`` (no column buffer at all);
- FFT is never chosen by the heuristic: on this machine it did not beat the GEMM paths for any
  benchmarked shape, by 3-100x (the autotuner or a forced setting can still pick it).
"""
import os
import sys
import threading
import time

from . import (depthwise, direct, direct1x1, fft, im2col, im2col3d, implicit_gemm, parallel,
               space_to_depth, thin, winograd, winograd2x2)
from .grad_as_forward import transposed_geometry

ALGORITHMS = {"im2col": im2col, "implicit_gemm": implicit_gemm, "winograd": winograd,
              "fft": fft, "direct1x1": direct1x1, "depthwise": depthwise, "direct": direct,
              "winograd2x2": winograd2x2, "thin": thin, "space_to_depth": space_to_depth}
FUNCTIONS = {"forward": "forward", "input": "input_grad", "weight": "weight_grad"}

BATCH_THRESHOLD = 2
WINOGRAD_MIN_CHANNELS = 64
WEIGHT_MIN_CHANNELS = 32
WINOGRAD_MIN_TILES = 36
WEIGHT_MIN_TILES = 128
IM2COL_MAX_BYTES = 512 << 20
WIDE_CHANNELS = 256
WIDE_MIN_TILES = 32
DIRECT_MAX_TAPS = 150           # thin layers: input gradient, a batch of one by ``thin``
DIRECT_MAX_K = 64
DIRECT_MAX_TAPS_FORWARD = 576   # the forward pass (K <= DIRECT_MAX_K)
DIRECT_MAX_TAPS_WEIGHT = 1152   # the weight gradient (K <= DIRECT_MAX_K_WEIGHT)
DIRECT_MAX_K_WEIGHT = 128
DIRECT_1X1_MAX_C = 32           # strided 1x1 forward passes run ``direct`` up to this many channels
DIRECT_MIN_K_FORWARD = 16
THIN_OWN_MIN_K = 32
THIN_MAX_MACS = 160
WIDE_DIRECT_MIN_WO = 14          # AVX-512: ``direct`` forward at any width from this output row
WIDE_DIRECT_MIN_WO_STRIDED = 28  # (strided: from this one)
BATCH1_DIRECT_MAX_CHANNELS = 128  # batch-of-one forward on ``direct`` up to this width
BATCH1_DIRECT_MIN_WO = 28         # and from this output row (``_batch_of_one_direct``)
SPACE_TO_DEPTH_MAX_CHANNELS = 16   # stride-2 forward as stride 1 up to 4C phase channels
SPACE_TO_DEPTH_MIN_KERNEL = 5

# Algorithms whose calls are Numba kernels only (no BLAS call) and run one image serially under
# any thread policy: a batch of one runs them without ``parallel.policy``, whose BLAS lock (and,
# in the LIMITED mode, two BLAS thread-count changes through threadpoolctl) costs ~5 us per
# entry, as much as their whole kernel for one image (LeNet's first layer).
_SERIAL_FOR_ONE = ("thin", "direct")

_tuned = {}
_lock = threading.Lock()
_settings_module = None


def _settings():
    global _settings_module
    if _settings_module is None:
        from ember.backends import conv as settings
        _settings_module = settings
    return _settings_module


def capable(direction, g):
    """Names of the algorithms that can run ``direction`` for geometry ``g``."""
    return [name for name, mod in ALGORITHMS.items()
            if hasattr(mod, FUNCTIONS[direction]) and mod.supports(g, direction)]


def heuristic(direction, g, direct_ok=True, winograd_ok=True, thin_ok=True):
    """Algorithm name chosen without timing (see the module docstring); ``direct_ok=False`` /
    ``winograd_ok=False`` / ``thin_ok=False`` leave out ``direct`` / ``winograd`` / ``thin``
    (their kernels are still compiling in the background)."""
    if g.is_depthwise:
        return "depthwise"
    if direct_ok and _space_to_depth(g, direction):
        return "space_to_depth"
    if direct_ok and _wide_direct(g, direction) and direct.supports(g, direction):
        return "direct"
    if g.R == 1 and g.S == 1:
        # 1x1: ``direct`` for weight gradients in its territory and for strided forward passes
        # of few channels (docstring), ``direct1x1`` otherwise
        if direct_ok and direct.supports(g, direction) and (
                (direction == "weight" and _direct_weight(g))
                or (direction == "forward" and g.stride != (1, 1) and g.C <= DIRECT_1X1_MAX_C
                    and g.K <= DIRECT_MAX_K)):
            return "direct"
        return "direct1x1"
    if winograd_ok and winograd.supports(g, direction):
        fg = transposed_geometry(g) if direction == "input" else g
        weight = direction == "weight"
        channels = WEIGHT_MIN_CHANNELS if weight else WINOGRAD_MIN_CHANNELS
        if weight and direct_ok and _direct_weight(g):
            channels = WINOGRAD_MIN_CHANNELS   # below it ``direct`` wins (docstring)
        tiles = WEIGHT_MIN_TILES if weight else WINOGRAD_MIN_TILES
        if min(fg.Cg, fg.Kg) >= channels and _tiles(fg) >= tiles:
            return "winograd"
        if weight and min(g.Cg, g.Kg) >= WIDE_CHANNELS:
            return "winograd" if _tiles(g) >= WIDE_MIN_TILES else "winograd2x2"
    if (thin_ok and g.K * g.C * g.R * g.S <= THIN_MAX_MACS and g.K < DIRECT_MIN_K_FORWARD
            and thin.supports(g, direction)):
        return "thin"
    if (thin_ok and g.N == 1 and direction == "forward" and _direct_territory(g)
            and thin.supports(g, direction)):
        return "thin"
    if direct_ok and direct.supports(g, direction) and (
            (direction == "weight" and _direct_weight(g))
            or (direction == "forward" and g.K >= DIRECT_MIN_K_FORWARD and g.groups == 1
                and g.C * g.R * g.S <= DIRECT_MAX_TAPS_FORWARD and g.K <= DIRECT_MAX_K)
            or (direction == "input" and g.K >= DIRECT_MIN_K_FORWARD and _direct_territory(g))):
        return "direct"
    cols = g.C * g.R * g.S * g.Ho * g.Wo * 8
    if cols > IM2COL_MAX_BYTES and g.stride == (1, 1):
        return "implicit_gemm"
    return "im2col"


def _wide_direct(g, direction):
    """Layers the AVX-512 ``direct`` kernels take in every direction they support, however
    wide (``_isa`` is "avx512"): groups 1, K >= DIRECT_MIN_K_FORWARD, output rows of at least
    WIDE_DIRECT_MIN_WO pixels (kernels larger than 1x1 at stride 1; 1x1 and the weight gradient
    of strided kernels in a batch), else WIDE_DIRECT_MIN_WO_STRIDED; never strided 1x1; a thin
    batch of one stays ``thin``'s; stride-1 layers where the host probe says ``direct`` wins
    (``_stride_one_wide``). See the module docstring."""
    one_by_one = g.R == 1 and g.S == 1
    if (g.groups != 1 or g.K < DIRECT_MIN_K_FORWARD or (one_by_one and g.stride != (1, 1))
            or (g.N == 1 and not one_by_one and _direct_territory(g))):
        return False
    batch = g.N >= BATCH_THRESHOLD
    if g.stride != (1, 1):
        wide = batch and direction == "weight"
    else:
        wide = batch or not one_by_one
    if g.Wo < (WIDE_DIRECT_MIN_WO if wide else WIDE_DIRECT_MIN_WO_STRIDED) or _isa() != "avx512":
        return False
    # the host probe last: an AVX2 host or a narrow layer never starts it
    if g.stride != (1, 1):
        return direction != "forward" or _strided_forward_wide(g)
    return _batch_of_one_direct(g, direction) or _stride_one_wide(g)


def _batch_of_one_direct(g, direction):
    """A batch-of-one forward pass of a kernel larger than 1x1 at stride 1, at most
    BATCH1_DIRECT_MAX_CHANNELS wide, output rows of at least BATCH1_DIRECT_MIN_WO pixels, on two
    or more threads: ``direct`` splits its rows over the TBB threads, where Winograd's transforms
    and 36 GEMMs fan out to ember's pool three times (each hand-over ~50-100 us; the batch
    norm after it ran 213 us, after ``direct`` 108). Intel Xeon, ms, Winograd / direct, two
    threads: 1x64x56x56 -> 64 1.04 / 0.87-0.92, 1x128x28x28 -> 128 1.34 / 0.98-1.01; on one
    thread Winograd wins (1.52 / 1.63, 1.22 / 1.70), and from 256 channels at 14x14 im2col does
    (1.34 / 1.55 / Winograd 2.28). The host probe, one thread at batches of 2-4, keeps its
    say for batches."""
    return (g.N < BATCH_THRESHOLD and direction == "forward" and not (g.R == 1 and g.S == 1)
            and g.Wo >= BATCH1_DIRECT_MIN_WO and max(g.Cg, g.Kg) <= BATCH1_DIRECT_MAX_CHANNELS
            and parallel.threads() >= 2)


def _strided_forward_wide(g):
    """Whether a strided forward pass (kernel larger than 1x1) may run the wide ``direct``:
    up to the channel count the host probe's widest 3x3 win covers (``_stride_one_wide``);
    False while the probe cannot run yet."""
    found = _probe()
    return found is not None and max(g.Cg, g.Kg) <= found["3x3_channels"]


def _space_to_depth(g, direction):
    """Forward passes of stride-2 thin-input layers with large kernels (ResNet's 7x7/2 stem)
    whose stride-1 rewrite runs ``direct`` (module docstring)."""
    if (direction != "forward" or not space_to_depth.supports(g, direction)
            or 4 * g.C > SPACE_TO_DEPTH_MAX_CHANNELS or min(g.R, g.S) < SPACE_TO_DEPTH_MIN_KERNEL):
        return False
    return heuristic(direction, space_to_depth.inner_geometry(g)) == "direct"


def _stride_one_wide(g):
    """Whether this host's measurements (``hostprobe``) give a stride-1 layer to ``direct``:
    1x1 layers when ``direct`` won the 1x1 probe, larger kernels up to the widest 3x3 probe
    it won (max(C/g, K/g)); False while the probe cannot run yet."""
    found = _probe()
    if found is None:
        return False
    if g.R == 1 and g.S == 1:
        return found["1x1"]
    return max(g.Cg, g.Kg) <= found["3x3_channels"]


def _probe():
    """``hostprobe.result()`` (tests replace this function to fix the outcome)."""
    from . import hostprobe
    return hostprobe.result()


_host_avx512 = None


def _isa():
    """``cpu.isa()`` (the variant the direct kernels are built for), without importing llvmlite
    on the caller's thread before Numba has (a cold process's first convolution): a forced
    ``EMBER_CPU_ISA`` is taken as it is, else Linux's CPU flags say whether the host has
    AVX-512F (the flag ``cpu.host_isa`` reads from LLVM)."""
    global _host_avx512
    forced = os.environ.get("EMBER_CPU_ISA")
    if forced or "llvmlite.binding" in sys.modules:
        from ember.kernels.runtime import cpu
        return cpu.isa()
    if _host_avx512 is None:
        try:
            with open("/proc/cpuinfo") as f:
                flags = next((line for line in f if line.startswith("flags")), "")
            _host_avx512 = "avx512f" in flags.split()
        except OSError:
            from ember.kernels.runtime import cpu
            _host_avx512 = cpu.host_isa() == "avx512"
    return "avx512" if _host_avx512 else "avx2"


def _direct_territory(g):
    return g.groups == 1 and g.C * g.R * g.S <= DIRECT_MAX_TAPS and g.K <= DIRECT_MAX_K


def _direct_weight(g):
    return (g.groups == 1 and g.C * g.R * g.S <= DIRECT_MAX_TAPS_WEIGHT
            and g.K <= DIRECT_MAX_K_WEIGHT)


def _tiles(g):
    per_image = -(-g.Ho // 4) * -(-g.Wo // 4)
    return per_image * (g.N if g.N >= BATCH_THRESHOLD else 1)


def run(op, direction, g, a, b, bias=None, residual=None, relu=False):
    """Run ``direction`` ("forward", "input" or "weight") on arrays (a, b) for geometry ``g``;
    a forward pass adds ``bias`` (K,) when given, inside the kernel for the algorithms in
    ``FUSED_BIAS``, else afterwards; then ``residual`` (the output's shape) and ReLU when
    ``relu``, inside the kernel for those in ``FUSED_EPILOGUE`` (eager's order either way).

    Each algorithm runs under ``parallel.policy``: for the directions in
    ``parallel.OWN_THREADS_DIRECTIONS`` (the weight gradient: small outputs, long reductions, where
    OpenBLAS's lock-step threads stall under load) and the algorithms in
    ``parallel.OWN_THREADS_ALGORITHMS`` (Winograd, whose Numba transforms split over ember's threads
    only under this policy) and for a forward pass of one image (``_own_threads``) BLAS is held at
    one thread and the algorithms split their work into independent chunks; the others use BLAS's
    own threads.

    Raises ValueError when a forced algorithm is unknown or cannot handle ``g``.
    """
    settings = _settings()
    fn = FUNCTIONS[direction]
    forced = settings.algorithm
    if forced is not None:
        mod = ALGORITHMS.get(forced)
        if mod is None:
            raise ValueError(f"{op}: unknown algorithm {forced!r}; expected one of "
                             f"{sorted(ALGORITHMS)} or None")
        if not hasattr(mod, fn) or not mod.supports(g, direction):
            raise ValueError(
                f"{op}: algorithm {forced!r} cannot compute the {direction} direction for input "
                f"{g.input_shape}, weight {g.weight_shape}, stride {g.stride}, dilation "
                f"{g.dilation}, groups {g.groups}; capable: {capable(direction, g)}")
        return _call(forced, direction, g, a, b, bias, residual, relu)
    if not settings.benchmark:
        from ember.kernels.runtime import compiler
        name = compiler.tier(("conv2d", direction, g.key(), a.dtype.str),
                                  lambda: _heuristic_now(direction, g, a.dtype))
        return _call(name, direction, g, a, b, bias, residual, relu)
    key = (direction, g.key(), a.dtype.str)
    name = _tuned.get(key)
    if name is not None:
        return _call(name, direction, g, a, b, bias, residual, relu)
    best = None
    for name in capable(direction, g):
        # warm-up: JIT compilation, workspace growth
        out = _call(name, direction, g, a, b, bias, residual, relu)
        start = time.perf_counter()
        out = _call(name, direction, g, a, b, bias, residual, relu)
        elapsed = time.perf_counter() - start
        if best is None or elapsed < best[0]:
            best = (elapsed, name, out)
    with _lock:
        _tuned[key] = best[1]
    return best[2]


def _heuristic_now(direction, g, dtype):
    """The heuristic's algorithm, or while its compiled kernels are not ready (compiling in the
    background) the one it picks without them. Algorithms differ in the last bits, so ``run``
    keeps this first choice per call key for the process (``compiler.tier``)."""
    name, without = heuristic(direction, g), {}
    while (name in ("direct", "winograd", "thin", "space_to_depth")
           and not _ready(name, direction, g, dtype)):
        without["direct_ok" if name == "space_to_depth" else name + "_ok"] = False
        name = heuristic(direction, g, **without)
    return name


def _thin_wide(g):
    """Thin layers (``direct`` territory) with K >= THIN_OWN_MIN_K: every direction runs on ember's
    threads, so the layer's im2col input gradient neither runs OpenBLAS's lock-step threads nor
    leaves them spinning next to the direct kernels' chunks. Alternating with torch, ms BLAS
    threads -> own: (32,3,32,32)->32 5x5 input 7.4 -> 2.2, weight 1.5-2.1 -> 1.1; with K = 16 or 6
    (LeNet's layers) BLAS's threads stayed faster (input 1.35 vs 1.5-2.0, 1.1 vs 1.6-2.1 ms)."""
    return (g.groups == 1 and g.C * g.R * g.S <= DIRECT_MAX_TAPS
            and THIN_OWN_MIN_K <= g.K <= DIRECT_MAX_K)


def _own_threads(name, direction, g):
    return (direction in parallel.OWN_THREADS_DIRECTIONS
            or name in parallel.OWN_THREADS_ALGORITHMS or _thin_wide(g)
            or (direction == "forward" and g.N < BATCH_THRESHOLD))


# A forward pass of a batch below BATCH_THRESHOLD images (batch-of-one inference) runs every
# algorithm on ember's own chunks (``_own_threads``): its GEMMs are short (ResNet-18's at 224x224
# take 0.5-3 ms each), so OpenBLAS's lock-step hand-offs between its threads cost more than they
# share whenever another process holds a core. ResNet-18, batch 1, eval, two threads, 2-core VM
# shared with other jobs (load 4-8), interleaved runs, min ms, OpenBLAS threads -> own chunks:
# 328-785 -> 97-398 (torch 63-1472; docs/conv.md).


def _ready(name, direction, g, dtype):
    """Whether ``direct`` / ``winograd`` / ``thin`` has its kernels for this call (under the thread
    policy ``_call`` runs it with, which decides between the serial and the ``prange`` kernels);
    ``space_to_depth``: whether ``direct`` is, for its stride-1 problem."""
    if name == "space_to_depth":
        return _ready("direct", direction, space_to_depth.inner_geometry(g), dtype)
    if g.N == 1 and name in _SERIAL_FOR_ONE:
        return _ready_now(name, direction, g, dtype)
    with parallel.policy(_own_threads(name, direction, g)):
        return _ready_now(name, direction, g, dtype)


def _ready_now(name, direction, g, dtype):
    if name == "thin":
        return thin.ready(dtype, g.N, direction)
    if name == "direct":
        return direct.ready(direction, g, dtype)
    return winograd.ready(direction, dtype)


FUSED_BIAS = ("thin", "direct", "space_to_depth")   # forward(x, w, g, bias) takes the bias
FUSED_EPILOGUE = ("direct", "space_to_depth")   # and forward(x, w, g, bias, res, relu)
# Rewrites that run another geometry through ``inner`` (which sets its own thread policy)
_DELEGATING = ("space_to_depth",)


def inner(direction, g, a, b, bias=None, residual=None, relu=False):
    """Run ``direction`` for ``g`` on the heuristic's algorithm (kept per key as in ``run``),
    whatever ``ember.backends.conv`` forces: the stride-1 problem of a rewrite
    (``space_to_depth``)."""
    from ember.kernels.runtime import compiler
    name = compiler.tier(("conv2d", direction, g.key(), a.dtype.str),
                         lambda: _heuristic_now(direction, g, a.dtype))
    return _call(name, direction, g, a, b, bias, residual, relu)


def _call(name, direction, g, a, b, bias=None, residual=None, relu=False):
    fn = getattr(ALGORITHMS[name], FUNCTIONS[direction])
    args = (a, b, g)
    fused = bias is not None and name in FUSED_BIAS
    epilogue = residual is not None or relu
    fused_epilogue = epilogue and name in FUSED_EPILOGUE
    if fused or fused_epilogue:
        args += (bias,)
    if fused_epilogue:
        args += (residual, relu)
    if (g.N == 1 and name in _SERIAL_FOR_ONE) or name in _DELEGATING:
        y = fn(*args)
    else:
        with parallel.policy(_own_threads(name, direction, g)):
            y = fn(*args)
    if bias is not None and not fused:
        y += bias[:, None, None]
    if epilogue and not fused_epilogue:
        if residual is not None:
            y += residual
        if relu:
            y[y < 0] = 0   # NaN stays (as ``v < 0 -> 0``)
    return y


def run_3d(direction, *args):
    """Run ``direction`` of a 3-d convolution (arguments as ``im2col3d``'s function of that
    direction). It has one algorithm, ``im2col3d``; ``ember.backends.conv``'s settings apply to
    1-d and 2-d problems only."""
    return getattr(im2col3d, FUNCTIONS[direction])(*args)


def tuned():
    """Copy of the autotuner's choices: {(direction, geometry key, dtype): name}."""
    with _lock:
        return dict(_tuned)


def clear_tuned():
    """Forget the autotuner's choices."""
    with _lock:
        _tuned.clear()
