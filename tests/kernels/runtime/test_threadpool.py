"""ember's chunk pool (``run_chunks``, ``driver_runs``): chunk bounds and result order, inline runs (one thread,
one part, nested calls), exceptions re-raised in the caller with the pool still usable, the
caller's NumPy error state in the workers, and the pool replaced under concurrent callers."""
import sys
import threading

import numpy as np
import pytest

from ember.kernels.runtime import threadpool

HARD_TIMEOUT = 60   # seconds before a blocked thread counts as a hang (normal runs take < 2 s)


def _daemon(fn):
    t = threading.Thread(target=fn, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("n_items, parts, n_threads", [(10, 3, 2), (7, 7, 3), (100, 8, 4),
                                                       (5, 4, 2)])
def test_chunks_cover_the_range_in_order(n_items, parts, n_threads):
    out = threadpool.run_chunks(lambda lo, hi: (lo, hi), n_items, parts, n_threads)
    assert len(out) == parts
    assert out[0][0] == 0 and out[-1][1] == n_items
    assert all(a[1] == b[0] for a, b in zip(out, out[1:]))
    assert [n_items * i // parts for i in range(parts + 1)] == [o[0] for o in out] + [n_items]


@pytest.mark.parametrize("n_items, parts", [(9, 8), (1029, 8), (8, 8), (3, 4)])
def test_driver_runs_are_a_prange_drivers_runs_in_order(n_items, parts):
    """``driver_runs`` cuts the items as a driver's ``nbhelpers.run_bounds`` does (``parts``
    runs of ceil(n_items / parts), the last ones short or empty: None, not run)."""
    pytest.importorskip("numba")
    from ember.kernels.runtime.nbhelpers import run_bounds
    bounds = [run_bounds.py_func(n_items, parts, r) for r in range(parts)]
    want = [(lo, hi) if lo < hi else None for lo, hi in bounds]
    assert threadpool.driver_runs(lambda lo, hi: (lo, hi), n_items, parts, 2) == want
    if n_items == 9:
        assert want[-3:] == [None] * 3   # 2, 2, 2, 2, 1 and three empty runs


def test_one_thread_or_one_part_or_a_nested_call_runs_inline():
    me = threading.get_ident()
    assert threadpool.run_chunks(lambda lo, hi: (lo, hi, threading.get_ident()), 9, 4, 1) == \
        [(0, 9, me)]
    assert threadpool.run_chunks(lambda lo, hi: (lo, hi, threading.get_ident()), 9, 1, 4) == \
        [(0, 9, me)]

    def outer(lo, hi):
        assert threadpool.inside()
        return threadpool.run_chunks(lambda a, b: (a, b), 6, 3, 2)
    assert not threadpool.inside()
    assert threadpool.run_chunks(outer, 4, 2, 2) == [[(0, 6)], [(0, 6)]]


def test_a_chunks_exception_reaches_the_caller_and_the_pool_survives():
    def fn(lo, hi):
        if lo == 5:
            raise KeyError("chunk 5")
        return hi - lo
    with pytest.raises(KeyError, match="chunk 5"):
        threadpool.run_chunks(fn, 10, 10, 3)
    assert sum(threadpool.run_chunks(lambda lo, hi: hi - lo, 10, 10, 3)) == 10


def test_workers_run_under_the_callers_numpy_error_state():
    def fn(lo, hi):
        np.float64(1.0) / np.float64(0.0)
        return np.geterr()["divide"]
    with np.errstate(divide="ignore"):
        states = threadpool.run_chunks(fn, 8, 8, 3)
    assert set(states) == {"ignore"}
    with np.errstate(divide="raise"):
        with pytest.raises(FloatingPointError):
            threadpool.run_chunks(fn, 8, 8, 3)


def test_pool_replaced_under_concurrent_callers(monkeypatch):
    """Calls that need a larger pool replace it while other threads submit to the old one: no
    'cannot schedule new futures after shutdown', every call gets its chunks done."""
    monkeypatch.setattr(threadpool, "_pool", None)
    monkeypatch.setattr(threadpool, "_pool_size", 0)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    errors, totals = [], []

    def caller():
        try:
            for n in range(2, 26):
                totals.append(sum(threadpool.run_chunks(lambda lo, hi: hi - lo, 8, 8, n)))
        except Exception as e:  # reported below
            errors.append(e)
    try:
        callers = [_daemon(caller) for _ in range(4)]
        for t in callers:
            t.join(HARD_TIMEOUT)
    finally:
        sys.setswitchinterval(interval)
        if threadpool._pool is not None:
            threadpool._pool.shutdown(wait=False)
    assert not errors, errors[0]
    assert totals == [8] * (4 * 24)


# --- concurrency: convolutions, GEMMs and fused kernels from 4 threads while the count changes


