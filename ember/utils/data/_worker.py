"""What runs inside a DataLoader worker process, and the wire format between it and the loader.

A worker gets ``(task, index)`` messages on its index queue, fetches and collates the batch
(``_MapFetcher`` / ``_IterableFetcher``, the same code the single-process loader runs) and
sends it back on its own result pipe. The loader's process and its workers trust each other:
results are pickled (``_dumps``: protocol 5, Tensors reduced to their ndarrays) and unpickled on
the other side, which can run code, so the pipe carries only what the loader's own children
wrote. NumPy arrays travel as out-of-band buffers written straight from the array's memory to
the pipe and read straight into the memory the received array uses (no copy through a pickle
string on either side).
"""
import io
import os
import pickle
import queue
import random
import struct
import sys
import threading
import traceback
from dataclasses import dataclass

import numpy as np

from ember.errors import EmberKeyError, EmberRuntimeError, ember_class
from ember.tensor import Tensor

_POLL_S = 1.0  # how often an idle worker checks that its loader process is still there


@dataclass(frozen=True)
class WorkerInfo:
    """What ``get_worker_info()`` returns inside a worker: ``id`` (0 .. num_workers - 1),
    ``num_workers``, ``seed`` (this worker's seed, ``base_seed + id``), ``dataset`` (this
    process's copy of the dataset); ``rng`` (None) and ``worker_method`` as torch's."""

    id: int
    num_workers: int
    seed: int
    dataset: object
    rng: object = None
    worker_method: str = "multiprocessing"


_worker_info = None


def get_worker_info():
    """The ``WorkerInfo`` of the DataLoader worker this runs in; None in the loader's process."""
    return _worker_info


# ---------------------------------------------------------------------------- fetching
class _MapFetcher:
    """``fetch(indices)``: the collated samples of a map-style dataset."""

    def __init__(self, dataset, auto_collation, collate_fn, drop_last, fast_tensor):
        self.dataset, self.auto_collation, self.collate_fn = dataset, auto_collation, collate_fn
        self.fast_tensor = fast_tensor

    def fetch(self, index):
        ds = self.dataset
        if not self.auto_collation:
            return self.collate_fn(ds[index])
        if self.fast_tensor:  # TensorDataset + default_collate: one gather per tensor
            idx = np.asarray(index, np.int64)
            return [Tensor._make(t._data[idx]) for t in ds.tensors]   # a list, as the collate
        return self.collate_fn([ds[i] for i in index])


class _IterableFetcher:
    """``fetch(batch)``: the next ``len(batch)`` items (one item without auto-collation) of an
    iterator over the dataset, collated; StopIteration when it is exhausted."""

    def __init__(self, dataset, auto_collation, collate_fn, drop_last, fast_tensor=False):
        self.it = iter(dataset)
        self.auto_collation, self.collate_fn, self.drop_last = auto_collation, collate_fn, drop_last
        self.ended = False

    def fetch(self, index):
        if self.ended:
            raise StopIteration
        if not self.auto_collation:
            return self.collate_fn(next(self.it))
        data = []
        for _ in index:
            try:
                data.append(next(self.it))
            except StopIteration:
                self.ended = True
                break
        if not data or (self.drop_last and len(data) < len(index)):
            raise StopIteration
        return self.collate_fn(data)


def make_fetcher(iterable, *args):
    return (_IterableFetcher if iterable else _MapFetcher)(*args)


# ---------------------------------------------------------------------------- wire format
def _rebuild_tensor(array, requires_grad, cls):
    t = Tensor._make(array)
    if cls is not None:
        t = cls._from_tensor(t)
    if requires_grad:
        t.requires_grad_(True)
    return t


class _Pickler(pickle.Pickler):
    """Pickles Tensors as their ndarray (ember Tensors refuse ordinary pickling)."""

    def reducer_override(self, obj):
        if isinstance(obj, Tensor):
            if obj.grad_fn is not None and obj.requires_grad:
                raise EmberRuntimeError("DataLoader: a batch holds a non-leaf tensor that "
                                        "requires grad; detach it in the dataset or collate_fn")
            cls = None if type(obj) is Tensor or not hasattr(type(obj), "_from_tensor") \
                else type(obj)
            return _rebuild_tensor, (obj._data, obj.requires_grad, cls)
        return NotImplemented


def _dumps(obj, buffers=None):
    """Pickle ``obj`` (protocol 5); contiguous arrays go to ``buffers`` when a list is given."""
    f = io.BytesIO()
    _Pickler(f, protocol=5, buffer_callback=None if buffers is None else buffers.append).dump(obj)
    return f.getvalue()


_LEN = struct.Struct("<Q")


def _frame(kind, task, payload=None):
    """The parts to write for one message: its header, then the raw out-of-band buffers."""
    buffers = []
    body = _dumps(payload, buffers) if kind == "data" else payload
    raws = [b.raw() for b in buffers]
    header = pickle.dumps((kind, task, body, [r.nbytes for r in raws]), protocol=5)
    return [_LEN.pack(len(header)) + header] + raws


def _write_all(fd, parts):
    for part in parts:
        view = memoryview(part).cast("B")
        while view.nbytes:
            view = view[os.write(fd, view):]


class WorkerExited(Exception):
    """The worker's end of the result pipe closed (it exited or was killed)."""


def _read_exact(fd, n):
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = os.readv(fd, [view[got:]])
        if k == 0:
            raise WorkerExited
        got += k
    return buf


def read_message(fd):
    """``(kind, task, payload)`` of the next message on the result pipe ``fd`` (blocking)."""
    (size,) = _LEN.unpack(_read_exact(fd, _LEN.size))
    kind, task, body, sizes = pickle.loads(_read_exact(fd, size))
    if kind != "data":
        return kind, task, body
    buffers = [_read_exact(fd, s) for s in sizes]
    return kind, task, pickle.loads(body, buffers=buffers)


class _Sender:
    """Writes messages to the result pipe from a thread, so the worker fetches its next batch
    while the loader has not read the last one yet."""

    def __init__(self, fd):
        self.fd, self.q = fd, queue.SimpleQueue()
        self.thread = threading.Thread(target=self._run, daemon=True, name="ember_data_sender")
        self.thread.start()

    def _run(self):
        while True:
            parts = self.q.get()
            if parts is None:
                return
            try:
                _write_all(self.fd, parts)
            except OSError:  # the loader closed its end
                return

    def send(self, kind, task, payload=None):
        self.q.put(_frame(kind, task, payload))

    def close(self, flush):
        self.q.put(None)
        if flush:
            self.thread.join(timeout=10)


# ---------------------------------------------------------------------------- the worker
class Resume:
    """Sent to persistent workers at the start of a new epoch."""


def _seed_worker(base_seed, worker_id):
    """Seed Python's ``random``, ember's default generator and NumPy's global RNG as torch
    seeds its workers (NumPy from a SeedSequence of (worker_id, base_seed), as torch does)."""
    from ember import random as ember_random
    seed = base_seed + worker_id
    random.seed(seed)
    ember_random.manual_seed(seed)
    np.random.seed(np.random.SeedSequence(
        [worker_id, base_seed & 0xFFFF_FFFF, base_seed >> 32, 0]).generate_state(4))
    return seed


def _error_text():
    """(exception class name, name of the ember error class to raise, traceback text) of the
    exception being handled."""
    exc = sys.exc_info()[1]
    cls = EmberKeyError if isinstance(exc, KeyError) else ember_class(exc)
    return type(exc).__name__, cls.__name__, traceback.format_exc()


def worker_loop(spec, index_queue, result_conn, done_event, worker_id, num_workers, base_seed):
    """A worker process's main loop (see the module docstring)."""
    global _worker_info
    sender = _Sender(result_conn.fileno())
    try:
        try:
            if isinstance(spec, bytes):  # 'spawn' / 'forkserver': sent pickled
                spec = pickle.loads(spec)
        except Exception:  # e.g. the dataset's class cannot be imported here
            sender.send("error", None, _error_text())
            return
        iterable, dataset, auto_collation, collate_fn, drop_last, fast, init_fn = spec
        # one thread per worker, as torch's workers (ember's loops and BLAS): N workers with
        # the parent's count each would oversubscribe the cores
        from ember.kernels.runtime.threads import set_num_threads
        set_num_threads(1)
        seed = _seed_worker(base_seed, worker_id)
        _worker_info = WorkerInfo(worker_id, num_workers, seed, dataset)
        args = (dataset, auto_collation, collate_fn, drop_last, fast)
        init_error, fetcher = None, None
        try:
            if init_fn is not None:
                init_fn(worker_id)
            fetcher = make_fetcher(iterable, *args)
        except Exception:
            init_error = _error_text()
        ended = False  # an IterableDataset worker whose iterator is exhausted
        parent = os.getppid()
        while True:
            try:
                msg = index_queue.get(timeout=_POLL_S)
            except queue.Empty:
                if os.getppid() != parent:
                    break
                continue
            if msg is None:
                break
            if isinstance(msg, Resume):
                ended = False
                if init_error is None:
                    try:
                        fetcher = make_fetcher(iterable, *args)
                    except Exception:
                        init_error = _error_text()
                sender.send("resumed", None)
                continue
            if done_event.is_set() or ended:
                continue
            task, index = msg
            if init_error is not None:  # worker_init_fn (or iter(dataset)) failed
                sender.send("error", task, init_error)
                continue
            try:
                sender.send("data", task, fetcher.fetch(index))
            except StopIteration:
                if not iterable:
                    sender.send("error", task, _error_text())
                    continue
                ended = True
                sender.send("stop", task)
            except Exception:
                sender.send("error", task, _error_text())
    except KeyboardInterrupt:  # the loader's process gets it too and shuts workers down
        pass
    finally:
        sender.close(flush=not done_event.is_set())
