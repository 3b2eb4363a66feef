"""The loader's side of multi-process loading: ``MultiProcessingIter`` starts the workers, sends
them batch indices round-robin, ``prefetch_factor`` batches in flight per worker, and returns
the batches in order (see ``_worker`` for what a worker does and the wire format).

Every worker has an index queue (loader -> worker) and a result pipe (worker -> loader). The
loader waits on the result pipes and on the workers' process sentinels together, so a worker
that dies (a crash, a signal, the out-of-memory killer) is an error at once, never a hang.
Shutting down (end of the epoch, an error, the iterator dropped, interpreter exit) sets the
done event, sends each worker ``None``, drains their pipes until they exit, and terminates
what has not exited after ``_JOIN_S`` seconds; every worker is joined, so none is left a zombie.
"""
import atexit
import itertools
import multiprocessing
import os
import signal
import time
import weakref
from multiprocessing.connection import wait

from ember import errors
from ember.errors import EmberRuntimeError
from ember.utils.data import _worker

_JOIN_S = 5.0
_live = weakref.WeakSet()


@atexit.register
def _shutdown_all():
    for it in list(_live):
        it._shutdown_workers()


_ERRORS = {c.__name__: c for c in (errors.EmberRuntimeError, errors.EmberTypeError,
                                   errors.EmberValueError, errors.EmberIndexError,
                                   errors.EmberKeyError, errors.EmberOverflowError,
                                   errors.UnsupportedError)}


def _pickled_spec(spec, method):
    try:
        return _worker._dumps(spec)
    except Exception as e:
        raise EmberRuntimeError(
            f"DataLoader: the '{method}' start method pickles the dataset, collate_fn and "
            f"worker_init_fn to send them to each worker, and that failed ({type(e).__name__}: "
            f"{e}); define them at module level so they can be imported, or use "
            "multiprocessing_context='fork'") from e


class MultiProcessingIter:
    """One pass (or, with ``persistent_workers``, every pass) over a DataLoader with
    ``num_workers > 0``. Holds no reference to the loader, so dropping the loader (or this
    iterator) shuts the workers down."""

    def __init__(self, loader, base_seed):
        self._shutdown = True  # nothing to shut down yet
        self._workers, self._queues, self._conns = [], [], []
        n = self._num_workers = loader.num_workers
        self._prefetch = loader.prefetch_factor
        self._in_order = loader.in_order
        self._timeout = loader.timeout
        self._persistent = loader.persistent_workers
        self._index_sampler = loader._index_sampler
        ctx = loader.multiprocessing_context or multiprocessing.get_context()
        spec = (loader._iterable, loader.dataset, bool(loader._auto_collation), loader.collate_fn,
                loader.drop_last, loader._fast_tensor(), loader.worker_init_fn)
        method = ctx.get_start_method()
        if method != "fork":  # fork children inherit the objects; other methods get a pickle
            spec = _pickled_spec(spec, method)
        self._done = ctx.Event()
        self._shutdown = False
        _live.add(self)
        try:
            for i in range(n):
                q = ctx.Queue()
                q.cancel_join_thread()
                self._queues.append(q)
                r, w = ctx.Pipe(duplex=False)
                self._conns.append(r)
                p = ctx.Process(target=_worker.worker_loop, daemon=True,
                                name=f"ember_data_worker_{i}",
                                args=(spec, q, w, self._done, i, n, base_seed))
                p.start()
                w.close()  # the worker holds the only write end: EOF there means it is gone
                self._workers.append(p)
            self._alive = [True] * n  # workers not (yet) told to exit
            self._reset(first=True)
        except BaseException:
            self._shutdown_workers()
            raise

    @property
    def worker_pids(self):
        """The worker processes' ids."""
        return [p.pid for p in self._workers]

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._index_sampler)

    def _reset(self, first=False):
        """Start an epoch: a new pass of the sampler; persistent workers are told to restart
        (an IterableDataset is iterated again) and what they still sent of the last epoch is
        dropped."""
        n = self._num_workers
        self._sampler_iter = iter(self._index_sampler)
        self._send_idx = self._rcvd_idx = 0
        self._tasks = {}  # task -> [worker] while pending, [worker, (kind, payload)] when received
        self._active = [True] * n  # workers that may get new tasks this epoch
        self._worker_tasks = [0] * n
        self._cycle = itertools.cycle(range(n))
        if not first:
            for q in self._queues:
                q.put(_worker.Resume())
            waiting = set(range(n))
            while waiting:
                w, kind, task, payload = self._recv()
                if kind == "resumed":
                    waiting.discard(w)
                elif kind == "error" and task is None:
                    self._raise_worker_error(w, payload)
        for _ in range(self._prefetch * n):
            self._try_put_index()

    def _try_put_index(self):
        try:
            index = next(self._sampler_iter)
        except StopIteration:
            return
        active = [w for w in range(self._num_workers) if self._active[w]]
        if not active:
            return
        cap = self._prefetch * self._num_workers // len(active)
        for _ in range(self._num_workers):  # the next active worker (with room, out of order)
            w = next(self._cycle)
            if self._active[w] and (self._in_order or self._worker_tasks[w] < cap):
                break
        else:
            w = active[0]
        self._queues[w].put((self._send_idx, index))
        self._tasks[self._send_idx] = [w]
        self._worker_tasks[w] += 1
        self._send_idx += 1

    def __next__(self):
        if self._shutdown:
            raise StopIteration
        while True:
            while self._rcvd_idx < self._send_idx:
                info = self._tasks.get(self._rcvd_idx)
                if info is not None:
                    if len(info) == 2 or self._active[info[0]]:
                        break
                    del self._tasks[self._rcvd_idx]  # sent to a worker whose iterable ended
                self._rcvd_idx += 1
            else:
                if not self._persistent:
                    self._shutdown_workers()
                raise StopIteration
            if len(info) == 2:
                del self._tasks[self._rcvd_idx]
                self._rcvd_idx += 1
                return self._process(*info)
            w, kind, task, payload = self._recv()
            if task is None:
                if kind == "error":
                    self._raise_worker_error(w, payload)
                continue
            if kind == "stop":  # this worker's IterableDataset copy is exhausted
                self._active[w] = False
                if not self._persistent:
                    self._queues[w].put(None)
                    self._alive[w] = False
                self._try_put_index()
                continue
            if task == self._rcvd_idx or not self._in_order:
                del self._tasks[task]
                if task == self._rcvd_idx:
                    self._rcvd_idx += 1
                return self._process(w, (kind, payload))
            self._tasks[task].append((kind, payload))

    def _process(self, w, msg):
        self._worker_tasks[w] -= 1
        kind, payload = msg
        if kind == "error":
            self._raise_worker_error(w, payload)
        self._try_put_index()
        return payload

    def _recv(self):
        """``(worker, kind, task, payload)`` of the next message from any worker; raises when
        a worker died or ``timeout`` passed first."""
        deadline = None if self._timeout <= 0 else time.monotonic() + self._timeout
        while True:
            conns = {self._conns[i]: i for i in range(self._num_workers) if self._alive[i]}
            sentinels = {self._workers[i].sentinel: i for i in conns.values()}
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready = wait(list(conns) + list(sentinels), left)
            if not ready:
                self._shutdown_workers()
                raise EmberRuntimeError(f"DataLoader: timed out after {self._timeout} seconds "
                                        "waiting for a batch from the workers")
            for r in ready:
                if r in conns:
                    return self._read(conns[r])
            i = sentinels[ready[0]]
            if self._conns[i].poll(0):  # sent something before it exited
                return self._read(i)
            self._raise_worker_died(i)

    def _read(self, i):
        try:
            return (i, *_worker.read_message(self._conns[i].fileno()))
        except _worker.WorkerExited:
            self._raise_worker_died(i)

    def _raise_worker_died(self, i):
        p = self._workers[i]
        p.join(timeout=1.0)
        code = p.exitcode
        if code is not None and code < 0:
            try:
                how = f"was killed by signal {signal.Signals(-code).name}"
            except ValueError:
                how = f"was killed by signal {-code}"
        else:
            how = f"exited unexpectedly with exit code {code}"
        self._shutdown_workers()
        raise EmberRuntimeError(f"DataLoader: worker {i} (pid {p.pid}) {how}; a crash in the "
                                "dataset's code, the out-of-memory killer or a kill can cause "
                                "this")

    def _raise_worker_error(self, w, payload):
        type_name, cls_name, text = payload
        pid = self._workers[w].pid
        self._shutdown_workers()
        raise _ERRORS.get(cls_name, EmberRuntimeError)(
            f"DataLoader: caught {type_name} in worker process {w} (pid {pid}).\n"
            f"Original {text}")

    def _shutdown_workers(self):
        """Stop and join every worker (idempotent)."""
        if self._shutdown:
            return
        self._shutdown = True
        _live.discard(self)
        try:
            self._done.set()
            for q in self._queues:
                try:
                    q.put(None)
                except (OSError, ValueError):
                    pass
            running = {p.sentinel: p for p in self._workers}
            pipes = {c: c.fileno() for c in self._conns if not c.closed}
            deadline = time.monotonic() + _JOIN_S
            while running and time.monotonic() < deadline:
                ready = wait(list(running) + list(pipes), deadline - time.monotonic())
                for r in ready:
                    if r in pipes:  # drain, so a worker blocked writing a batch can exit
                        try:
                            if not os.read(pipes[r], 1 << 20):
                                del pipes[r]
                        except OSError:
                            del pipes[r]
                    else:
                        running.pop(r).join(timeout=0.1)
        finally:
            for p in self._workers:
                if p.is_alive():
                    p.terminate()
                    p.join(timeout=1.0)
                if p.is_alive():
                    p.kill()
                    p.join(timeout=1.0)
            for c in self._conns:
                c.close()
            for q in self._queues:
                q.close()

    def __del__(self):
        self._shutdown_workers()
