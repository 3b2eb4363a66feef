"""Lazy access to Numba: whether it is importable, its threading layer and thread count.

Numba is imported on first need only (never by ``import ember``). Unless ``NUMBA_THREADING_LAYER``
is set, and unless another part of the program launched Numba's threads first, parallel kernels
use the OpenMP layer with a short spin (``GOMP_SPINCOUNT=1000`` while the pool starts, unless the
variable is set). Measured on a 2-core machine, 2^20 float32 elements: the workqueue layer costs
about 130 us per launch (no gain over one thread); OpenMP's default spinning launches in 2 us but,
spinning next to OpenBLAS's pool, made a GEMM followed by a pointwise kernel 5x slower; a short
spin keeps the 2 us launches and leaves the cores to BLAS. When OpenMP is unavailable the
workqueue layer is used.
"""
import os
import threading

SPINCOUNT = "1000"
_numba = None
_checked = False


def _launch(numba):
    from numba.np.ufunc import parallel
    if parallel._is_initialized or os.environ.get("NUMBA_THREADING_LAYER"):
        return
    saved = os.environ.get("GOMP_SPINCOUNT")
    if saved is None:
        os.environ["GOMP_SPINCOUNT"] = SPINCOUNT
    try:
        numba.config.THREADING_LAYER = "omp"
        try:
            parallel._launch_threads()
        except ValueError:
            numba.config.THREADING_LAYER = "workqueue"
            parallel._launch_threads()
    finally:
        if saved is None:
            del os.environ["GOMP_SPINCOUNT"]


def numba_module():
    """The ``numba`` module with its thread pool started, or None when it cannot be imported."""
    global _numba, _checked
    if not _checked:
        _checked = True
        try:
            import numba
        except ImportError:
            numba = None
        if numba is not None:
            _launch(numba)
        _numba = numba
    return _numba


def has_compiler():
    """True when Numba is importable, so expressions run as compiled kernels."""
    return numba_module() is not None


_current = threading.local()


def sync_threads(n):
    """Use ``n`` threads (capped by ``NUMBA_NUM_THREADS``) in Numba's parallel loops launched from
    this Python thread (Numba's count is per thread); return the count used."""
    numba = numba_module()
    n = max(1, min(n, numba.config.NUMBA_NUM_THREADS))
    if getattr(_current, "n", None) != n:
        numba.set_num_threads(n)
        numba.set_parallel_chunksize(1)  # prange iterations are taken dynamically, one at a time
        _current.n = n
    return n
