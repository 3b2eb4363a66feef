"""all_reduce bandwidth: ember.distributed.all_reduce on ember tensors vs mpi4py's Allreduce on
the same NumPy buffers (in place), and DDP's step against a single process.

Usage: ember run -n 2 benchmarks/distributed.py [--repeat 15] [--sizes 1e3,1e5,1e6,4e6,1.6e7]
       [--part all|allreduce|ddp]        (set OMP_NUM_THREADS=1: one core per rank)

all_reduce: the ember tensor wraps the very ndarray mpi4py is given, so both reduce the same
memory. Calls alternate (ember then mpi4py, then the other way round) and each figure is the median
over ``--repeat`` rounds, so load on a shared machine slows both sides rather than skewing the
ratio; the per-round ratios' interquartile range shows the spread, and the overhead of the
fastest rounds ("of mins") is the figure least moved by other load. Per message size (bytes,
float32): microseconds per call for each, ember's overhead in percent, and the algorithm bandwidth.
First, ember's own cost per call, on a group of one rank where MPI has nothing to do.

DDP: a 2.1 M-parameter MLP, 64 samples per rank. On rank 0 alone (the other ranks idle without
polling) the plain module's step on 64 samples (T1) and on the global batch; then the DDP step
with 1 MiB buckets (overlap: all-reduces start from the gradient hooks) and with one bucket for
every gradient (no overlap), the time backward waits for communication at its end, and one
blocking all_reduce of every gradient (the communication to hide). Parallel efficiency:
weak scaling T1 / T_ddp, strong scaling T1(global batch) / (N * T_ddp). Nothing is asserted.
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
        print(f"{'bytes':>10} {'ember us':>10} {'mpi4py us':>10} {'overhead':>9} "
              f"{'per-round IQR':>16} {'of mins':>9} {'GB/s':>7}")
    for nbytes in sizes:
        n = max(1, int(nbytes) // 4)
        arr = np.zeros(n, np.float32)   # zeros: the sums stay finite
        t = ember.from_numpy(arr)       # the same memory
        assert t._data is arr
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
        e, m = statistics.median(te), statistics.median(tm)
        ratios = sorted(a / b - 1 for a, b in zip(te, tm))  # per round: the two ran back to back
        q1, q3 = ratios[len(ratios) // 4], ratios[(3 * len(ratios)) // 4]
        if rank == 0:
            print(f"{n * 4:>10} {e * 1e6:>10.1f} {m * 1e6:>10.1f} {100 * (e / m - 1):>8.1f}% "
                  f"{100 * q1:>7.1f}%..{100 * q3:.1f}% {100 * (min(te) / min(tm) - 1):>8.1f}% "
                  f"{n * 4 / e / 1e9:>7.2f}", flush=True)


def bench_wrapper(comm, rank):
    """ember's Python cost per all_reduce call, without MPI's: on a group of rank 0 alone, where
    MPI_Allreduce(MPI_IN_PLACE) has nothing to do."""
    from mpi4py import MPI
    solo = dist.new_group([0])
    if rank == 0:
        t = ember.zeros(256)
        arr = t._data
        per_e, per_m = [], []
        for _ in range(51):  # short rounds, the fastest kept: the least disturbed by other load
            s = time.perf_counter()
            for _ in range(2000):
                dist.all_reduce(t, group=solo)
            per_e.append((time.perf_counter() - s) / 2000)
            s = time.perf_counter()
            for _ in range(2000):
                solo.comm.Allreduce(MPI.IN_PLACE, arr, MPI.SUM)
            per_m.append((time.perf_counter() - s) / 2000)
        e, m = min(per_e), min(per_m)
        print(f"per call, on one rank (no communication): ember all_reduce {e * 1e6:.2f} us, "
              f"mpi4py Allreduce {m * 1e6:.2f} us: ember adds {(e - m) * 1e6:.2f} us", flush=True)
        for r in range(1, comm.Get_size()):
            comm.send(None, dest=r, tag=98)
    else:
        while not comm.Iprobe(source=0, tag=98):
            time.sleep(0.005)
        comm.recv(source=0, tag=98)
    dist.destroy_process_group(solo)


def _mlp():
    return nn.Sequential(nn.Linear(512, 1024), nn.Tanh(), nn.Linear(1024, 1024), nn.Tanh(),
                         nn.Linear(1024, 512))


def _step(model, x, y):
    model.zero_grad()
    ((model(x) - y) ** 2).mean().backward()


def _timed(fn, repeat):
    out = []
    for _ in range(repeat):
        s = time.perf_counter()
        fn()
        out.append(time.perf_counter() - s)
    return statistics.median(out)


def bench_ddp(repeat, comm, rank, size):
    ember.manual_seed(0)
    x, y = ember.randn(64, 512), ember.randn(64, 512)
    xg, yg = ember.randn(64 * size, 512), ember.randn(64 * size, 512)
    # single process, on rank 0 while the others sleep (a blocking MPI wait would spin a core)
    if rank == 0:
        plain = _mlp()
        _step(plain, x, y)
        t1 = _timed(lambda: _step(plain, x, y), repeat)
        t1g = _timed(lambda: _step(plain, xg, yg), repeat)
        for r in range(1, size):
            comm.send((t1, t1g), dest=r, tag=99)
    else:
        while not comm.Iprobe(source=0, tag=99):
            time.sleep(0.005)
        t1, t1g = comm.recv(source=0, tag=99)
    comm.Barrier()
    nparams = sum(p.numel() for p in _mlp().parameters())
    grads = ember.zeros(nparams)
    dist.all_reduce(grads)
    t_comm = _timed(lambda: (comm.Barrier(), dist.all_reduce(grads)), repeat)
    if rank == 0:
        print(f"single process, 64 samples: step {t1 * 1e3:.1f} ms; {64 * size} samples: "
              f"{t1g * 1e3:.1f} ms; one blocking all_reduce of all {nparams * 4 / 1e6:.1f} MB of "
              f"gradients on {size} ranks: {t_comm * 1e3:.2f} ms")
    for label, cap in (("1 MiB buckets (overlap)", 1), ("one bucket (no overlap)", 1e4)):
        model = DDP(_mlp(), bucket_cap_mb=cap)
        waits = []
        finish = model._finish_backward

        def timed():
            s = time.perf_counter()
            finish()
            waits.append(time.perf_counter() - s)
        model._finish_backward = timed
        _step(model, x, y)
        comm.Barrier()
        steps = []
        waits.clear()
        for _ in range(repeat):
            s = time.perf_counter()
            _step(model, x, y)
            steps.append(time.perf_counter() - s)
        t, w = statistics.median(steps), statistics.median(waits)
        if rank == 0:
            print(f"DDP step, {label}: {len(model._buckets)} buckets, step {t * 1e3:.1f} ms, "
                  f"backward waits {w * 1e3:.2f} ms at its end; weak-scaling efficiency "
                  f"{t1 / t:.2f}, strong-scaling (global batch {64 * size}) "
                  f"{t1g / (size * t):.2f}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--sizes", default="1e3,1e5,1e6,4e6,1.6e7")
    ap.add_argument("--part", choices=("all", "allreduce", "ddp"), default="all")
    args = ap.parse_args()
    dist.init_process_group("mpi")
    rank, size = dist.get_rank(), dist.get_world_size()
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    if rank == 0:
        print(f"{size} ranks, load average {os.getloadavg()[0]:.2f}", flush=True)
    if args.part in ("all", "allreduce"):
        bench_wrapper(comm, rank)
        bench_all_reduce([float(s) for s in args.sizes.split(",")], args.repeat, comm, rank)
    if args.part in ("all", "ddp"):
        bench_ddp(args.repeat, comm, rank, size)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
