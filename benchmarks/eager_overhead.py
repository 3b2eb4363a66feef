"""Eager overhead of ember vs torch, measured side by side in one run.

Prints: µs per ``a + b`` on small tensors without and with requires_grad; a 20-op pointwise chain
forward+backward on 1e3 and 1e6 elements; and ``import ember`` vs ``import torch`` time.
Run: python benchmarks/eager_overhead.py
"""
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def best_of(fn, repeat=7, number=None):
    if number is None:
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        number = max(1, int(0.05 / max(dt, 1e-7)))
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t0) / number)
    return best


def import_time(mod):
    """Best of 3 fresh-process imports, with bytecode compiled first as an installed wheel has."""
    import compileall
    import importlib.util
    origin = os.path.dirname(importlib.util.find_spec(mod).origin)
    compileall.compile_dir(origin, quiet=2)
    times = []
    for _ in range(3):
        r = subprocess.run([sys.executable, "-c", f"import time; t=time.perf_counter(); import {mod}; "
                            "print(time.perf_counter()-t)"], capture_output=True, text=True,
                           cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        times.append(float(r.stdout.strip()))
    return min(times)


def chain(x):
    y = x
    for i in range(5):
        y = y * 1.01
        y = y + 0.1
        y = y.tanh()
        y = y - 0.05
    return y


def main():
    import ember
    import torch
    torch.set_num_threads(2)
    ember.set_num_threads(2)
    print(f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE')!r} "
          f"OPENBLAS_L2_SIZE={os.environ.get('OPENBLAS_L2_SIZE')!r} (left unchanged)")
    rows = []
    a_np = np.random.rand(4, 4).astype(np.float32)
    ea, eb = ember.from_numpy(a_np.copy()), ember.from_numpy(a_np.copy())
    ta, tb = torch.from_numpy(a_np.copy()), torch.from_numpy(a_np.copy())
    rows.append(("a + b, 4x4, no grad (us)", best_of(lambda: ea + eb), best_of(lambda: ta + tb)))
    ea.requires_grad_()
    ta.requires_grad_()
    rows.append(("a + b, 4x4, requires_grad (us)", best_of(lambda: ea + eb),
                 best_of(lambda: ta + tb)))
    for n in (1000, 1_000_000):
        x_np = np.random.rand(n).astype(np.float32)
        ex = ember.from_numpy(x_np.copy()).requires_grad_()
        tx = torch.from_numpy(x_np.copy()).requires_grad_()

        def e_step():
            chain(ex).sum().backward()

        def t_step():
            chain(tx).sum().backward()
        rows.append((f"20-op chain fwd+bwd, {n:.0e} elems (us)", best_of(e_step, 5),
                     best_of(t_step, 5)))
    rows = [(name, e * 1e6, t * 1e6) for name, e, t in rows]
    rows.append(("import (s)", import_time("ember"), import_time("torch")))
    print(f"{'case':44s} {'ember':>10s} {'torch':>10s} {'ember/torch':>12s}")
    for name, e, t in rows:
        print(f"{name:44s} {e:10.2f} {t:10.2f} {e / t:12.2f}")


if __name__ == "__main__":
    main()
