"""Lazy access to Numba: whether it is importable.

Numba is imported on first need only (never by ``import ember``). Compiled pointwise kernels are
serial ``nogil`` functions split over ember's own threads (``ember.kernels.threadpool``), so
Numba's threading layers (OpenMP, TBB, workqueue) are never started. Measured on a 2-core machine:
the workqueue layer cost about 130 us per launch; OpenMP's spinning workers next to OpenBLAS's
made a GEMM followed by a pointwise kernel 5x slower, and when torch had initialised its libgomp
first no spin setting could be applied.
"""
_numba = None
_checked = False


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
