"""Fused pointwise code (``ember.jit.optimize``) vs eager ember vs torch eager, float32.

Usage: python benchmarks/pointwise.py [--quick] [--repeats 3] [--only 1e6,1e7]
       python benchmarks/pointwise.py --worker ember|torch --case 1e6     (one process's side)
       python benchmarks/pointwise.py --compile [--size 1e6]              (ember only, see below)

Workloads on n float32 elements, each written as a user writes it: tanh-GELU forward, GELU
forward + backward (ember: the formula in tensor ops; torch: its own ``F.gelu(approximate="tanh")``
kernel), the LSTM cell's pointwise part (gates chunked out of one (n/1000, 4000)
tensor), bias + ReLU after a GEMM, and an Adam step on one parameter of n elements. ember runs each
eager and traced + optimised (``ember.jit.optimize`` fuses the chain into one kernel; forward +
backward runs the fused backward kernel); for Adam, ember's default step (fused in place from
65536 elements) against its NumPy path, and torch's ``Adam(fused=True)``. Each library in its
own process with its default threads (``_harness``).

``--compile``: in a fresh kernel cache (temporary ``EMBER_CACHE_DIR``), the first call of each
fused workload (the compile) and, in a second process, the first call again (loaded from disk).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _harness as H  # noqa: E402

SCRIPT = "pointwise.py"
CASES = ("1e6", "1e7")
QUICK_CASES = ("1e4",)
C, K = 0.7978845608028654, 0.044715
WORKLOADS = ("gelu_fwd", "gelu_fwd_bwd", "lstm_cell", "gemm_bias_relu", "adam_step")
LABELS = {"gelu_fwd": "tanh-GELU forward (torch: `F.gelu(approximate=\"tanh\")`)",
          "gelu_fwd_bwd": "tanh-GELU forward + backward (torch: `F.gelu`)",
          "lstm_cell": "LSTM cell pointwise", "gemm_bias_relu": "GEMM + bias + ReLU",
          "adam_step": "Adam step (ember: fused vs NumPy path; torch `fused=True`)"}


def gelu(x):
    """tanh-GELU in tensor methods (the same code runs on ember and torch tensors)."""
    return x * 0.5 * ((x + x * x * x * K) * C).tanh().add(1.0)


def cell(gates, c0):
    i, f, g, o = gates.chunk(4, 1)
    c = f.sigmoid() * c0 + i.sigmoid() * g.tanh()
    return o.sigmoid() * c.tanh(), c


def bias_relu(a, w, b):
    return (a @ w + b).relu()


def _arrays(n):
    import numpy as np
    rng = np.random.default_rng(3)
    f32 = np.float32
    hidden = 1000 if n >= 1000 else n
    cols = 512 if n >= 512 else n
    return {"x": rng.standard_normal(n).astype(f32), "gy": rng.standard_normal(n).astype(f32),
            "gates": rng.standard_normal((n // hidden, 4 * hidden)).astype(f32),
            "c0": rng.standard_normal((n // hidden, hidden)).astype(f32),
            "a": rng.standard_normal((n // cols, 64)).astype(f32),
            "w": rng.standard_normal((64, cols)).astype(f32),
            "b": rng.standard_normal(cols).astype(f32)}


def _calls(lib, n):
    """{workload: {variant: callable}} for one library."""
    arr = _arrays(n)
    if lib.startswith("ember"):
        import warnings
        import ember
        import ember.jit as jit
        from ember.optim import _fused
        t = {k: ember.tensor(v) for k, v in arr.items()}

        def fuse(fn, *xs):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return jit.optimize(jit.trace(fn, xs, check_trace=False))
        make = ember.tensor
        optim = ember.optim
        act = gelu

        def numpy_path(step):
            def run():
                saved, _fused.MIN_SIZE = _fused.MIN_SIZE, 1 << 62
                try:
                    step()
                finally:
                    _fused.MIN_SIZE = saved
            return run
    else:
        import torch
        t = {k: torch.from_numpy(v) for k, v in arr.items()}
        fuse = None
        make = torch.from_numpy

        def act(x):   # torch's own tanh-GELU kernel: its best equivalent
            return torch.nn.functional.gelu(x, approximate="tanh")
        optim = torch.optim
    x, gy = t["x"], t["gy"]
    xg = make(arr["x"].copy()).requires_grad_(True)

    def fwd_bwd(fn):
        def run():
            xg.grad = None
            fn(xg).backward(gy)
        return run
    p = make(arr["x"].copy()).requires_grad_(True)
    p.grad = make(arr["gy"].copy())
    if fuse is None:
        opt = optim.Adam([p], lr=1e-3, fused=True)
    else:
        opt = optim.Adam([p], lr=1e-3)
    variants = {
        "gelu_fwd": {"eager": lambda: act(x)},
        "gelu_fwd_bwd": {"eager": fwd_bwd(act)},
        "lstm_cell": {"eager": lambda: cell(t["gates"], t["c0"])},
        "gemm_bias_relu": {"eager": lambda: bias_relu(t["a"], t["w"], t["b"])},
        "adam_step": {"eager": opt.step},
    }
    if fuse is not None:
        g = fuse(gelu, x)
        variants["gelu_fwd"]["fused"] = lambda: g(x)
        variants["gelu_fwd_bwd"]["fused"] = fwd_bwd(g)
        c = fuse(cell, t["gates"], t["c0"])
        variants["lstm_cell"]["fused"] = lambda: c(t["gates"], t["c0"])
        br = fuse(bias_relu, t["a"], t["w"], t["b"])
        variants["gemm_bias_relu"]["fused"] = lambda: br(t["a"], t["w"], t["b"])
        variants["adam_step"] = {"fused": opt.step, "eager": numpy_path(opt.step)}
    return variants


def worker(lib, case, opts):
    n = int(float(case))
    out = {"lib": lib, "case": case, "info": H.library_info(lib)}
    for name, variants in _calls(lib, n).items():
        for v, fn in variants.items():
            out[f"{name}:{v}"] = H.measure(fn, lib, opts)
    return out


# ----------------------------------------------------------------------------- runner
def collect(opts, machine, log=None, only=None):
    cases = list(only or (QUICK_CASES if opts.quick else CASES))
    return H.run_matrix(SCRIPT, cases, {"ember": ("ember", None), "torch": ("torch", None)},
                        opts, log)


def render(res):
    rows = []
    for case, cols in res.items():
        e, t = cols.get("ember", []), cols.get("torch", [])
        for name in WORKLOADS:
            f, ea = H.metric(e, f"{name}:fused", "median"), H.metric(e, f"{name}:eager", "median")
            tt = H.metric(t, f"{name}:eager", "median")
            rows.append([LABELS[name], case, H.cell(f), H.cell(ea), H.cell(tt),
                         H.ratio(f, ea), H.ratio(f, tt)])
    return {"pointwise": H.table(["workload", "n", "ember fused", "ember eager", "torch",
                                  "fused / eager", "fused / torch"], rows)}


# ----------------------------------------------------------------------------- --compile
def first_calls(n):
    """Seconds of each fused workload's first call in this process (compile or disk load)."""
    result = {}
    import ember.jit as jit  # noqa: F401  (imported before timing)
    from ember.kernels.runtime import compiler
    compiler.set_compile_mode("sync")   # the first call compiles, blocking: its cost
    for name, variants in _calls("ember", n).items():
        start = time.perf_counter()
        variants["fused"]()
        result[name] = time.perf_counter() - start
    return result


def compile_section(n):
    tmp = tempfile.mkdtemp(prefix="ember-bench-cache-")
    try:
        env = dict(os.environ, EMBER_CACHE_DIR=tmp, PYTHONPATH=H.ROOT)
        cmd = [sys.executable, __file__, "--first-calls", "--size", str(n)]
        runs = []
        for _ in range(2):
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
            runs.append(json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0
                        else {})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"first call per fused workload at n={n:.0e} (fresh EMBER_CACHE_DIR; compile here, "
          "then loaded from disk in a second process):")
    for name in WORKLOADS:
        a, b = runs[0].get(name, float("nan")), runs[1].get(name, float("nan"))
        print(f"  {name:16s} compile {a:7.2f} s   cached load {b * 1e3:8.1f} ms")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    H.add_worker_arguments(ap)
    ap.add_argument("--only", default=None)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--first-calls", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--size", default="1e6")
    args = ap.parse_args()
    if args.worker:
        H.emit(worker(args.worker, args.case, H.worker_options(args)))
        return
    if args.first_calls:
        print(json.dumps(first_calls(int(float(args.size)))))
        return
    if args.compile:
        compile_section(int(float(args.size)))
        return
    H.collect_and_report(args, "pointwise", collect, render)


if __name__ == "__main__":
    main()
