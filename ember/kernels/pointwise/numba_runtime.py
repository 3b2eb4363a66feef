"""Lazy access to Numba: whether it is importable, and which threads run parallel kernels.

Numba is imported on first need only (never by ``import ember``). Parallel pointwise kernels run
on Numba's TBB threading layer when the ``tbb`` package is installed (``parallel_layer() ==
"tbb"``), else as serial ``nogil`` kernels split over ember's own pool (``"pool"``). Measured on
the project's 2-core VM, bias+ReLU over 1e6 float32 elements: one thread 0.09 ms; TBB 0.05 ms;
ember's pool 0.17 ms (waking a blocked Python worker and handing it the GIL costs ~100 us here);
Numba's OpenMP layer 0.055 ms, but a GEMM followed by it took 8.0 ms instead of 0.84 (its
spinning workers next to OpenBLAS's), and the workqueue layer 0.22 ms. TBB's workers spin
briefly and then sleep, so they neither pay the wake-up on back-to-back calls nor fight
OpenBLAS's threads. ember starts the layer itself unless Numba's threads are already running
(then TBB is used only if it is the running layer) or ``NUMBA_THREADING_LAYER`` names another.

Starting Numba's threads is a setting of the whole process: Numba launches its threading layer
once, so the host program's own ``parallel=True`` Numba code then runs on TBB too (TBB is also
Numba's own first choice when it can load it). ``set_parallel_layer("pool")`` before the first
parallel kernel, or ``EMBER_THREADING_LAYER=pool``, keeps ember from starting them: its parallel
kernels then run on ember's pool (see docs/process.md).
"""
import ctypes
import os
import sys
import threading

_numba = None
_checked = False
_layer = None
_LAYERS = ("tbb", "pool")
_requested = os.environ.get("EMBER_THREADING_LAYER", "tbb")
_lock = threading.Lock()
_current = threading.local()


def numba_module():
    """The ``numba`` module, or None when it cannot be imported."""
    global _numba, _checked
    if not _checked:
        _checked = True
        try:
            import numba
        except ImportError:
            numba = None
        _numba = numba
    return _numba


def has_compiler():
    """True when Numba is importable, so expressions run as compiled kernels."""
    return numba_module() is not None


def _preload_tbb():
    """Load the TBB runtime of the ``tbb`` wheel (installed in ``sys.prefix/lib``, off the loader
    path in a virtual environment) so Numba's TBB extension can link to it."""
    for name in ("libtbb.so.12", "libtbb.12.dylib"):
        path = os.path.join(sys.prefix, "lib", name)
        if os.path.exists(path):
            try:
                ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            except OSError:
                pass
            return


def _start():
    numba = numba_module()
    if numba is None or _requested == "pool":
        return "pool"
    from numba.np.ufunc import parallel
    if parallel._is_initialized:
        return "tbb" if numba.threading_layer() == "tbb" else "pool"
    if os.environ.get("NUMBA_THREADING_LAYER", "tbb") != "tbb":
        return "pool"
    _preload_tbb()
    try:
        from numba.np.ufunc import tbbpool  # noqa: F401  (fails without a usable TBB)
    except ImportError:
        return "pool"
    saved = numba.config.THREADING_LAYER
    numba.config.THREADING_LAYER = "tbb"
    try:
        parallel._launch_threads()
    except (ValueError, ImportError, OSError):
        numba.config.THREADING_LAYER = saved
        return "pool"
    return "tbb" if numba.threading_layer() == "tbb" else "pool"


def parallel_layer():
    """``"tbb"`` when parallel kernels run on Numba's TBB layer, else ``"pool"`` (ember's own
    thread pool running serial kernels). Decided once per process."""
    global _layer
    if _layer is None:
        with _lock:
            if _layer is None:
                _layer = _start()
    return _layer


def set_parallel_layer(name):
    """Run ember's parallel compiled kernels on Numba's TBB layer (``"tbb"``, the default unless
    ``EMBER_THREADING_LAYER=pool``; ember starts Numba's threads for it) or on ember's own pool
    (``"pool"``: ember never starts Numba's threads). Threads Numba has started stay running;
    ``"tbb"`` then applies only if TBB is the layer they run. Raises ValueError for another name."""
    global _layer, _requested
    if name not in _LAYERS:
        raise ValueError(f"set_parallel_layer: expected one of {_LAYERS}, got {name!r}")
    with _lock:
        _requested, _layer = name, None


def sync_threads(n):
    """Use ``n`` threads (capped by ``NUMBA_NUM_THREADS``) in Numba's parallel loops launched from
    this Python thread (Numba's count is per thread); return the count used."""
    numba = numba_module()
    n = max(1, min(n, numba.config.NUMBA_NUM_THREADS))
    if getattr(_current, "n", None) != n:
        numba.set_num_threads(n)
        _current.n = n
    return n


def tbb_parts(n_items, n_threads, per_thread=4):
    """Runs of a ``prange`` over ``n_items`` independent items on Numba's TBB layer with
    ``n_threads`` threads (``per_thread`` runs each, so a late thread takes fewer), or 0 when
    that does not apply (TBB is not the layer, one thread or one item): then the caller splits
    the items over ember's pool instead."""
    if n_threads <= 1 or n_items <= 1 or parallel_layer() != "tbb":
        return 0
    n = sync_threads(n_threads)
    return min(n_items, per_thread * n) if n > 1 else 0
