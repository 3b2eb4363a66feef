"""Stacked matrix products on the TBB threads (ember.kernels.matmul_numba through
``linalg.batched``): NumPy's own BLAS calls, so the same bits as ``np.matmul``, for the layouts
attention makes (strided head views, transposed operands), float32 and float64."""
import numpy as np
import pytest

pytest.importorskip("numba")

from ember.kernels import linalg  # noqa: E402
from ember.kernels.runtime import compiler, threads  # noqa: E402


@pytest.fixture
def stack_runs(monkeypatch):
    """Require the stacked kernel: compiled now, two threads on the TBB layer, NumPy's BLAS."""
    if threads.get_num_threads() < 2 or threads.parallel_layer() != "tbb":
        pytest.skip("the stacked product needs two threads on Numba's TBB layer")
    monkeypatch.setattr(compiler, "compile_mode", lambda: "sync")
    monkeypatch.setattr(linalg, "STACK_MIN_MACS", 0)
    a = np.ones((2, 3, 3), np.float32)
    if linalg._stack(a, a.copy()) is None:
        pytest.skip("NumPy's own OpenBLAS (cblas_sgemm) not found here")


def _heads(rng, dtype):
    qkv = rng.standard_normal((3, 10, 3 * 8)).astype(dtype)
    q, k, v = (qkv[:, :, i * 8:(i + 1) * 8].reshape(3, 10, 2, 4).transpose(0, 2, 1, 3)
               for i in range(3))
    return q, k, v


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_attention_products_have_numpy_s_bits(dtype, stack_runs):
    rng = np.random.default_rng(0)
    q, k, v = _heads(rng, dtype)
    p = rng.standard_normal((3, 2, 10, 10)).astype(dtype)
    cases = [(q, k.transpose(0, 1, 3, 2)), (p, v), (p.transpose(0, 1, 3, 2), q),
             (q.transpose(0, 1, 3, 2), v), (np.ascontiguousarray(q), np.ascontiguousarray(
                 k.transpose(0, 1, 3, 2)))]
    for a, b in cases:
        out = linalg._stack(a, b)
        assert out is not None
        assert out.flags.c_contiguous and out.dtype == dtype
        np.testing.assert_array_equal(out, np.matmul(a, b))
        np.testing.assert_allclose(out, np.einsum("...ij,...jk->...ik", a.astype(np.float64),
                                                  b.astype(np.float64)), rtol=1e-4, atol=1e-4)


def test_other_products_are_left_to_numpy(stack_runs):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((4, 6, 5)).astype(np.float32)
    b = rng.standard_normal((4, 5, 7)).astype(np.float32)
    assert linalg._stack(a, b) is not None
    big = np.ones((2, 128, 128), np.float32)   # each product over BLAS_SERIAL_MACS
    others = [(a, b[:1]),                        # broadcast batch
              (a, b.astype(np.float64)),         # mixed dtypes
              (a.astype(np.int64), b.astype(np.int64)),
              (a[..., ::2], b[:, :3]),           # no unit stride: BLAS cannot read it
              (a[:, :1], b),                     # one row: NumPy's GEMV
              (a, a.transpose(0, 2, 1)),         # one buffer twice: NumPy may take SYRK
              (big, big.copy()), (a[0], b[0])]
    for x, y in others:
        assert linalg._stack(x, y) is None
        np.testing.assert_array_equal(linalg.batched(x, y), np.matmul(x, y))


def test_one_thread_leaves_it_to_numpy(stack_runs, monkeypatch):
    monkeypatch.setattr(threads, "working_threads", lambda: 1)
    a = np.ones((4, 6, 5), np.float32)
    assert linalg._stack(a, np.ones((4, 5, 7), np.float32)) is None


def test_one_numba_thread_leaves_it_to_numpy(stack_runs, monkeypatch):
    """ember's setting of two threads under NUMBA_NUM_THREADS=1 (a user's cap): no runs for
    the prange (it divided by zero), NumPy's loop instead."""
    import numba
    monkeypatch.setattr(numba.config, "NUMBA_NUM_THREADS", 1)
    a = np.ones((16, 4, 64, 32), np.float32)
    b = np.ones((16, 4, 32, 64), np.float32)
    try:
        assert linalg._stack(a, b) is None
        np.testing.assert_array_equal(linalg.batched(a, b), np.matmul(a, b))
    finally:
        monkeypatch.undo()
        threads.sync_threads(threads.get_num_threads())


def _blocks(a, b, by_rows, parts):
    """NumPy's product of each block of rows or columns, as ``split_into`` cuts them."""
    out = np.empty((a.shape[0], b.shape[1]), a.dtype)
    total = out.shape[0 if by_rows else 1]
    for w in range(parts):
        lo, hi = total * w // parts, total * (w + 1) // parts
        if by_rows:
            np.matmul(a[lo:hi], b, out=out[lo:hi])
        else:
            np.matmul(a, b[:, lo:hi], out=out[:, lo:hi])
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("by_rows", [True, False])
def test_split_product_has_numpy_s_bits_per_block(dtype, by_rows, stack_runs):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((37, 19)).astype(dtype)
    b = rng.standard_normal((19, 41)).astype(dtype)
    operands = [(a, b), (np.asfortranarray(a), b), (a, np.asfortranarray(b)),
                (np.asfortranarray(a), np.asfortranarray(b))]
    for x, y in operands:
        out = np.full((37, 45), np.nan, dtype)[:, :41]     # a strided output (row stride 45)
        assert linalg.split_into(x, y, out, by_rows, 2)
        np.testing.assert_array_equal(out, _blocks(x, y, by_rows, 2))
        np.testing.assert_allclose(out, x.astype(np.float64) @ y.astype(np.float64),
                                   rtol=1e-4, atol=1e-4)


def test_split_product_leaves_other_operands_to_the_caller(stack_runs):
    a = np.ones((8, 5), np.float32)
    b = np.ones((5, 8), np.float32)
    out = np.zeros((8, 8), np.float32)
    others = [(a, b.astype(np.float64), out),          # mixed dtypes
              (a.astype(np.int64), b.astype(np.int64), out.astype(np.int64)),
              (a[:, ::2], b[:3], out),                  # no unit stride: BLAS cannot read it
              (a, b, np.zeros((8, 8), np.float32, order="F")),
              (a[:3], b, out[:3])]                      # blocks of one row: NumPy's GEMV
    for x, y, o in others:
        assert not linalg.split_into(x, y, o, True, 2)
    assert (out == 0).all()
