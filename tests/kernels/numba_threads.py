"""What the kernel tests need of Numba's threads (not a test module)."""
import pytest


def require_numba_threads(n):
    """Skip the calling test unless Numba may run ``n`` threads: ``NUMBA_NUM_THREADS`` (or, by
    default, the host's cores) caps them, and a test that checks a split over ``n`` threads
    cannot see one there."""
    numba = pytest.importorskip("numba")
    if numba.config.NUMBA_NUM_THREADS < n:
        pytest.skip(f"Numba runs at most {numba.config.NUMBA_NUM_THREADS} thread(s) here "
                    f"(NUMBA_NUM_THREADS or the host's cores); the test needs {n}")
