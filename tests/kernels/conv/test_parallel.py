"""The convolution engine's own parallel loop: chunked GEMMs against np.matmul, OpenBLAS held at
one thread inside an own-threads call, chunk errors raised in the caller."""
import threading

import numpy as np
import pytest

from ember.kernels import conv as C
from ember.kernels.conv import parallel
from ember.kernels.runtime.threads import get_num_threads, set_num_threads

rng = np.random.default_rng(1)


@pytest.fixture
def threads():
    before = get_num_threads()
    yield set_num_threads
    set_num_threads(before)


@pytest.mark.parametrize("shapes", [
    ((6, 4, 5), (6, 5, 7), (6, 4, 7)),            # batch axis
    ((2, 3, 4, 5), (3, 5, 300), (2, 3, 4, 300)),  # batch axis of a only (broadcast b)
    ((1, 4, 5), (1, 5, 600), (1, 4, 600)),        # columns
    ((600, 5), (5, 7), (600, 7)),                 # rows
    ((4, 3000), (3000, 6), (4, 6)),               # reduction
])
def test_parallel_matmul_splits(shapes, monkeypatch, threads):
    monkeypatch.setattr(parallel, "MIN_FLOPS", 0)
    threads(3)
    a = rng.standard_normal(shapes[0])
    b = rng.standard_normal(shapes[1])
    out = np.empty(shapes[2])
    with parallel.policy(True):
        assert parallel.matmul(a, b, out) is out
    np.testing.assert_allclose(out, np.matmul(a, b), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shapes,by_rows", [
    (((1, 600, 5), (1, 1, 5, 300), (1, 1, 600, 300)), True),    # one image's 1x1 layer
    (((4, 5), (5, 600), (4, 600)), False),                       # too few rows: columns
])
def test_one_product_splits_on_tbb(shapes, by_rows, monkeypatch, threads):
    """A product without batch goes to ``linalg.split_into`` (TBB blocks, one a thread) with
    2-D views of its operands; where that declines, ember's pool splits it as before."""
    from ember.kernels import linalg
    monkeypatch.setattr(parallel, "MIN_FLOPS", 0)
    threads(2)
    calls = []
    real = linalg.split_into

    def spy(a, b, out, rows, parts):
        calls.append((a.shape, b.shape, out.shape, rows, parts))
        return real(a, b, out, rows, parts)
    monkeypatch.setattr(linalg, "split_into", spy)
    a = rng.standard_normal(shapes[0]).astype(np.float32)
    b = rng.standard_normal(shapes[1]).astype(np.float32)
    out = np.empty(shapes[2], np.float32)
    with parallel.policy(True):
        parallel.matmul(a, b, out)
    m, n = shapes[2][-2:]
    assert calls == [((m, a.shape[-1]), (a.shape[-1], n), (m, n), by_rows, 2)]
    np.testing.assert_allclose(out, np.matmul(a.astype(np.float64), b.astype(np.float64)),
                               rtol=1e-5, atol=1e-5)


def test_blas_threads_restored_after_a_call():
    """The BLAS NumPy's matmul uses is held at one thread during an own-threads call and
    restored after (a BLAS loaded later, e.g. SciPy's: tests/kernels/runtime/test_threads.py)."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    numpy_blas = {c.filepath for c in parallel._controllers()}
    assert numpy_blas

    def counts():
        return [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["filepath"] in numpy_blas]

    before = counts()
    x = rng.standard_normal((2, 4, 9, 9)).astype(np.float32)
    w = rng.standard_normal((4, 4, 3, 3)).astype(np.float32)
    with parallel.policy(True):
        seen = counts()
        C.conv2d_forward(x, w, None, 1, 1, 1, 1)   # nested: the setting stays at one thread
        assert counts() == seen
    C.conv2d_forward(x, w, None, 1, 1, 1, 1)
    assert counts() == before
    assert seen and all(n == 1 for n in seen)


def test_chunk_errors_propagate_and_the_pool_survives(threads):
    threads(2)

    def fn(lo, hi):
        if lo <= 3 < hi:
            raise KeyError("chunk")
        return hi - lo
    with parallel.policy(True):
        with pytest.raises(KeyError):
            parallel.run(fn, 16)
        assert sum(parallel.run(lambda lo, hi: hi - lo, 16)) == 16




@pytest.mark.parametrize("n_threads, n_items, min_per_chunk", [(1, 10, 1), (3, 37, 1),
                                                               (3, 37, 10), (2, 1, 1)])
def test_run_covers_every_item_once_in_chunk_order(n_threads, n_items, min_per_chunk, threads):
    threads(n_threads)
    with parallel.policy(True):
        parts = parallel.run(lambda lo, hi: (lo, hi), n_items, min_per_chunk)
    assert parts[0][0] == 0 and parts[-1][1] == n_items
    assert all(a[1] == b[0] and a[0] < a[1] for a, b in zip(parts, parts[1:]))
    assert len(parts) <= max(1, n_threads * parallel.CHUNKS_PER_THREAD)
    assert len(parts) <= max(1, n_items // min_per_chunk)


def test_without_own_threads_run_is_one_inline_chunk(threads):
    threads(3)
    caller = threading.get_ident()
    with parallel.policy(False):
        assert not parallel.parallel_possible()
        assert parallel.run(lambda lo, hi: (lo, hi, threading.get_ident()), 50) == \
            [(0, 50, caller)]
