"""One thread setting for BLAS and ember's own parallel loops.

``set_num_threads`` limits OpenBLAS/MKL through threadpoolctl (imported lazily, optional).
Parallel loops of ember's own (``ember.kernels.threadpool``: convolution chunks and compiled
pointwise kernels) read ``get_num_threads``.
"""
import os

_CPU_COUNT = os.cpu_count() or 1
_num_threads = None
_blas_limiter = None


def get_num_threads():
    """Return the number of threads ember's kernels use (default: the machine's core count)."""
    if _num_threads is None:
        return _CPU_COUNT
    return _num_threads


def set_num_threads(n):
    """Set the thread count for BLAS and ember's parallel loops.

    Raises ValueError when ``n`` is not a positive integer.
    """
    global _num_threads, _blas_limiter
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_threads: expected a positive int, got {n!r}")
    _num_threads = n
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        threadpool_limits = None
    if threadpool_limits is not None:
        _blas_limiter = threadpool_limits(limits=n, user_api="blas")
