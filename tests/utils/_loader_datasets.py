"""Datasets for the DataLoader worker tests (tests/utils/data/test_loader_iter.py and
test_worker.py), at module level so that 'spawn' workers can import them; map-style ones are
plain classes, so torch's DataLoader takes them too. ``worker_loader`` builds an ember DataLoader with
the tests' start method and a timeout."""
import multiprocessing
import os
import random
import signal
import time

import numpy as np

import ember
from ember.utils.data import DataLoader, IterableDataset, get_worker_info

# 'fork' where the platform has it (fast); test_spawn_* use 'spawn' explicitly
CTX = "fork" if "fork" in multiprocessing.get_all_start_methods() else None


class Squares:
    """Sample i: (float32 [i, i*i], i)."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return np.array([i, i * i], np.float32), i


def _worker_fields(info):
    return (info.id, info.num_workers, info.seed - info.id, type(info.dataset).__name__,
            info.dataset.n)


class WorkerTagged:
    """Sample i: i, then (id, num_workers, seed - id, dataset type, dataset.n) of the worker
    that read it, taken from ``get_worker_info`` (torch's or ember's, by ``lib``)."""

    def __init__(self, n, lib="ember"):
        self.n, self.lib = n, lib

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.lib == "torch":
            import torch.utils.data
            info = torch.utils.data.get_worker_info()
        else:
            info = get_worker_info()
        return (i,) + _worker_fields(info)


class RandomDraws:
    """Sample i: i, the worker's pid and seed, and one draw each from Python's random, NumPy's
    global RNG and ember's default generator."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return (i, os.getpid(), get_worker_info().seed, random.random(), float(np.random.rand()),
                float(ember.rand(()).item()))


class Pids:
    """Sample i: the pid of the process that read it."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return os.getpid()


class FailsAt:
    """Raises ValueError at index ``bad``."""

    def __init__(self, n, bad):
        self.n, self.bad = n, bad

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.bad:
            raise ValueError(f"sample {i} is unreadable")
        return os.getpid()


class KillsItselfAt(FailsAt):
    """Its worker kills itself with SIGKILL at index ``bad``."""

    def __getitem__(self, i):
        if i == self.bad:
            os.kill(os.getpid(), signal.SIGKILL)
        return os.getpid()


class SleepsAt(FailsAt):
    """Sleeps ``seconds`` at index ``bad``."""

    def __init__(self, n, bad, seconds):
        super().__init__(n, bad)
        self.seconds = seconds

    def __getitem__(self, i):
        if i == self.bad:
            time.sleep(self.seconds)
        return os.getpid()


INIT = []


def init_fn(worker_id):
    """A worker_init_fn: records the call in the worker's copy of INIT."""
    INIT.append(100 + worker_id)


class InitSeen:
    """Sample i: (i, how many init_fn calls the worker that read it saw, the last one's value)."""

    def __len__(self):
        return 6

    def __getitem__(self, i):
        return i, len(INIT), INIT[-1] if INIT else -1


def pid_collate(batch):
    """A collate_fn that says which process ran it."""
    return [int(b[1]) for b in batch], os.getpid()


def _shard(start, end, info):
    if info is None:
        return range(start, end)
    per = -(-(end - start) // info.num_workers)
    lo = start + info.id * per
    return range(lo, min(lo + per, end))


class ShardedRange(IterableDataset):
    """range(start, end), split between workers with get_worker_info (torch's docs' example)."""

    def __init__(self, start, end, shard=True):
        self.start, self.end, self.shard = start, end, shard

    def __iter__(self):
        info = get_worker_info() if self.shard else None
        return iter(_shard(self.start, self.end, info))


def torch_sharded_range(start, end, shard=True):
    """ShardedRange as a torch IterableDataset (torch imported only when asked: 'spawn'
    workers import this module)."""
    import torch.utils.data as td

    class TorchShardedRange(td.IterableDataset):
        def __iter__(self):
            return iter(_shard(start, end, td.get_worker_info() if shard else None))
    return TorchShardedRange()


def _unpickle_elsewhere(pid):
    if os.getpid() != pid:
        raise ImportError("this dataset cannot be loaded in another process")
    return LoadsOnlyHere()


class LoadsOnlyHere(Squares):
    """Unpickling it in another process fails (as a class a 'spawn' worker cannot import)."""

    def __init__(self):
        super().__init__(4)

    def __reduce__(self):
        return _unpickle_elsewhere, (os.getpid(),)


class ThreadCounts:
    """Sample i: the thread count (``get_num_threads``) of the worker that reads it, torch's or
    ember's by ``lib``."""

    def __init__(self, n, lib="ember"):
        self.n, self.lib = n, lib

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.lib == "torch":
            import torch
            return torch.get_num_threads()
        return ember.get_num_threads()


def worker_loader(ds, **kw):
    kw.setdefault("multiprocessing_context", CTX)
    kw.setdefault("timeout", 30)  # a stuck worker fails the test with an error, not a hang
    return DataLoader(ds, **kw)


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
