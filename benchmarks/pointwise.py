"""Fused pointwise kernels vs the NumPy op-by-op chain (what eager ember does) vs torch, float32.

Workloads at 1e4, 1e6 and 1e7 elements: tanh-GELU forward, GELU forward+backward, the LSTM cell's
pointwise part (gates sliced out of one (N, 4H) GEMM result, so strided inputs), bias+ReLU after a
GEMM, and an Adam update in place. Times are the best of several repeats (the machine may be
shared); ratios below 1 mean ember's fused kernel is faster. Compile time is the first call's in
this process (kernels go to a fresh cache directory unless EMBER_CACHE_DIR is set); cached-load
time is the first call's in a second process that finds them on disk.

    python benchmarks/pointwise.py [--sizes 1e4,1e6,1e7] [--threads 2] [--jit]

``--jit`` adds the JIT section: the same workloads written as eager ember code, traced and
optimised by ``ember.jit.optimize`` (which fuses them into one kernel; fwd+bwd runs the fused
backward kernel), against eager ember and torch, in alternating runs, reporting medians; and
ember's Adam (fused in place from 65536 elements) against torch's fused Adam.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
from timing import settle

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

C, K = 0.7978845608028654, 0.044715

GELU_FWD = [("x2", "mul", ("x", "x")), ("poly", "mul", ("x2", K)), ("poly1", "add", ("poly", 1.0)),
            ("inner", "mul", ("x", C)), ("u", "mul", ("inner", "poly1")), ("th", "tanh", ("u",)),
            ("one_th", "add", ("th", 1.0)), ("hx", "mul", ("x", 0.5)), ("y", "mul", ("hx", "one_th"))]
GELU_BWD = GELU_FWD[:7] + [
    ("th2", "mul", ("th", "th")), ("sech2", "sub", (1.0, "th2")), ("dpoly", "mul", ("x2", 3 * K)),
    ("dpoly1", "add", ("dpoly", 1.0)), ("du", "mul", ("dpoly1", C)), ("hx", "mul", ("x", 0.5)),
    ("a", "mul", ("hx", "sech2")), ("b", "mul", ("a", "du")), ("half", "mul", ("one_th", 0.5)),
    ("d", "add", ("half", "b")), ("gx", "mul", ("gy", "d"))]
LSTM = [("i", "sigmoid", ("ig",)), ("f", "sigmoid", ("fg",)), ("g", "tanh", ("gg",)), ("o", "sigmoid", ("og",)),
        ("fc", "mul", ("f", "c0")), ("ig2", "mul", ("i", "g")), ("c", "add", ("fc", "ig2")),
        ("tc", "tanh", ("c",)), ("h", "mul", ("o", "tc"))]
BIAS_RELU = [("t", "add", ("x", "b")), ("y", "relu", ("t",))]
ADAM = [("m1", "mul", ("m", "beta1")), ("gb", "mul", ("g", "one_m_beta1")), ("m2", "add", ("m1", "gb")),
        ("v1", "mul", ("v", "beta2")), ("g2", "mul", ("g", "g")), ("g2b", "mul", ("g2", "one_m_beta2")),
        ("v2", "add", ("v1", "g2b")), ("sv", "sqrt", ("v2",)), ("den", "mul", ("sv", "inv_sqrt_bc2")),
        ("den1", "add", ("den", "eps")), ("ratio", "div", ("m2", "den1")), ("upd", "mul", ("ratio", "step")),
        ("p2", "sub", ("p", "upd"))]


def best(fn, min_time=0.2, repeats=7):
    """Best time of ``fn()`` in seconds over ``repeats`` batches lasting about ``min_time`` / repeats."""
    fn()
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    inner = max(1, int(min_time / repeats / once))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - start) / inner)
    return min(times)


def expressions():
    from ember.kernels.pointwise import Expr
    return {
        "gelu_fwd": Expr(("x",), GELU_FWD, ("y",)),
        "gelu_bwd": Expr(("x", "gy"), GELU_BWD, ("gx",)),
        "lstm": Expr(("ig", "fg", "gg", "og", "c0"), LSTM, ("h", "c")),
        "bias_relu": Expr(("x", "b"), BIAS_RELU, ("y",)),
        "adam": Expr(("p", "g", "m", "v", "beta1", "one_m_beta1", "beta2", "one_m_beta2", "inv_sqrt_bc2", "eps",
                      "step"), ADAM, ("p2", "m2", "v2")),
    }


def workloads(n, rng):
    """name -> (ember fused fn, numpy chain fn, torch fn)."""
    import torch
    import torch.nn.functional as F
    from ember.kernels.pointwise import compile_pointwise
    ex = expressions()
    f32 = np.float32
    x = rng.standard_normal(n).astype(f32)
    gy = rng.standard_normal(n).astype(f32)
    tx, tgy = torch.from_numpy(x), torch.from_numpy(gy)
    gelu_f = compile_pointwise(ex["gelu_fwd"], (x,))
    gelu_b = compile_pointwise(ex["gelu_bwd"], (x, gy))

    def np_gelu(x):
        x2 = x * x
        u = x * f32(C) * (x2 * f32(K) + f32(1))
        th = np.tanh(u)
        return x * f32(0.5) * (th + f32(1)), x2, th

    def np_gelu_bwd(x, gy):
        _, x2, th = np_gelu(x)
        d = (th + f32(1)) * f32(0.5) + x * f32(0.5) * (f32(1) - th * th) * ((x2 * f32(3 * K) + f32(1)) * f32(C))
        return gy * d

    out = {"gelu_fwd": (lambda: gelu_f(x), lambda: np_gelu(x)[0], lambda: F.gelu(tx, approximate="tanh")),
           "gelu_fwd_bwd": (lambda: (gelu_f(x), gelu_b(x, gy)),
                            lambda: (np_gelu(x)[0], np_gelu_bwd(x, gy)),
                            lambda: (F.gelu(tx, approximate="tanh"),
                                     torch.ops.aten.gelu_backward(tgy, tx, approximate="tanh")))}

    hidden = 1000 if n >= 1000 else n
    rows = n // hidden
    gates = rng.standard_normal((rows, 4 * hidden)).astype(f32)
    c0 = rng.standard_normal((rows, hidden)).astype(f32)
    chunks = [gates[:, k * hidden:(k + 1) * hidden] for k in range(4)]
    lstm = compile_pointwise(ex["lstm"], chunks + [c0])
    tg, tc0 = torch.from_numpy(gates), torch.from_numpy(c0)

    def np_lstm():
        i, f, g, o = (1 / (1 + np.exp(-chunks[0])), 1 / (1 + np.exp(-chunks[1])), np.tanh(chunks[2]),
                      1 / (1 + np.exp(-chunks[3])))
        c = f * c0 + i * g
        return o * np.tanh(c), c

    def torch_lstm():
        i, f, g, o = tg.chunk(4, 1)
        c = torch.sigmoid(f) * tc0 + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c
    out["lstm_cell"] = (lambda: lstm(*chunks, c0), np_lstm, torch_lstm)

    cols = 512 if n >= 512 else n
    xm = (rng.standard_normal((n // cols, 64)).astype(f32) @ rng.standard_normal((64, cols)).astype(f32))
    b = rng.standard_normal(cols).astype(f32)
    br = compile_pointwise(ex["bias_relu"], (xm, b))
    txm, tb = torch.from_numpy(xm), torch.from_numpy(b)
    out["bias_relu"] = (lambda: br(xm, b), lambda: np.maximum(xm + b, 0), lambda: torch.relu(txm + tb))

    p, g, m, v = (rng.standard_normal(n).astype(f32) for _ in range(4))
    v = np.abs(v)
    scalars = (0.9, 0.1, 0.999, 0.001, 1 / np.sqrt(1 - 0.999 ** 10), 1e-8, 1e-3 / (1 - 0.9 ** 10))
    adam = compile_pointwise(ex["adam"], (p, g, m, v) + (float,) * 7)
    pn, mn, vn = p.copy(), m.copy(), v.copy()

    def np_adam():
        np.multiply(mn, f32(0.9), out=mn)
        mn.__iadd__(f32(0.1) * g)
        np.multiply(vn, f32(0.999), out=vn)
        vn.__iadd__(f32(0.001) * (g * g))
        den = np.sqrt(vn)
        den *= f32(scalars[4])
        den += f32(1e-8)
        pn.__isub__(f32(scalars[6]) * (mn / den))
    tp = torch.from_numpy(p.copy()).requires_grad_(True)
    tp.grad = torch.from_numpy(g)
    opt = torch.optim.Adam([tp], lr=1e-3, fused=True)
    out["adam"] = (lambda: adam(p, g, m, v, *scalars, out=(p, m, v)), np_adam, opt.step)
    return out


def first_call_times(sizes):
    """Seconds of the first fused call per workload at the largest size (compile or disk load)."""
    rng = np.random.default_rng(0)
    result = {}
    for name, (fused, _, _) in workloads(int(max(sizes)), rng).items():
        start = time.perf_counter()
        fused()
        result[name] = time.perf_counter() - start
    return result


def median_alternating(fns, rounds=7, min_time=0.05):
    """Median seconds per call of each of ``fns``, their batches interleaved round by round
    (so a load change on a shared machine hits all of them alike), each batch after a busy-wait
    ``settle`` so it does not run next to the previous one's still-spinning worker threads."""
    inner = []
    for fn in fns:
        fn()
        start = time.perf_counter()
        fn()
        inner.append(max(1, int(min_time / max(time.perf_counter() - start, 1e-7))))
    times = [[] for _ in fns]
    for _ in range(rounds):
        for k, fn in enumerate(fns):
            settle()
            start = time.perf_counter()
            for _ in range(inner[k]):
                fn()
            times[k].append((time.perf_counter() - start) / inner[k])
    return [float(np.median(t)) for t in times]


def jit_workloads(n, rng):
    """name -> (fused JIT fn, eager ember fn, torch fn); and the traced callables to warm."""
    import torch
    import torch.nn.functional as F
    import ember
    import ember.jit as jit
    f32 = np.float32

    def trace(fn, *xs):
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return jit.optimize(jit.trace(fn, xs, check_trace=False))
    x = ember.tensor(rng.standard_normal(n).astype(f32))
    gy = ember.tensor(rng.standard_normal(n).astype(f32))
    tx, tgy = torch.from_numpy(x._data), torch.from_numpy(gy._data)

    def gelu(x):  # tanh-GELU written in ember ops (what a user's module does)
        return x * 0.5 * ((x + x * x * x * K) * C).tanh().add(1.0)
    gelu_j = trace(gelu, x)
    xg = ember.tensor(x._data.copy(), requires_grad=True)
    txg = tx.clone().requires_grad_(True)

    def fb(fn):
        def run():
            xg.grad = None
            fn(xg).backward(gy)
        return run

    def torch_fb():
        txg.grad = None
        F.gelu(txg, approximate="tanh").backward(tgy)
    out = {"gelu_fwd": (lambda: gelu_j(x), lambda: gelu(x), lambda: F.gelu(tx, approximate="tanh")),
           "gelu_fwd_bwd": (fb(gelu_j), fb(gelu), torch_fb)}

    hidden = 1000 if n >= 1000 else n
    rows = n // hidden
    gates = ember.tensor(rng.standard_normal((rows, 4 * hidden)).astype(f32))
    c0 = ember.tensor(rng.standard_normal((rows, hidden)).astype(f32))

    def cell(gates, c0):
        i, f, g, o = gates.chunk(4, 1)
        c = f.sigmoid() * c0 + i.sigmoid() * g.tanh()
        return o.sigmoid() * c.tanh(), c
    cell_j = trace(cell, gates, c0)
    tg, tc0 = torch.from_numpy(gates._data), torch.from_numpy(c0._data)

    def torch_cell():
        i, f, g, o = tg.chunk(4, 1)
        c = torch.sigmoid(f) * tc0 + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c
    out["lstm_cell"] = (lambda: cell_j(gates, c0), lambda: cell(gates, c0), torch_cell)

    cols = 512 if n >= 512 else n
    a = ember.tensor(rng.standard_normal((n // cols, 64)).astype(f32))
    w = ember.tensor(rng.standard_normal((64, cols)).astype(f32))
    b = ember.tensor(rng.standard_normal(cols).astype(f32))

    def bias_relu(a, w, b):
        return (a @ w + b).relu()
    br_j = trace(bias_relu, a, w, b)
    ta, tw, tb = (torch.from_numpy(t._data) for t in (a, w, b))
    out["gemm_bias_relu"] = (lambda: br_j(a, w, b), lambda: bias_relu(a, w, b),
                             lambda: torch.relu(ta @ tw + tb))

    p = ember.tensor(rng.standard_normal(n).astype(f32), requires_grad=True)
    p.grad = ember.tensor(rng.standard_normal(n).astype(f32))
    opt = ember.optim.Adam([p], lr=1e-3)
    tp = torch.from_numpy(p._data.copy()).requires_grad_(True)
    tp.grad = torch.from_numpy(p.grad._data.copy())
    topt = torch.optim.Adam([tp], lr=1e-3, fused=True)
    out["adam_step"] = (opt.step, None, topt.step)
    return out


def jit_section(sizes):
    from ember.jit import fused
    print("\nJIT fusion (ember.jit.optimize) vs eager ember vs torch; medians of alternating runs, ms")
    print(f"{'workload':16s} {'n':>9s} {'fused':>9s} {'eager':>9s} {'torch':>9s} {'fused/eager':>12s} "
          f"{'fused/torch':>12s}")
    rng = np.random.default_rng(3)
    for n in sizes:
        for name, (fj, eager, ref) in jit_workloads(n, rng).items():
            if eager is None:  # Adam: fused from _fused.MIN_SIZE elements, else ember's NumPy path
                tf, te, tt = median_alternating([fj, _numpy_adam_step(n), ref])
            else:
                tf, te, tt = median_alternating([fj, eager, ref])
            print(f"{name:16s} {n:9.0e} {tf * 1e3:9.3f} {te * 1e3:9.3f} {tt * 1e3:9.3f} "
                  f"{tf / te:12.2f} {tf / tt:12.2f}")
    print(f"(groups run op by op below {fused.MIN_FUSED_SIZE} elements, as the unfused code)")


def _numpy_adam_step(n):
    import ember
    from ember.optim import _fused
    p = ember.tensor(np.random.default_rng(0).standard_normal(n).astype(np.float32), requires_grad=True)
    p.grad = ember.tensor(np.ones(n, np.float32))
    opt = ember.optim.Adam([p], lr=1e-3)

    def run():
        saved = _fused.MIN_SIZE
        _fused.MIN_SIZE = 1 << 62
        try:
            opt.step()
        finally:
            _fused.MIN_SIZE = saved
    return run


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1e4,1e6,1e7")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--jit", action="store_true", help="add the JIT fusion section")
    parser.add_argument("--jit-only", action="store_true", help="only the JIT fusion section")
    parser.add_argument("--first-calls-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    if not os.environ.get("EMBER_CACHE_DIR"):
        os.environ["EMBER_CACHE_DIR"] = tempfile.mkdtemp(prefix="ember-bench-")
    import torch
    from ember.kernels import threads
    from ember.kernels.pointwise import has_compiler
    torch.set_num_threads(args.threads)
    threads.set_num_threads(args.threads)
    if args.first_calls_only:
        print(json.dumps(first_call_times(sizes)))
        return
    if args.jit_only:
        jit_section(sizes)
        return
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        print(f"{var}: {'set to ' + repr(os.environ[var]) if var in os.environ else 'not set'}")
    print(f"threads: {args.threads}  numba: {has_compiler()}  torch {torch.__version__}  numpy {np.__version__}")
    print(f"cache dir: {os.environ['EMBER_CACHE_DIR']}")
    compile_s = first_call_times(sizes)
    import numba
    from ember.kernels.pointwise import numba_runtime
    print(f"numba {numba.__version__}; parallel kernels on: {numba_runtime.parallel_layer()} "
          "('tbb': Numba's TBB layer, 'pool': ember's thread pool)")
    proc = subprocess.run([sys.executable, __file__, "--sizes", args.sizes, "--threads", str(args.threads),
                           "--first-calls-only"], capture_output=True, text=True, env=os.environ)
    load_s = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else {}
    print("\nfirst call per kernel (compile here; load from disk in a second process):")
    for name, sec in compile_s.items():
        print(f"  {name:14s} compile {sec:7.2f} s   cached load {load_s.get(name, float('nan')) * 1e3:7.1f} ms")
    print(f"\n{'workload':14s} {'n':>9s} {'fused ms':>10s} {'numpy ms':>10s} {'torch ms':>10s}"
          f" {'fused/numpy':>12s} {'fused/torch':>12s}")
    rng = np.random.default_rng(1)
    for n in sizes:
        for name, (fused, chain, ref) in workloads(n, rng).items():
            tf, tn, tt = best(fused), best(chain), best(ref)
            print(f"{name:14s} {n:9.0e} {tf * 1e3:10.3f} {tn * 1e3:10.3f} {tt * 1e3:10.3f}"
                  f" {tf / tn:12.2f} {tf / tt:12.2f}")
    a = np.random.default_rng(2).standard_normal((512, 512)).astype(np.float32)
    x = a @ a
    b = np.ones(512, np.float32)
    from ember.kernels.pointwise import apply, Expr
    br = Expr(("x", "b"), BIAS_RELU, ("y",))
    gemm = best(lambda: a @ a)
    pw = best(lambda: apply(br, x, b))
    both = best(lambda: apply(br, a @ a, b))
    print(f"\nGEMM 512^3 then fused bias+ReLU: {both * 1e3:.3f} ms (GEMM alone {gemm * 1e3:.3f}, "
          f"bias+ReLU alone {pw * 1e3:.3f}; a shared-core penalty shows as the first above the sum)")
    if args.jit:
        jit_section(sizes)


if __name__ == "__main__":
    main()
