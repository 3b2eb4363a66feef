"""Training steps with and without ember's freed-memory reuse (glibc mallopt), ember only.

Usage: EMBER_MEMORY_REUSE=1 python benchmarks/memory_reuse.py [--steps 10] [--only lenet,mlp]
                                                              [--threads N]  (default: ember's)
       EMBER_MEMORY_REUSE=0 python benchmarks/memory_reuse.py ...

Run it once per setting, each in its own process (the setting is made at ``import ember``). Per
model (train_step.py's LeNet and MLP, one SGD step each) it prints the median wall ms per step,
the process CPU ms per step (user + system: what page faults cost, less sensitive than wall time
to other processes on a busy machine) and the minor page faults per step, with the CPU model and
whether OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are set (it never changes them). Not a test.
"""
import argparse
import os
import resource
import statistics
import time

import numpy as np
import _harness as H
from train_step import MODELS, ember_step


def measure(step, steps, warmup=3):
    for _ in range(warmup):
        step()
    walls = []
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    for _ in range(steps):
        t = time.perf_counter()
        step()
        walls.append(time.perf_counter() - t)
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) / steps
    return statistics.median(walls) * 1e3, cpu * 1e3, (r1.ru_minflt - r0.ru_minflt) / steps


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--only", default="lenet,mlp")
    args = ap.parse_args()
    import ember
    if args.threads is not None:
        ember.set_num_threads(args.threads)
    print(f"CPU: {H.cpuinfo()[0]}, {os.cpu_count()} cores; threads: {ember.get_num_threads()}")
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        print(f"{var} = {os.environ[var]!r}" if var in os.environ else f"{var} is not set")
    print(f"memory reuse: {ember.get_memory_reuse()}; {args.steps} steps after 3 warm-up")
    print(f"{'model':8s} {'wall ms':>9s} {'cpu ms':>9s} {'faults':>9s}")
    for name in args.only.split(","):
        builder, data = MODELS[name]
        x, y = data(np.random.default_rng(0))
        wall, cpu, faults = measure(ember_step(builder, x, y), args.steps)
        print(f"{name:8s} {wall:9.2f} {cpu:9.2f} {faults:9.0f}")


if __name__ == "__main__":
    main()
