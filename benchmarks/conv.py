"""Convolution speed: ember's conv kernels vs PyTorch's CPU convolution in the same run.

Usage: python benchmarks/conv.py [--threads 2] [--repeat 5] [--no-algorithms]

Prints, per shape (N, C, H, W, K, kernel, pad), float32: the algorithm the selector picks, ms,
GFLOP/s (2*N*K*C*R*S*Ho*Wo per convolution), % of NumPy's own sgemm throughput measured here, and
ember/torch ratios for forward alone and forward + input and weight gradients; geometric means;
the 1 -> 2 thread speed-up; and (unless --no-algorithms) every capable algorithm forced in turn,
so the numbers show where Winograd, FFT and the GEMM paths win. Not a test: nothing is asserted.
"""
import argparse
import math
import os
import time

import numpy as np

from ember.backends import conv as settings
from ember.kernels import conv as C
from ember.kernels.conv import selector
from ember.kernels.threads import set_num_threads

SHAPES = [(8, 64, 56, 56, 64, 3, 1), (1, 64, 56, 56, 64, 3, 1), (32, 3, 32, 32, 32, 5, 0),
          (8, 256, 14, 14, 256, 3, 1), (8, 64, 56, 56, 256, 1, 0)]


def best_ms(fn, repeat):
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3


def gemm_gflops(repeat):
    a = np.random.rand(256, 1152).astype(np.float32)
    b = np.random.rand(1152, 8192).astype(np.float32)
    return 2 * 256 * 1152 * 8192 / best_ms(lambda: a @ b, repeat) / 1e6


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
    x, w, gy = problem(shape)
    pad = shape[-1]

    def fwd():
        return C.conv2d_forward(x, w, None, 1, pad, 1, 1)

    def fwd_bwd():
        fwd()
        C.conv2d_input_grad(gy, w, x.shape, 1, pad, 1, 1)
        C.conv2d_weight_grad(gy, x, w.shape, 1, pad, 1, 1)
    return fwd, fwd_bwd


def torch_calls(shape, torch):
    x, w, gy = (torch.from_numpy(a) for a in problem(shape))
    pad = shape[-1]

    def fwd():
        return torch.nn.functional.conv2d(x, w, None, 1, pad)

    def fwd_bwd():
        fwd()
        torch.ops.aten.convolution_backward(gy, x, w, None, [1, 1], [pad, pad], [1, 1], False,
                                            [0, 0], 1, [True, True, False])
    return fwd, fwd_bwd


def choices(shape):
    x, w, gy = problem(shape)
    g = C.geometry("conv2d", x.shape, w.shape, 1, shape[-1], 1, 1)
    return "/".join(selector.heuristic(d, g) for d in ("forward", "input", "weight"))


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-algorithms", action="store_true")
    args = parser.parse_args()
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS"):
        print(f"{var}={os.environ.get(var, '<not set>')}")
    try:
        import torch
    except ImportError:
        torch = None
        print("torch not installed: ratios omitted")
    set_num_threads(args.threads)
    if torch is not None:
        torch.set_num_threads(args.threads)
    peak = gemm_gflops(args.repeat)
    print(f"threads={args.threads}  NumPy sgemm {peak:.0f} GFLOP/s (256x1152 @ 1152x8192)\n")
    head = (f"{'shape (N,C,H,W,K,k,pad)':28} {'algorithm f/i/w':31} {'fwd ms':>7} {'GF/s':>5} "
            f"{'%gemm':>5} {'torch':>6} {'ratio':>5} | {'f+b ms':>7} {'GF/s':>5} {'torch':>6} "
            f"{'ratio':>5}")
    print(head)
    ratios_f, ratios_fb = [], []
    for shape in SHAPES:
        fwd, fwd_bwd = ember_calls(shape)
        tf, tfb = best_ms(fwd, args.repeat), best_ms(fwd_bwd, args.repeat)
        gf, gfb = flops(shape) / tf / 1e6, 3 * flops(shape) / tfb / 1e6
        line = (f"{str(shape):28} {choices(shape):31} {tf:7.2f} {gf:5.0f} {100 * gf / peak:5.0f}")
        if torch is not None:
            t_fwd, t_fwd_bwd = torch_calls(shape, torch)
            uf, ufb = best_ms(t_fwd, args.repeat), best_ms(t_fwd_bwd, args.repeat)
            ratios_f.append(tf / uf)
            ratios_fb.append(tfb / ufb)
            line += f" {uf:6.2f} {tf / uf:5.2f} | {tfb:7.2f} {gfb:5.0f} {ufb:6.2f} {tfb / ufb:5.2f}"
        else:
            line += f" {'':6} {'':5} | {tfb:7.2f} {gfb:5.0f}"
        print(line)
    if ratios_f:
        print(f"\ngeomean ember/torch: forward {geomean(ratios_f):.2f} (target <= 1.0), "
              f"forward+backward {geomean(ratios_fb):.2f} (target <= 1.2); worst "
              f"{max(ratios_f + ratios_fb):.2f}")
    one, two = [], []
    for shape in SHAPES:
        fwd, _ = ember_calls(shape)
        set_num_threads(1)
        one.append(best_ms(fwd, 3))
        set_num_threads(args.threads)
        two.append(best_ms(fwd, 3))
    print(f"speed-up 1 -> {args.threads} threads (forward, geomean): "
          f"{geomean([a / b for a, b in zip(one, two)]):.2f}x  "
          + " ".join(f"{a / b:.2f}" for a, b in zip(one, two)))
    if args.no_algorithms:
        return
    print("\nforward ms with each capable algorithm forced (- = cannot handle):")
    print(f"{'shape':28} " + " ".join(f"{name:>13}" for name in settings.ALGORITHMS))
    for shape in SHAPES:
        x, w, _ = problem(shape)
        g = C.geometry("conv2d", x.shape, w.shape, 1, shape[-1], 1, 1)
        cells = []
        for name in settings.ALGORITHMS:
            if name not in selector.capable("forward", g):
                cells.append(f"{'-':>13}")
                continue
            settings.algorithm = name
            try:
                cells.append(f"{best_ms(ember_calls(shape)[0], 2):13.2f}")
            finally:
                settings.algorithm = None
        print(f"{str(shape):28} " + " ".join(cells))


if __name__ == "__main__":
    main()
