"""ember's own parallel loop for the convolution engine: independent chunks on a small thread pool.

Why not OpenBLAS's threads: a threaded OpenBLAS GEMM advances its threads in lock step (one
spin-wait hand-off per block of the reduction). On this 2-core machine shared with other processes
that also run OpenBLAS, one descheduled thread stalls the other at every hand-off: a weight-gradient
GEMM (32 x 25088) @ (25088 x 75) took 456 ms with 2 OpenBLAS threads against 11 ms with one (and
LeNet's second-conv weight gradient 232 ms against 0.8 ms); see docs/conv.md. So while a convolution
runs (``policy(own=True)``), OpenBLAS is held at one thread and the work is split here into
``working_threads()`` independent chunks (images, GEMMs of a batch, output columns, or halves of a
long reduction), each a single-threaded BLAS call or a Numba ``nogil`` kernel, run by the caller and
pool workers with no synchronisation until the end: a straggler costs only its own share.

Chunks are claimed one at a time by the calling thread and ``working_threads() - 1`` pool workers
(see ``run``). Workspace buffers are per thread (``workspace``), so a chunk uses the buffers of the
thread that runs it. Results do not depend on the schedule; they depend on the thread count only
through reduction splits (partial sums added in chunk order, so a given thread count always gives
the same bits).
"""
import threading

import numpy as np

from ember.kernels.runtime import threadpool
from ember.kernels.runtime.threads import (FREE, LIMITED, blas_controllers, blas_mode,
                                           working_threads)

# Directions run with ember's own chunks (BLAS at one thread); the others call BLAS with its own
# threads and do not chunk. See the module docstring and docs/conv.md for the measurements.
OWN_THREADS_DIRECTIONS = ("weight",)
# Algorithms run with ember's own chunks in every direction: Winograd's Numba transforms are split
# over ember's threads only under this policy, and its 36 small GEMMs split by batch entry beat
# OpenBLAS's threads on them (8x64x56x56 forward 9.7 vs 14.0 ms, input 9.9 vs 14.0 ms).
OWN_THREADS_ALGORITHMS = ("winograd", "direct", "thin")
CHUNKS_PER_THREAD = 4
MIN_FLOPS = 4e6      # below this a GEMM runs inline: splitting costs more than it saves
MIN_COLUMNS = 128    # narrowest column block worth a chunk of its own

_mode = threading.local()


def threads():
    """Number of chunks to split work into: the thread count read when the outermost ``policy``
    of this call was entered (so one call never mixes two counts), else ember's setting."""
    n = getattr(_mode, "n", None)
    return n if n is not None else max(1, working_threads())


def _own():
    return getattr(_mode, "own", False)


class policy:
    """Context manager for one convolution call: ``own=True`` holds the BLAS lock in the
    ``LIMITED`` mode (every BLAS at one thread, ``ember.kernels.runtime.threads``) and lets
    ``run``/``matmul`` split work over ember's threads; ``own=False`` holds it in the ``FREE``
    mode and runs everything inline, leaving BLAS threading to BLAS. A nested call keeps the
    mode already held (an own-threads request inside a ``FREE`` call runs inline), and the
    thread count of the outermost call."""

    def __init__(self, own):
        self.own = bool(own)

    def __enter__(self):
        self.saved = (_own(), getattr(_mode, "n", None))
        self.hold = blas_mode(LIMITED if self.own else FREE)
        granted = self.hold.__enter__()
        _mode.own = self.own and granted == LIMITED
        if self.saved[1] is None:
            _mode.n = max(1, working_threads())
        return self

    def __exit__(self, *exc):
        _mode.own, _mode.n = self.saved
        self.hold.__exit__(*exc)
        return False


def run(fn, n_items, min_per_chunk=1):
    """Call ``fn(lo, hi)`` over contiguous chunks covering range(n_items); return the results in
    chunk order.

    There are up to CHUNKS_PER_THREAD chunks per thread, claimed one at a time by the caller and
    the pool workers, and the caller waits for the chunks, not for the workers: a worker that the
    OS has not scheduled yet (another process holds its core) simply finds no work left, so a busy
    core costs at most the chunk in flight on it. The chunk bounds do not depend on which thread
    runs which chunk, so results are the same bits on every run. Called from inside a chunk (or
    with one thread) it runs inline as one chunk.
    """
    n = threads()
    parts = min(n * CHUNKS_PER_THREAD, max(1, n_items // max(1, min_per_chunk)))
    if not _own():
        return [fn(0, n_items)]
    return threadpool.run_chunks(fn, n_items, parts, n)


def parallel_possible():
    """True when ``run`` would actually fan out (more than one thread, not inside a chunk)."""
    return _own() and threads() > 1 and not threadpool.inside()


def _controllers():
    """threadpoolctl controllers of the BLAS libraries (``threads.blas_controllers``)."""
    return blas_controllers()


def _axis_view(a, out_ndim, axis, lo, hi):
    """Slice ``a`` along the axis aligned (NumPy broadcasting) with ``out``'s ``axis``."""
    k = a.ndim - out_ndim + axis
    if k < 0 or a.shape[k] == 1:
        return a
    idx = [slice(None)] * a.ndim
    idx[k] = slice(lo, hi)
    return a[tuple(idx)]


def _split_on_tbb(a, b, out, n):
    """One product (no batch) as ``n`` blocks of output rows, or of columns where there are too
    few rows, on the TBB threads (``linalg.split_into``); False where ``run``'s pool splits it.
    ms, 2-core Xeon, one image's 1x1 layers, pool (columns, 4 chunks a thread) -> TBB
    (rows, one block a thread), OpenBLAS's own two threads: 512x128 @ 128x784 0.58 -> 0.34
    (0.42), 2048x512 @ 512x49 0.65 -> 0.48 (0.50), 256x1024 @ 1024x196 0.57 -> 0.40 (0.37)."""
    M, Nc = out.shape[-2], out.shape[-1]
    by_rows = M >= n * MIN_COLUMNS
    if not by_rows and Nc < n * MIN_COLUMNS:
        return False
    from ember.kernels import linalg
    return linalg.split_into(a.reshape(a.shape[-2:]), b.reshape(b.shape[-2:]),
                             out.reshape(M, Nc), by_rows, n)


def matmul(a, b, out):
    """``np.matmul(a, b, out=out)`` split into independent chunks (see the module docstring).

    Split axis: the first batch axis with at least ``threads()`` entries, else the output's
    columns or rows when wide enough, else the reduction (partial products summed in order).
    """
    n = threads()
    M, Nc, Kd = out.shape[-2], out.shape[-1], a.shape[-1]
    if not parallel_possible() or 2.0 * out.size * Kd < MIN_FLOPS:
        np.matmul(a, b, out=out)
        return out
    nd = out.ndim
    for axis in range(nd - 2):
        if out.shape[axis] >= n:
            def part(lo, hi, axis=axis):
                np.matmul(_axis_view(a, nd, axis, lo, hi), _axis_view(b, nd, axis, lo, hi),
                          out=_axis_view(out, nd, axis, lo, hi))
            run(part, out.shape[axis])
            return out
    if out.size == M * Nc and _split_on_tbb(a, b, out, n):
        return out
    if Nc >= n * MIN_COLUMNS and Nc >= M:
        def cols(lo, hi):
            np.matmul(a, b[..., lo:hi], out=out[..., lo:hi])
        run(cols, Nc, MIN_COLUMNS)
    elif M >= n * MIN_COLUMNS:
        def rows(lo, hi):
            np.matmul(a[..., lo:hi, :], b, out=out[..., lo:hi, :])
        run(rows, M, MIN_COLUMNS)
    elif Kd >= n * 4 * max(M, Nc):
        def red(lo, hi):
            return np.matmul(a[..., lo:hi], b[..., lo:hi, :])
        parts = run(red, Kd, 256)
        np.add(parts[0], parts[1], out=out) if len(parts) > 1 else np.copyto(out, parts[0])
        for p in parts[2:]:
            out += p
    else:
        np.matmul(a, b, out=out)
    return out
