"""What the kernel tests need of Numba's threads and prange drivers (not a test module)."""
import pytest


def require_numba_threads(n):
    """Skip the calling test unless Numba may run ``n`` threads: ``NUMBA_NUM_THREADS`` (or, by
    default, the host's cores) caps them, and a test that checks a split over ``n`` threads
    cannot see one there."""
    numba = pytest.importorskip("numba")
    if numba.config.NUMBA_NUM_THREADS < n:
        pytest.skip(f"Numba runs at most {numba.config.NUMBA_NUM_THREADS} thread(s) here "
                    f"(NUMBA_NUM_THREADS or the host's cores); the test needs {n}")


def with_and_without_drivers(monkeypatch, run):
    """``run()`` on two threads with the ``prange`` drivers (kernels named ``*_parallel``)
    compiled, then with them still compiling (``compiler.ready`` False for them, so the calls
    run their one-thread kernels over ember's pool): (the results of both calls, the names of
    the drivers asked for, the (n_items, parts) of each ``threadpool.driver_runs`` call)."""
    from ember.kernels.runtime import compiler, threadpool
    from ember.kernels.runtime.threads import get_num_threads, set_num_threads
    real_ready, real_runs, asked, runs = compiler.ready, threadpool.driver_runs, [], []

    def compiling(kernel, sig, force=False, later=False):
        if kernel.py_func.__name__.endswith("_parallel"):
            asked.append(kernel.py_func.__name__)
            return False
        return real_ready(kernel, sig, force, later)

    def driver_runs(fn, n_items, parts, n_threads):
        runs.append((n_items, parts))
        return real_runs(fn, n_items, parts, n_threads)
    before = get_num_threads()
    try:
        set_num_threads(2)
        drivers = run()
        monkeypatch.setattr(compiler, "ready", compiling)
        monkeypatch.setattr(threadpool, "driver_runs", driver_runs)
        pool = run()
    finally:
        set_num_threads(before)
    return drivers, pool, sorted(set(asked)), runs
