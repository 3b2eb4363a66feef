"""all_reduce bandwidth: ember.distributed.all_reduce on ember tensors vs mpi4py's Allreduce on
the same NumPy buffers (in place), and the DDP step's wait for communication.

Usage: ember run -n 2 benchmarks/distributed.py [--repeat 15] [--sizes 1e3,1e5,1e6,1.6e7]

Calls alternate (ember, mpi4py, ember, ...) and each figure is the median over ``--repeat``
rounds, so load on a shared machine slows both sides rather than skewing the ratio. Per message
size (bytes, float32): microseconds per call for each, the overhead of ember's wrapper in percent
and the algorithm bandwidth (bytes / time). Then a small MLP's DDP step on every rank: the time
backward spends waiting for its all-reduces at the end (``wait``), with buckets of 1 MiB (overlap)
and one bucket holding every gradient (no overlap). Not a test: nothing is asserted.
"""
import argparse
import os
import statistics
import time

import numpy as np

import ember
import ember.distributed as dist
from ember import nn
from ember.nn.parallel import DistributedDataParallel as DDP


def bench_all_reduce(sizes, repeat, comm, rank):
    from mpi4py import MPI
    if rank == 0:
        print(f"{'bytes':>10} {'ember us':>10} {'mpi4py us':>10} {'overhead':>9} {'GB/s':>7}")
    for nbytes in sizes:
        n = max(1, int(nbytes) // 4)
        t = ember.ones(n)
        arr = np.ones(n, np.float32)
        inner = max(1, int(2e7 // max(nbytes, 1)) // 10 + 1)
        te, tm = [], []
        def run_ember():
            comm.Barrier()
            dist.all_reduce(t)  # absorbs the ranks' skew after the barrier
            s = time.perf_counter()
            for _ in range(inner):
                dist.all_reduce(t)
            te.append((time.perf_counter() - s) / inner)

        def run_mpi4py():
            comm.Barrier()
            comm.Allreduce(MPI.IN_PLACE, arr, MPI.SUM)
            s = time.perf_counter()
            for _ in range(inner):
                comm.Allreduce(MPI.IN_PLACE, arr, MPI.SUM)
            tm.append((time.perf_counter() - s) / inner)

        for k in range(repeat):  # alternate which side goes first
            for fn in ((run_ember, run_mpi4py) if k % 2 == 0 else (run_mpi4py, run_ember)):
                fn()
            t.fill_(1.0)
            arr[...] = 1.0
        e, m = statistics.median(te), statistics.median(tm)
        if rank == 0:
            print(f"{n * 4:>10} {e * 1e6:>10.1f} {m * 1e6:>10.1f} {100 * (e / m - 1):>8.1f}% "
                  f"{n * 4 / e / 1e9:>7.2f}")


def bench_ddp(repeat, rank):
    ember.manual_seed(0)
    x, y = ember.randn(64, 512), ember.randn(64, 512)
    for label, cap in (("1 MiB buckets (overlap)", 1), ("one bucket (no overlap)", 1e4)):
        model = DDP(nn.Sequential(nn.Linear(512, 1024), nn.Tanh(), nn.Linear(1024, 1024),
                                  nn.Tanh(), nn.Linear(1024, 512)), bucket_cap_mb=cap)
        waits, steps = [], []
        finish = model._finish_backward

        def timed():
            s = time.perf_counter()
            finish()
            waits.append(time.perf_counter() - s)
        model._finish_backward = timed
        for _ in range(repeat):
            s = time.perf_counter()
            model.zero_grad()
            ((model(x) - y) ** 2).mean().backward()
            steps.append(time.perf_counter() - s)
        if rank == 0:
            print(f"DDP step, {label}: {len(model._buckets)} buckets, step "
                  f"{statistics.median(steps) * 1e3:.1f} ms, waiting at the end of backward "
                  f"{statistics.median(waits) * 1e3:.2f} ms")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--sizes", default="1e3,1e5,1e6,1.6e7")
    args = ap.parse_args()
    dist.init_process_group("mpi")
    rank = dist.get_rank()
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    if rank == 0:
        print(f"{dist.get_world_size()} ranks, load average {os.getloadavg()[0]:.2f}")
    bench_all_reduce([float(s) for s in args.sizes.split(",")], args.repeat, comm, rank)
    bench_ddp(args.repeat, rank)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
