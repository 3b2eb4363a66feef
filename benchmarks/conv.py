"""Convolution speed: ember vs PyTorch, each library in its own process, float32, with bias.

Usage: python benchmarks/conv.py [--quick] [--repeats 3] [--only lenet1,c3_5x5,...]
       python benchmarks/conv.py --worker ember|torch --case lenet1   (one process's side)
       python benchmarks/conv.py --details [--shapes lenet1,r64]      (ember only, see below)
       python benchmarks/conv.py --layers resnet50 [--batch 8] [--layer-rounds 3] [--all]

Per shape (N, C, H, W, K, kernel, pad; stride 1): ``forward`` is ``conv2d(x, w, b)`` on tensors
that need no gradient (inference), ``forward+backward`` is the training pass a user's loop runs:
``conv2d`` on a weight and bias that require grad, then ``y.backward(gy)``; the input requires
grad too except for thin first layers (C <= 3), whose input gradient a network never needs.
Each library runs with its default threads (``_harness``). The ember worker also reports the
algorithm its selector picks per direction (forward / input / weight gradient).

``--details`` (ember alone, one process): every capable algorithm forced in turn per direction,
the 1 -> 2 thread speed-up of the forward pass and the workspace reuse (bytes newly allocated by
a repeated call); a kernel developer's view, not a comparison.

``--layers resnet18|resnet50``: every convolution layer of torchvision's network at 224x224
(``RESNET_LAYERS``), each direction a training step runs (forward, input gradient but for the
stem, weight gradient; ``--directions forward`` for inference) at ``--batch`` images: the selector's algorithm and, with ``--all``, every
other capable one forced, against torch's ``conv2d`` / ``convolution_backward``, both on one
thread in this one process, process CPU ms, min of ``--layer-rounds`` interleaved rounds after
a warm-up; then the totals weighted by the layers' counts. A kernel developer's view: the
libraries share a process (so their caches and allocators meet), unlike the comparison above.
"""
import argparse
import math
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _harness as H  # noqa: E402

SCRIPT = "conv.py"
SHAPES = {
    "lenet1": (64, 1, 28, 28, 6, 5, 2),      # LeNet-5's first layer: C=1, 5x5
    "c3_5x5": (32, 3, 32, 32, 32, 5, 0),     # a thin first layer: C=3, 5x5
    "lenet2": (64, 6, 14, 14, 16, 5, 0),     # LeNet-5's second layer
    "r64": (8, 64, 56, 56, 64, 3, 1),
    "r64_b1": (1, 64, 56, 56, 64, 3, 1),
    "r256": (8, 256, 14, 14, 256, 3, 1),
    "pw256": (8, 64, 56, 56, 256, 1, 0),
}
QUICK_CASES = ("c3_5x5",)
# (C, H, K, kernel, stride, count): torchvision's convolutions at 224x224 (padding kernel // 2)
RESNET_LAYERS = {
    "resnet18": [(3, 224, 64, 7, 2, 1), (64, 56, 64, 3, 1, 4), (64, 56, 128, 3, 2, 1),
                 (64, 56, 128, 1, 2, 1), (128, 28, 128, 3, 1, 3), (128, 28, 256, 3, 2, 1),
                 (128, 28, 256, 1, 2, 1), (256, 14, 256, 3, 1, 3), (256, 14, 512, 3, 2, 1),
                 (256, 14, 512, 1, 2, 1), (512, 7, 512, 3, 1, 3)],
    "resnet50": [(3, 224, 64, 7, 2, 1), (64, 56, 64, 1, 1, 1), (64, 56, 64, 3, 1, 3),
                 (64, 56, 256, 1, 1, 4), (256, 56, 64, 1, 1, 2), (256, 56, 128, 1, 1, 1),
                 (128, 56, 128, 3, 2, 1), (128, 28, 512, 1, 1, 4), (256, 56, 512, 1, 2, 1),
                 (512, 28, 128, 1, 1, 3), (128, 28, 128, 3, 1, 3), (512, 28, 256, 1, 1, 1),
                 (256, 28, 256, 3, 2, 1), (256, 14, 1024, 1, 1, 6), (512, 28, 1024, 1, 2, 1),
                 (1024, 14, 256, 1, 1, 5), (256, 14, 256, 3, 1, 5), (1024, 14, 512, 1, 1, 1),
                 (512, 14, 512, 3, 2, 1), (512, 7, 2048, 1, 1, 3), (1024, 14, 2048, 1, 2, 1),
                 (2048, 7, 512, 1, 1, 2), (512, 7, 512, 3, 1, 2)],
}
DIRECTIONS = ("forward", "input", "weight")


def problem(shape):
    import numpy as np
    N, Cin, H_, W, K, R, pad = shape
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, Cin, H_, W), dtype=np.float32)
    w = (rng.standard_normal((K, Cin, R, R), dtype=np.float32) / math.sqrt(Cin * R * R))
    b = rng.standard_normal(K, dtype=np.float32) * np.float32(0.1)
    Ho, Wo = H_ + 2 * pad - R + 1, W + 2 * pad - R + 1
    gy = rng.standard_normal((N, K, Ho, Wo), dtype=np.float32)
    return x, w.astype(np.float32), b, gy


def flops(shape):
    N, Cin, H_, W, K, R, pad = shape
    return 2 * N * K * Cin * R * R * (H_ + 2 * pad - R + 1) * (W + 2 * pad - R + 1)


def _calls(lib, shape):
    """(forward callable, forward+backward callable, output sample) for one library."""
    x, w, b, gy = problem(shape)
    pad = shape[-1]
    input_grad = shape[1] > 3
    if lib.startswith("ember"):
        import ember
        F, tensor = ember.nn.functional, ember.tensor
    else:
        import torch
        F, tensor = torch.nn.functional, torch.from_numpy
    tx, tw, tb, tgy = tensor(x), tensor(w), tensor(b), tensor(gy)
    gx, gw, gb = tensor(x.copy()), tensor(w.copy()), tensor(b.copy())
    gw.requires_grad_(True)
    gb.requires_grad_(True)
    if input_grad:
        gx.requires_grad_(True)

    def forward():
        return F.conv2d(tx, tw, tb, padding=pad)

    def forward_backward():
        gx.grad = gw.grad = gb.grad = None
        F.conv2d(gx, gw, gb, padding=pad).backward(tgy)
    return forward, forward_backward, H.sample(forward().numpy()[0, :, 0, :2])


def worker(lib, case, opts):
    shape = SHAPES[case]
    fwd, fwd_bwd, sample = _calls(lib, shape)
    out = {"lib": lib, "case": case, "shape": shape, "info": H.library_info(lib),
           "sample": sample, "input_grad": shape[1] > 3}
    out["forward"] = H.measure(fwd, lib, opts)
    out["fwd_bwd"] = H.measure(fwd_bwd, lib, opts)
    if lib.startswith("ember"):
        out["algorithms"] = choices(shape)
    return out


def geometry_of(shape):
    from ember.kernels import conv as C
    x, w, _, _ = problem(shape)
    return C.geometry("conv2d", x.shape, w.shape, 1, shape[-1], 1, 1)


def choices(shape):
    from ember.kernels.conv import selector
    g = geometry_of(shape)
    return "/".join(selector.heuristic(d, g) for d in DIRECTIONS)


# ----------------------------------------------------------------------------- runner
def collect(opts, machine, log=None, only=None):
    cases = list(only or (QUICK_CASES if opts.quick else SHAPES))
    cols = {"ember": ("ember", None), "torch": ("torch", None)}
    res = H.run_matrix(SCRIPT, cases, cols, opts, log)
    if machine.get("host_isa") == "avx512":
        # forced AVX2 on the shapes where the selector runs the ISA-specific direct kernels (the
        # thin first layers, and on AVX-512 hosts the wide layers too; an AVX2 process chooses
        # as an AVX2 host does). Each such process compiles them: a forced variant has no disk
        # cache
        direct = [c for c in cases
                  if any("direct" in r.get("algorithms", "") for r in res[c]["ember"])]
        if direct:
            forced = {"ember_avx2": ("ember", {"EMBER_CPU_ISA": "avx2"})}
            extra = H.run_matrix(SCRIPT, direct, forced, opts, log)
            for c in direct:
                res[c].update(extra[c])
    return res


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def render(res):
    avx2 = any("ember_avx2" in v for v in res.values())
    rows, rf, rb = [], [], []
    for case, cols in res.items():
        shape = SHAPES[case]
        e, t = cols.get("ember", []), cols.get("torch", [])
        ef, tf = H.metric(e, "forward", "median"), H.metric(t, "forward", "median")
        eb, tb = H.metric(e, "fwd_bwd", "median"), H.metric(t, "fwd_bwd", "median")
        if ef and tf:
            rf.append(ef["median"] / tf["median"])
        if eb and tb:
            rb.append(eb["median"] / tb["median"])
        algo = next((r["algorithms"] for r in e if "algorithms" in r), "-")
        grads = "dW, db" + (", dX" if shape[1] > 3 else "")
        row = [",".join(map(str, shape)), algo, H.cell(ef), H.cell(tf), H.ratio(ef, tf),
               H.cell(eb), H.cell(tb), H.ratio(eb, tb), grads]
        if avx2:
            a = cols.get("ember_avx2", [])
            af, ab = H.metric(a, "forward", "median"), H.metric(a, "fwd_bwd", "median")
            row += [f"{H.cell(af)} / {H.cell(ab)}", f"{H.ratio(af, tf)} / {H.ratio(ab, tb)}"] \
                if af else ["", ""]
        same = H.agree([r for c in cols.values() for r in c])
        row.append({True: "yes", False: "**no**", None: "-"}[same])
        rows.append(row)
    head = ["N,C,H,W,K,kernel,pad", "ember algorithm f/i/w", "fwd ember", "fwd torch", "ratio",
            "fwd+bwd ember", "fwd+bwd torch", "ratio", "gradients"]
    if avx2:
        head += ["ember forced AVX2 (AVX-512 host) fwd / fwd+bwd", "ratios"]
    head.append("same output")
    text = H.table(head, rows)
    if rf:
        text += (f"\n\nGeometric mean of the ratios: forward {geomean(rf):.2f}, "
                 f"forward+backward {geomean(rb):.2f}; worst {max(rf + rb):.2f}.")
    return {"conv": text}


# ----------------------------------------------------------------------------- --details
def _median_ms(fns, repeat, block=3):
    """Median over ``repeat`` rounds of each callable's best of ``block`` calls (ember only)."""
    for fn in fns:
        fn()
    times = [[] for _ in fns]
    for _ in range(repeat):
        for t, fn in zip(times, fns):
            best = float("inf")
            for _ in range(block):
                start = time.perf_counter()
                fn()
                best = min(best, time.perf_counter() - start)
            t.append(best)
    return [statistics.median(t) * 1e3 for t in times]


def _kernel_calls(shape):
    from ember.kernels import conv as C
    x, w, _, gy = problem(shape)
    pad = shape[-1]
    return (lambda: C.conv2d_forward(x, w, None, 1, pad, 1, 1),
            lambda: C.conv2d_input_grad(gy, w, x.shape, 1, pad, 1, 1),
            lambda: C.conv2d_weight_grad(gy, x, w.shape, 1, pad, 1, 1))


def details(names, repeat=5):
    import tracemalloc
    from ember.backends import conv as settings
    from ember.kernels.conv import selector
    from ember.kernels.runtime import compiler
    from ember.kernels.runtime.threads import get_num_threads, set_num_threads
    compiler.set_compile_mode("sync")   # forced algorithms compile anyway; no fallbacks
    threads = get_num_threads()
    print(f"ember alone; {threads} threads (its default); ms per call, median of {repeat} rounds")
    print("\nms with each capable algorithm forced (- = cannot handle), per direction:")
    print(f"{'shape':27} {'dir':7} " + " ".join(f"{n:>13}" for n in settings.ALGORITHMS))
    for name in names:
        shape = SHAPES[name]
        g = geometry_of(shape)
        for d, fn in zip(DIRECTIONS, _kernel_calls(shape)):
            cells = []
            for algo in settings.ALGORITHMS:
                if algo not in selector.capable(d, g):
                    cells.append(f"{'-':>13}")
                    continue
                settings.algorithm = algo
                try:
                    cells.append(f"{_median_ms([fn], repeat)[0]:13.2f}")
                finally:
                    settings.algorithm = None
            print(f"{str(shape):27} {d:7} " + " ".join(cells))
    if threads > 1:
        print(f"\nforward speed-up 1 -> {threads} threads:")
        for name in names:
            fwd = _kernel_calls(SHAPES[name])[0]

            def single():
                set_num_threads(1)
                try:
                    fwd()
                finally:
                    set_num_threads(threads)
            a, b = _median_ms([single, fwd], repeat)
            print(f"  {str(SHAPES[name]):27} {a / b:.2f}x")
    print("\nworkspace reuse: MiB newly allocated (tracemalloc peak) by two repeated calls")
    for name in names:
        peaks = []
        for fn in _kernel_calls(SHAPES[name]):
            fn()
            tracemalloc.start()
            fn()
            fn()
            peaks.append(tracemalloc.get_traced_memory()[1] / 2 ** 20)
            tracemalloc.stop()
        print(f"  {str(SHAPES[name]):27} forward {peaks[0]:7.2f} | input {peaks[1]:7.2f} | "
              f"weight {peaks[2]:7.2f}")


def layers(model, batch=8, rounds=3, every=False, directions=DIRECTIONS):
    """The ``--layers`` report (module docstring)."""
    import numpy as np
    import torch
    import ember
    from ember.kernels.conv import selector
    from ember.kernels.conv.geometry import geometry
    from ember.kernels.runtime import compiler
    compiler.set_compile_mode("sync")
    ember.set_num_threads(1)
    torch.set_num_threads(1)

    def cpu_ms(fn):
        start = time.process_time()
        fn()
        return (time.process_time() - start) * 1e3
    print(f"{model}, batch {batch}, one thread, process CPU ms, min of {rounds} rounds")
    totals = {"ember": 0.0, "torch": 0.0}
    for C, H_, K, R, s, count in RESNET_LAYERS[model]:
        rng = np.random.default_rng(0)
        x = rng.standard_normal((batch, C, H_, H_), dtype=np.float32)
        w = rng.standard_normal((K, C, R, R), dtype=np.float32) / np.float32(math.sqrt(C * R * R))
        g = geometry("conv2d", x.shape, w.shape, s, R // 2, 1, 1)
        gy = rng.standard_normal(g.output_shape, dtype=np.float32)
        tx, tw, tgy = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(gy)
        for d in directions:
            if d == "input" and C <= 3:
                continue
            a, b = {"forward": (x, w), "input": (gy, w), "weight": (gy, x)}[d]
            chosen = selector.heuristic(d, g)
            names = [chosen] + ([n for n in selector.capable(d, g)
                                 if n not in (chosen, "fft", "implicit_gemm")] if every else [])
            mask = [d == "input", d == "weight", False]
            fns = {n: (lambda n=n: selector._call(n, d, g, a, b)) for n in names}
            fns["torch"] = ((lambda: torch.nn.functional.conv2d(tx, tw, None, s, R // 2))
                            if d == "forward" else
                            (lambda: torch.ops.aten.convolution_backward(
                                tgy, tx, tw, None, [s, s], [R // 2, R // 2], [1, 1], False,
                                [0, 0], 1, mask)))
            best = dict.fromkeys(fns, float("inf"))
            for fn in fns.values():
                fn()
            for _ in range(rounds):
                for n, fn in fns.items():
                    best[n] = min(best[n], cpu_ms(fn))
            totals["ember"] += count * best[chosen]
            totals["torch"] += count * best["torch"]
            others = " ".join(f"{n} {best[n]:.1f}" for n in names[1:])
            print(f"  {C}x{H_} -> {K} {R}x{R}/{s} ({count}) {d:7} {chosen} {best[chosen]:.1f} | "
                  f"torch {best['torch']:.1f}" + (f" | {others}" if others else ""), flush=True)
    print(f"weighted by count: ember {totals['ember']:.0f}, torch {totals['torch']:.0f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    H.add_worker_arguments(ap)
    ap.add_argument("--only", default=None, help="comma-separated names from SHAPES")
    ap.add_argument("--details", action="store_true")
    ap.add_argument("--shapes", default=None, help="with --details: names from SHAPES")
    ap.add_argument("--layers", choices=sorted(RESNET_LAYERS), default=None)
    ap.add_argument("--batch", type=int, default=8, help="with --layers")
    ap.add_argument("--layer-rounds", type=int, default=3, help="with --layers")
    ap.add_argument("--all", action="store_true", help="with --layers: every capable algorithm")
    ap.add_argument("--directions", default=",".join(DIRECTIONS),
                    help="with --layers: comma-separated subset of forward,input,weight")
    args = ap.parse_args()
    if args.layers:
        layers(args.layers, args.batch, args.layer_rounds, args.all,
               tuple(args.directions.split(",")))
        return
    if args.worker:
        H.emit(worker(args.worker, args.case, H.worker_options(args)))
        return
    if args.details:
        details(args.shapes.split(",") if args.shapes else list(SHAPES))
        return
    H.collect_and_report(args, "conv", collect, render, cases=list(SHAPES))


if __name__ == "__main__":
    main()
