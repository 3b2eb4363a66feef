"""Eager overhead of ember vs torch, and ``import`` time, each library in its own process.

Usage: python benchmarks/eager_overhead.py [--quick] [--repeats 3]
       python benchmarks/eager_overhead.py --worker ember|torch --case ops

Rows: ``a + b`` on 4x4 tensors without and with requires_grad; a 20-op pointwise chain forward +
backward on 1e3 and 1e6 elements; and ``import ember`` / ``import torch`` in a fresh interpreter
(bytecode compiled first, as an installed wheel has it; the median over 2 x repeats - 1 fresh
processes). Each library runs with its default threads (``_harness``).
"""
import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _harness as H  # noqa: E402

SCRIPT = "eager_overhead.py"
ROWS = (("add", "`a + b`, 4x4, no grad"), ("add_grad", "`a + b`, 4x4, requires_grad"),
        ("chain_1e3", "20-op pointwise chain fwd+bwd, 1e3 elements"),
        ("chain_1e6", "20-op pointwise chain fwd+bwd, 1e6 elements"))


def chain(x):
    y = x
    for _ in range(5):
        y = y * 1.01
        y = y + 0.1
        y = y.tanh()
        y = y - 0.05
    return y


def worker(lib, case, opts):
    import numpy as np
    if lib.startswith("ember"):
        import ember
        make = ember.from_numpy
    else:
        import torch
        make = torch.from_numpy
    out = {"lib": lib, "case": case, "info": H.library_info(lib)}
    a = np.random.default_rng(0).random((4, 4), dtype=np.float32)
    ta, tb = make(a.copy()), make(a.copy())
    out["add"] = H.measure(lambda: ta + tb, lib, opts)
    ta.requires_grad_()
    out["add_grad"] = H.measure(lambda: ta + tb, lib, opts)
    for n, key in ((1000, "chain_1e3"), (1_000_000, "chain_1e6")):
        tx = make(np.random.default_rng(1).random(n, dtype=np.float32)).requires_grad_()

        def step():
            tx.grad = None
            chain(tx).sum().backward()
        out[key] = H.measure(step, lib, opts)
    return out


def import_times(mod, runs):
    """Seconds of ``import mod`` in ``runs`` fresh interpreters, bytecode compiled first."""
    env = dict(os.environ, PYTHONPATH=H.ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    subprocess.run([sys.executable, "-c", f"import compileall, importlib.util, os; compileall."
                    f"compile_dir(os.path.dirname(importlib.util.find_spec({mod!r}).origin), "
                    "quiet=2)"], cwd=H.ROOT, env=env, capture_output=True, timeout=300)
    code = f"import time; t = time.perf_counter(); import {mod}; print(time.perf_counter() - t)"
    out = []
    for _ in range(runs):
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              cwd=H.ROOT, env=env, timeout=120)
        try:
            out.append(float(proc.stdout.strip().splitlines()[-1]) * 1e3)
        except (IndexError, ValueError):
            pass
    return out


def collect(opts, machine, log=None, only=None):
    cols = {"ember": ("ember", None), "torch": ("torch", None)}
    res = H.run_matrix(SCRIPT, ["ops"], cols, opts, log)
    runs = 2 * opts.repeats - 1
    res["import"] = {"ember": [], "torch": []}
    for r in range(runs):   # alternating, one fresh interpreter each
        for mod in (("ember", "torch") if r % 2 == 0 else ("torch", "ember")):
            res["import"][mod] += [{"ms": v} for v in import_times(mod, 1)]
    if log:
        log(f"  {SCRIPT} import: {runs} fresh interpreters per library")
    return res


def render(res):
    rows = []
    e, t = res.get("ops", {}).get("ember", []), res.get("ops", {}).get("torch", [])
    for key, label in ROWS:
        a, b = H.metric(e, key, "median"), H.metric(t, key, "median")
        rows.append([label, H.cell(a), H.cell(b), H.ratio(a, b)])
    imp = res.get("import", {})
    a, b = H.metric(imp.get("ember", []), "ms"), H.metric(imp.get("torch", []), "ms")
    rows.append(["`import` (bytecode compiled, fresh interpreter)", H.cell(a, "s"), H.cell(b, "s"),
                 H.ratio(a, b)])
    return {"eager": H.table(["case", "ember", "torch", "ratio"], rows)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    H.add_worker_arguments(ap)
    args = ap.parse_args()
    if args.worker:
        H.emit(worker(args.worker, args.case, H.worker_options(args)))
        return
    H.collect_and_report(args, "eager", collect, render)


if __name__ == "__main__":
    main()
