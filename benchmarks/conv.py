"""Convolution speed: ember's conv kernels vs PyTorch's CPU convolution in the same run.

Usage: python benchmarks/conv.py [--threads 2] [--repeat 9] [--no-algorithms] [--no-threads]
                                 [--shapes 0,2] [--own weight|forward,input,weight|none]
                                 [--own-algorithms winograd|none] [--settle 0.03]

The machine is shared, so ember and torch calls alternate (e f, t f, e dX, t dX, e dW, t dW, ...)
and every figure is the median over ``--repeat`` rounds: load slows both sides instead of skewing
the ratio. Before each block the main thread busy-waits ``--settle`` seconds, so the worker
threads the previous block left spinning (torch's OpenMP pool, OpenBLAS's pool) are quiet again;
OpenBLAS's spin for up to ~100 ms after a threaded GEMM, and on 2 cores a spinning worker halves
the speed of whatever runs next on ember's own threads (measured: the first layer's forward 0.9
ms alone, 1.7 ms right after a threaded GEMM, 1.15 ms 0.1 s after it). Prints the load average and whether OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are set (it
never changes them); then per shape (N, C, H, W, K, kernel, pad), float32: the algorithm the
selector picks per direction (forward/input/weight), ms for forward, input gradient and weight
gradient with torch's ms and the ratios, GFLOP/s and % of NumPy's own sgemm throughput measured
here for the forward pass, and forward + backward (torch: forward plus one convolution_backward
computing both gradients). Geometric means; the 1 -> 2 thread speed-up; the workspace reuse
(tracemalloc: bytes newly allocated by a repeated call, which should be about the result only);
and (unless --no-algorithms) every capable algorithm forced in turn for each direction, so the
numbers show where Winograd, FFT and the GEMM paths win. Not a test: nothing is asserted.
"""
import argparse
import math
import os
import statistics
import time
import tracemalloc

import numpy as np
from timing import settle

from ember.backends import conv as settings
from ember.kernels import conv as C
from ember.kernels.conv import parallel, selector
from ember.kernels.threads import set_num_threads

SHAPES = [(8, 64, 56, 56, 64, 3, 1), (1, 64, 56, 56, 64, 3, 1), (32, 3, 32, 32, 32, 5, 0),
          (8, 256, 14, 14, 256, 3, 1), (8, 64, 56, 56, 256, 1, 0)]
DIRECTIONS = ("forward", "input", "weight")


BLOCK = 3
SETTLE_S = 0.03  # seconds of busy-waiting before each block (--settle; see timing.settle)


def median_ms(fns, repeat):
    """Median over ``repeat`` rounds of each callable's best time in a block of BLOCK calls.

    Rounds alternate between the callables so both libraries see the same machine load; the
    block keeps the previous library's still-spinning worker threads (OpenMP, OpenBLAS) from
    being charged to the first call after a switch.
    """
    for fn in fns:
        fn()
    times = [[] for _ in fns]
    for _ in range(repeat):
        for t, fn in zip(times, fns):
            settle(SETTLE_S)
            best = float("inf")
            for _ in range(BLOCK):
                start = time.perf_counter()
                fn()
                best = min(best, time.perf_counter() - start)
            t.append(best)
    return [statistics.median(t) * 1e3 for t in times]


def gemm_gflops(repeat):
    a = np.random.rand(256, 1152).astype(np.float32)
    b = np.random.rand(1152, 8192).astype(np.float32)
    return 2 * 256 * 1152 * 8192 / median_ms([lambda: a @ b], repeat)[0] / 1e6


def problem(shape):
    N, Cin, H, W, K, R, pad = shape
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, Cin, H, W), dtype=np.float32)
    w = rng.standard_normal((K, Cin, R, R), dtype=np.float32)
    gy = rng.standard_normal(C.conv_output_shape(x.shape, w.shape, 1, pad), dtype=np.float32)
    return x, w, gy


def flops(shape):
    N, Cin, H, W, K, R, pad = shape
    Ho, Wo = H + 2 * pad - R + 1, W + 2 * pad - R + 1
    return 2 * N * K * Cin * R * R * Ho * Wo


def ember_calls(shape):
    """(forward, input gradient, weight gradient) callables."""
    x, w, gy = problem(shape)
    pad = shape[-1]
    return (lambda: C.conv2d_forward(x, w, None, 1, pad, 1, 1),
            lambda: C.conv2d_input_grad(gy, w, x.shape, 1, pad, 1, 1),
            lambda: C.conv2d_weight_grad(gy, x, w.shape, 1, pad, 1, 1))


def torch_calls(shape, torch):
    """(forward, input gradient, weight gradient, both gradients) callables."""
    x, w, gy = (torch.from_numpy(a) for a in problem(shape))
    pad = shape[-1]

    def bwd(mask):
        return lambda: torch.ops.aten.convolution_backward(
            gy, x, w, None, [1, 1], [pad, pad], [1, 1], False, [0, 0], 1, mask)
    return (lambda: torch.nn.functional.conv2d(x, w, None, 1, pad),
            bwd([True, False, False]), bwd([False, True, False]), bwd([True, True, False]))


def geometry_of(shape):
    x, w, _ = problem(shape)
    return C.geometry("conv2d", x.shape, w.shape, 1, shape[-1], 1, 1)


def choices(shape):
    g = geometry_of(shape)
    return "/".join(selector.heuristic(d, g) for d in DIRECTIONS)


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


def workspace_reuse(shape):
    """Bytes newly allocated by the 2nd and 3rd call of each direction (tracemalloc peak)."""
    out = []
    for fn in ember_calls(shape):
        fn()
        tracemalloc.start()
        fn()
        fn()
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        out.append(peak)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--no-algorithms", action="store_true")
    parser.add_argument("--no-threads", action="store_true")
    parser.add_argument("--settle", type=float, default=SETTLE_S,
                        help="seconds of busy-waiting before each timed block, so the other "
                             "library's spinning threads (OpenMP, OpenBLAS) go quiet first")
    parser.add_argument("--shapes", default=None, help="comma-separated indices into SHAPES")
    parser.add_argument("--own", default=None,
                        help="directions run on ember's own chunks with BLAS at one thread, e.g. "
                             "'weight' (default) or 'forward,input,weight' or 'none'")
    parser.add_argument("--own-algorithms", default=None,
                        help="algorithms run on ember's own chunks in every direction, e.g. "
                             "'winograd' (default) or 'none'")
    args = parser.parse_args()
    globals()["SETTLE_S"] = args.settle
    if args.own is not None:
        parallel.OWN_THREADS_DIRECTIONS = () if args.own == "none" else tuple(args.own.split(","))
    if args.own_algorithms is not None:
        parallel.OWN_THREADS_ALGORITHMS = (() if args.own_algorithms == "none"
                                           else tuple(args.own_algorithms.split(",")))
    print(f"own-thread directions: {parallel.OWN_THREADS_DIRECTIONS}, algorithms: "
          f"{parallel.OWN_THREADS_ALGORITHMS} (others: BLAS threads)")
    shapes = SHAPES if args.shapes is None else [SHAPES[int(i)] for i in args.shapes.split(",")]
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS"):
        print(f"{var}={os.environ.get(var, '<not set>')}")
    print("load average at start: " + " ".join(f"{v:.2f}" for v in os.getloadavg()))
    try:
        import torch
    except ImportError:
        torch = None
        print("torch not installed: ratios omitted")
    set_num_threads(args.threads)
    if torch is not None:
        torch.set_num_threads(args.threads)
    peak = gemm_gflops(args.repeat)
    print(f"threads={args.threads}  NumPy sgemm {peak:.0f} GFLOP/s (256x1152 @ 1152x8192); "
          f"median of {args.repeat} alternating rounds (best of {BLOCK} per block)\n")
    head = (f"{'shape (N,C,H,W,K,k,pad)':27} {'algorithm f/i/w':31} {'fwd':>6} {'GF/s':>4} "
            f"{'%gemm':>5} {'torch':>6} {'ratio':>5} | {'dX':>6} {'torch':>6} {'ratio':>5} | "
            f"{'dW':>6} {'torch':>6} {'ratio':>5} | {'f+b':>6} {'torch':>6} {'ratio':>5}")
    print(head)
    ratios_f, ratios_fb, worst = [], [], []
    for shape in shapes:
        e = ember_calls(shape)
        if torch is None:
            ef, ei, ew = median_ms(e, args.repeat)
            print(f"{str(shape):27} {choices(shape):31} {ef:6.2f} {ei:6.2f} {ew:6.2f}")
            continue
        t = torch_calls(shape, torch)
        ef, tf, ei, ti, ew, tw, tb = median_ms([e[0], t[0], e[1], t[1], e[2], t[2], t[3]],
                                               args.repeat)
        gf = flops(shape) / ef / 1e6
        efb, tfb = ef + ei + ew, tf + tb
        ratios_f.append(ef / tf)
        ratios_fb.append(efb / tfb)
        worst += [ef / tf, efb / tfb]
        print(f"{str(shape):27} {choices(shape):31} {ef:6.2f} {gf:4.0f} {100 * gf / peak:5.0f} "
              f"{tf:6.2f} {ef / tf:5.2f} | {ei:6.2f} {ti:6.2f} {ei / ti:5.2f} | {ew:6.2f} "
              f"{tw:6.2f} {ew / tw:5.2f} | {efb:6.2f} {tfb:6.2f} {efb / tfb:5.2f}")
    if ratios_f:
        print(f"\ngeomean ember/torch: forward {geomean(ratios_f):.2f} (target <= 1.0), "
              f"forward+backward {geomean(ratios_fb):.2f} (target <= 1.2); worst "
              f"{max(worst):.2f} (target <= 1.5)")
    print("load average now: " + " ".join(f"{v:.2f}" for v in os.getloadavg()))
    if not args.no_threads:
        one, two = [], []
        for shape in shapes:
            fwd = ember_calls(shape)[0]

            def single():
                set_num_threads(1)
                try:
                    fwd()
                finally:
                    set_num_threads(args.threads)
            a, b = median_ms([single, fwd], max(3, args.repeat // 2))
            one.append(a)
            two.append(b)
        print(f"speed-up 1 -> {args.threads} threads (forward, interleaved medians, geomean): "
              f"{geomean([a / b for a, b in zip(one, two)]):.2f}x  "
              + " ".join(f"{a / b:.2f}" for a, b in zip(one, two)))
    print("\nworkspace reuse: bytes newly allocated (tracemalloc peak) by two repeated calls "
          "vs the result size")
    for shape in shapes:
        x, w, gy = problem(shape)
        f, i, wg = workspace_reuse(shape)
        print(f"{str(shape):27} forward {f / 2**20:7.2f} MiB (y {gy.nbytes / 2**20:.2f}) | input "
              f"{i / 2**20:7.2f} MiB (dX {x.nbytes / 2**20:.2f}) | weight {wg / 2**20:7.2f} MiB "
              f"(dW {w.nbytes / 2**20:.2f})")
    if args.no_algorithms:
        return
    print("\nms with each capable algorithm forced (- = cannot handle), per direction:")
    print(f"{'shape':27} {'dir':7} " + " ".join(f"{name:>13}" for name in settings.ALGORITHMS))
    for shape in shapes:
        g = geometry_of(shape)
        calls = ember_calls(shape)
        for d, fn in zip(DIRECTIONS, calls):
            cells = []
            for name in settings.ALGORITHMS:
                if name not in selector.capable(d, g):
                    cells.append(f"{'-':>13}")
                    continue
                settings.algorithm = name
                try:
                    cells.append(f"{median_ms([fn], 3)[0]:13.2f}")
                finally:
                    settings.algorithm = None
            print(f"{str(shape):27} {d:7} " + " ".join(cells))


if __name__ == "__main__":
    main()
