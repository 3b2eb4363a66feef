"""ember's own parallel loop: independent chunks of a range on a small pool of Python threads.

Convolution chunks (GEMMs and Numba kernels) run here; compiled loops that need no Python between
chunks (pointwise kernels, the direct convolution, max pooling) run on Numba's TBB layer when it
is available (``ember.kernels.runtime.threads``) and here otherwise. Never an OpenMP pool:
OpenMP and OpenBLAS threads spin-wait when idle, and on a machine with few cores a spinning pool
next to another pool's working threads halves both (measured here: a GEMM followed by a Numba
OpenMP pointwise kernel 5-10x slower than the two alone). Pool workers here block on a queue
while idle, so they cost nothing between calls, but waking one costs ~100 us on this VM.

``run_chunks`` cuts ``range(n_items)`` into fixed chunks claimed one at a time by the calling
thread and the workers (dynamic scheduling): a worker whose core is busy elsewhere simply claims
fewer chunks, and the caller waits for the chunks, not for the workers. Chunk bounds depend only
on ``n_items`` and the part count, never on the schedule, so results are the same bits each run.
The chunk function must release the GIL for the threads to overlap (NumPy's BLAS calls and
``nogil`` Numba kernels do).
"""
import os
import threading

from ember.kernels.runtime.fpstate import current as _fp_current, enter as _fp_enter, leave as _fp_leave

_pool = None
_pool_size = 0
_pool_lock = threading.Lock()
_inside = threading.local()


def _after_fork_in_child():
    """A forked child has none of the workers: it starts a pool of its own on its first parallel
    call (the lock may have been held by a thread that does not exist there)."""
    global _pool, _pool_size, _pool_lock
    _pool, _pool_size, _pool_lock = None, 0, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def inside():
    """True in a pool worker or inside a chunk: nested parallel loops then run inline."""
    return _inside.__dict__.get("flag", False)   # (getattr with a default is 10x slower)


def _submit(fn, workers):
    """Queue ``fn`` ``workers`` times on a pool of at least ``workers`` threads.

    A pool too small for the call is replaced by a larger one; the old one is shut down without
    waiting, which lets the work already queued on it run to the end. Pool swap and submission
    happen under one lock, so no call ever submits to a pool that was shut down."""
    from concurrent.futures import ThreadPoolExecutor  # imported on first parallel call
    global _pool, _pool_size
    with _pool_lock:
        if _pool is None or _pool_size < workers:
            old = _pool
            _pool = ThreadPoolExecutor(workers, thread_name_prefix="ember")
            _pool_size = workers
            if old is not None:
                old.shutdown(wait=False)
        for _ in range(workers):
            _pool.submit(fn)


class _Job:
    """Chunks handed out one at a time and a count of the unfinished ones."""

    __slots__ = ("lock", "next", "parts", "remaining", "finished", "error")

    def __init__(self, parts):
        self.lock = threading.Lock()
        self.next = 0
        self.parts = parts
        self.remaining = parts
        self.finished = threading.Event()
        self.error = None

    def claim(self):
        with self.lock:
            if self.next >= self.parts:
                return None
            self.next += 1
            return self.next - 1

    def done(self, error=None):
        with self.lock:
            self.remaining -= 1
            if error is not None and self.error is None:
                self.error = error
                self.remaining -= self.parts - self.next   # nobody will claim the rest
                self.next = self.parts
            if self.remaining == 0:
                self.finished.set()


def run_chunks(fn, n_items, parts, n_threads):
    """Call ``fn(lo, hi)`` over ``parts`` contiguous chunks covering ``range(n_items)`` on
    ``n_threads`` threads (the caller and ``n_threads - 1`` workers); return the results in chunk
    order. Runs inline as one chunk when ``parts`` or ``n_threads`` is 1 or when called from
    inside a chunk. An exception from a chunk is re-raised in the caller once the chunks in
    flight have finished."""
    if n_threads <= 1 or parts <= 1 or _inside.__dict__.get("flag", False):
        return [fn(0, n_items)]
    bounds = [n_items * i // parts for i in range(parts + 1)]
    results = [None] * parts
    job = _Job(parts)

    def work():
        _inside.flag = True
        try:
            while True:
                i = job.claim()
                if i is None:
                    return
                try:
                    results[i] = fn(bounds[i], bounds[i + 1])
                except BaseException as e:  # re-raised by the caller
                    job.done(e)
                else:
                    job.done()
        finally:
            _inside.flag = False

    state = _fp_current()

    def worker():   # NumPy's error state is per thread: the caller's (a kernel's "ignore")
        token = _fp_enter(state)
        try:
            work()
        finally:
            _fp_leave(token)

    _submit(worker, n_threads - 1)
    work()
    job.finished.wait()
    if job.error is not None:
        raise job.error
    return results


def driver_runs(fn, n_items, parts, n_threads):
    """``fn(lo, hi)`` over the ``parts`` runs a ``prange`` driver cuts ``n_items`` into
    (``nbhelpers.run_bounds``), on ``n_threads`` threads: what a call runs while its driver (a
    kernel's ``*_parallel``) compiles, the one-thread kernel it calls being ready; the results in
    run order, None for an empty run (which the driver skips)."""
    per = -(-n_items // parts)

    def chunk(r0, r1):
        return [fn(r * per, min(n_items, r * per + per)) if r * per < n_items else None
                for r in range(r0, r1)]
    return [out for part in run_chunks(chunk, parts, parts, n_threads) for out in part]
