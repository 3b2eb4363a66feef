"""Linear-algebra kernels (ember.kernels.linalg): the stacked-matrix ``matmul`` (one GEMM over
the stacked rows) against NumPy's batched matmul; a linear layer of few rows on the GEMV kernel
against BLAS."""
import numpy as np
import pytest

from ember.kernels import linalg

rng = np.random.default_rng(0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows", [1, 2, 3])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_of_few_rows_on_the_gemv_kernel_equals_blas(dtype, rows, bias, monkeypatch):
    """``linear`` with at most GEMV_MAX_ROWS rows and a large weight runs ``linear_numba`` on the
    TBB threads (when there are two); the result is BLAS's up to summation order, NaN kept."""
    pytest.importorskip("numba")
    from ember.kernels import linalg
    from ember.kernels.runtime import compiler
    from ember.kernels.runtime.threads import get_num_threads, parallel_layer
    if parallel_layer() != "tbb" or get_num_threads() < 2:
        pytest.skip("needs Numba's TBB layer and two threads")
    monkeypatch.setattr(compiler, "compile_mode", lambda: "sync")
    w = rng.standard_normal((301, 257)).astype(dtype)        # 301 rows: runs of 4 and a rest
    x = rng.standard_normal((rows, 257)).astype(dtype)
    x[0, 5] = np.nan
    b = rng.standard_normal(301).astype(dtype) if bias else None
    monkeypatch.setattr(linalg, "GEMV_MIN_BYTES", w.nbytes)
    calls = []
    real = linalg._gemv_linear
    monkeypatch.setattr(linalg, "_gemv_linear", lambda *a: calls.append(real(*a)) or calls[-1])
    got = linalg.linear(x, w, b)
    want = x.astype(np.float64) @ w.T.astype(np.float64) + (0 if b is None else b)
    assert got.dtype == dtype and got.shape == (rows, 301)
    assert [c is not None for c in calls] == ([True] if rows <= linalg.GEMV_MAX_ROWS else [])
    tol = 1e-4 if dtype == np.float32 else 1e-11
    np.testing.assert_allclose(got[1:], want[1:], rtol=tol, atol=tol * 20)
    assert np.isnan(got[0]).all()


@pytest.mark.parametrize("sa,sb", [((3, 4, 5), (5, 6)), ((2, 2, 3, 4), (4, 1)), ((2, 3, 0), (0, 5)),
                                   ((0, 3, 4), (4, 5)), ((2, 0, 4), (4, 0)), ((1, 1, 7), (7, 2))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int64, np.bool_])
def test_stacked_matmul_equals_numpy(sa, sb, dtype):
    a = (rng.standard_normal(sa) * 3).astype(dtype)
    b = (rng.standard_normal(sb) * 3).astype(dtype)
    out, ref = linalg.matmul(a, b), np.matmul(a, b)
    assert out.shape == ref.shape and out.dtype == ref.dtype
    np.testing.assert_allclose(out.astype(np.float64), ref.astype(np.float64), rtol=2e-3,
                               atol=1e-5)


def test_stacked_matmul_of_a_transposed_view():
    a = rng.standard_normal((6, 4, 5)).astype(np.float32).transpose(1, 0, 2)
    b = rng.standard_normal((8, 3)).astype(np.float32)[:5]
    np.testing.assert_allclose(linalg.matmul(a, b), np.matmul(a, b), rtol=1e-5, atol=1e-5)


def test_stacked_products_never_import_numba_while_its_import_is_queued(monkeypatch):
    """Before Numba's threading layer is chosen, while Numba's first import is queued on the
    compile thread (``compiler.importing("numba")``), a stack of small products and a GEMV's
    split take their BLAS paths: choosing the layer there imported Numba on the calling thread
    (a GPT step's first call, 360 -> 200 ms)."""
    from ember.kernels.runtime import compiler, threads

    def fail():
        raise AssertionError("the threading layer was chosen while Numba's import was queued")
    monkeypatch.setattr(threads, "_layer", None)
    monkeypatch.setattr(threads, "parallel_layer", fail)
    monkeypatch.setattr(threads, "working_threads", lambda: 2)
    monkeypatch.setattr(compiler, "importing", lambda name: name == "numba")
    a = rng.standard_normal((16, 32, 24)).astype(np.float32)
    b = rng.standard_normal((16, 24, 32)).astype(np.float32)
    np.testing.assert_array_equal(linalg.batched(a, b), np.matmul(a, b))
    assert linalg.gemv_parts(np.ones((512, 512), np.float32)) == 0


def test_product_kernels_refuse_two_dtypes_in_torchs_words():
    """The kernels themselves never promote (torch's products do not): each raises with torch's
    message for the product its dimensions route to."""
    from ember.kernels.errors import KernelError
    f, d = np.ones((2, 3), np.float32), np.ones((3, 2), np.float64)
    cases = [(lambda: linalg.mm(f, d), "expected m1 and m2 to have the same dtype, but got: "
                                       "float != double"),
             (lambda: linalg.matmul(f, d), "expected m1 and m2 to have the same dtype"),
             (lambda: linalg.bmm(f[None], d[None]), "expected scalar type Float but found Double"),
             (lambda: linalg.matmul(f, np.ones(3, np.int64)),
              "addmv input tensors must have the same dtype, but got Long, Float, and Long"),
             (lambda: linalg.dot(np.ones(3, np.float32), np.ones(3, np.int32)),
              "dot : expected both vectors to have same dtype, but found Float and Int"),
             (lambda: linalg.addmm(np.ones((2, 2), np.float64), f, d.astype(np.float32)),
              "self and mat2 must have the same dtype, but got Double and Float")]
    for fn, words in cases:
        with pytest.raises(KernelError, match=words.replace("(", r"\(")):
            fn()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["c", "f", "views"])
def test_bias_gemm_accumulates_the_product_into_the_bias(dtype, layout, monkeypatch):
    """``bias_gemm``: x @ w.T + b as one BLAS call with beta = 1, for operands BLAS reads in
    place (C order, Fortran order, transposed and row-sliced views), against float64."""
    monkeypatch.setattr(linalg, "BIAS_GEMM_MIN_MACS", 0)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((70, 40)).astype(dtype)
    w = rng.standard_normal((30, 40)).astype(dtype)
    b = rng.standard_normal(30).astype(dtype)
    if layout == "f":
        x, w = np.asfortranarray(x), np.asfortranarray(w)
    elif layout == "views":
        x = np.ascontiguousarray(x.T).T[5:65]           # a transposed view, rows sliced
        w = np.concatenate([w, w], axis=1)[:, :40]      # rows with a longer stride
    y = linalg.bias_gemm(x, w, b)
    if linalg._numpy_cblas(np.dtype(dtype)) is None:
        assert y is None    # NumPy's BLAS is not its own OpenBLAS here
        return
    want = x.astype(np.float64) @ w.T.astype(np.float64) + b
    assert y.dtype == dtype and y.shape == want.shape and y.flags.c_contiguous
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(y, want, rtol=tol, atol=tol)


def test_bias_gemm_leaves_what_blas_cannot_read_to_the_caller(monkeypatch):
    """None (the caller's product then bias) for operands BLAS cannot read, mixed dtypes,
    integers, a bias of another size, no rows; and under BIAS_GEMM_MIN_MACS."""
    x = np.ones((8, 6), np.float32)
    w = np.ones((5, 6), np.float32)
    b = np.ones(5, np.float32)
    for args in [(x[:, ::2], w[:, :3], b), (x, w, b.astype(np.float64)),
                 (x.astype(np.int64), w.astype(np.int64), b.astype(np.int64)),
                 (x, w, np.ones(1, np.float32)), (x[:0], w, b)]:
        monkeypatch.setattr(linalg, "BIAS_GEMM_MIN_MACS", 0)
        assert linalg.bias_gemm(*args) is None
    monkeypatch.setattr(linalg, "BIAS_GEMM_MIN_MACS", 8 * 6 * 5 + 1)
    assert linalg.bias_gemm(x, w, b) is None


def test_large_linear_adds_its_bias_in_the_gemm(monkeypatch):
    """``linear`` of BIAS_GEMM_MIN_MACS or more (a 3-d input's rows flattened) equals the
    product then the bias, and takes ``bias_gemm``."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 64, 128)).astype(np.float32)
    w = rng.standard_normal((200, 128)).astype(np.float32)
    b = rng.standard_normal(200).astype(np.float32)
    calls = []
    real = linalg.bias_gemm
    monkeypatch.setattr(linalg, "bias_gemm", lambda *a: calls.append(a[0].shape) or real(*a))
    y = linalg.linear(x, w, b)
    assert calls == [(256, 128)] and y.shape == (4, 64, 200)
    np.testing.assert_allclose(y, x @ w.T + b, rtol=1e-5, atol=1e-4)
    monkeypatch.setattr(linalg, "BIAS_GEMM", False)     # the product, then the bias
    assert real(x.reshape(-1, 128), w, b) is None
    np.testing.assert_allclose(linalg.linear(x, w, b), y, rtol=1e-5, atol=1e-4)


@pytest.fixture
def split_runs(monkeypatch):
    """Require the split product (``gemm_into`` from SPLIT_GEMM_MIN_MACS = 0): two threads on
    Numba's TBB layer, NumPy's own OpenBLAS, the kernel compiled now."""
    pytest.importorskip("numba")
    from ember.kernels.runtime import compiler, threads
    if not 2 <= threads.get_num_threads() <= linalg.SPLIT_GEMM_MAX_THREADS or \
            threads.parallel_layer() != "tbb":
        pytest.skip("the split product needs 2-4 threads on Numba's TBB layer")
    monkeypatch.setattr(compiler, "compile_mode", lambda: "sync")
    monkeypatch.setattr(linalg, "SPLIT_GEMM_MIN_MACS", 0)
    a = np.ones((8, 8), np.float32)
    if not linalg.split_into(a, a, np.empty_like(a), True, 2):
        pytest.skip("NumPy's own OpenBLAS (cblas_sgemm) not found here")
    calls = []
    real = linalg.split_into
    monkeypatch.setattr(linalg, "split_into",
                        lambda a, b, out, by_rows, parts, accumulate=False: calls.append(
                            (by_rows, accumulate)) or real(a, b, out, by_rows, parts, accumulate))
    return calls


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(70, 40, 30), (30, 40, 70)])
def test_gemm_into_splits_the_output_over_the_tbb_threads(dtype, shape, split_runs):
    """From SPLIT_GEMM_MIN_MACS a product runs as blocks of rows (more rows than columns) or
    columns on the TBB threads, for the layouts BLAS reads in place; ``accumulate`` adds it to
    the output (beta = 1); BLAS is back at its own thread count after each."""
    from ember.kernels.runtime import threads
    M, K, N = shape
    rng = np.random.default_rng(5)
    a = rng.standard_normal((M, K)).astype(dtype)
    b = rng.standard_normal((K, N)).astype(dtype)
    counts = [c.get_num_threads() for c in threads.blas_controllers()]
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for x, y in [(a, b), (np.asfortranarray(a), b), (a, np.ascontiguousarray(b.T).T)]:
        want = x.astype(np.float64) @ y.astype(np.float64)
        got = linalg.gemm_into(x, y)
        assert got.dtype == dtype and got.shape == (M, N) and got.flags.c_contiguous
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
        c = rng.standard_normal((M, N)).astype(dtype)
        out = c.copy()
        assert linalg.gemm_into(x, y, out, accumulate=True) is out
        np.testing.assert_allclose(out, c + want, rtol=tol, atol=tol)
    assert split_runs == [(M >= N, False), (M >= N, True)] * 3
    assert [c.get_num_threads() for c in threads.blas_controllers()] == counts


def test_gemm_into_runs_one_blas_call_where_it_does_not_split(split_runs, monkeypatch):
    """No split for one thread, integers, a call nested in a held BLAS mode (BLAS keeps that
    mode's count) or under SPLIT_GEMM_MIN_MACS: NumPy's product (accumulated with beta = 1
    where BLAS reads the operands, else added)."""
    from ember.kernels.runtime import threads
    rng = np.random.default_rng(6)
    a = rng.standard_normal((40, 20)).astype(np.float32)
    b = rng.standard_normal((20, 30)).astype(np.float32)
    want = a @ b
    ia, ib = a.astype(np.int64), b.astype(np.int64)
    np.testing.assert_array_equal(linalg.gemm_into(ia, ib), ia @ ib)
    c = np.ones((40, 30), np.int64)
    np.testing.assert_array_equal(linalg.gemm_into(ia, ib, c, accumulate=True), ia @ ib + 1)
    with threads.blas_mode(threads.FREE):
        np.testing.assert_allclose(linalg.gemm_into(a, b), want, rtol=1e-5, atol=1e-5)
    monkeypatch.setattr(linalg, "SPLIT_GEMM_MIN_MACS", 40 * 20 * 30 + 1)
    np.testing.assert_allclose(linalg.gemm_into(a, b), want, rtol=1e-5, atol=1e-5)
    out = np.ones((40, 30), np.float32)
    linalg.gemm_into(a[:, ::2], b[::2], out, accumulate=True)    # no unit stride: added
    np.testing.assert_allclose(out, a[:, ::2] @ b[::2] + 1, rtol=1e-5, atol=1e-5)
    monkeypatch.setattr(linalg, "SPLIT_GEMM_MIN_MACS", 0)
    monkeypatch.setattr(threads, "working_threads", lambda: 1)
    np.testing.assert_allclose(linalg.gemm_into(a, b), want, rtol=1e-5, atol=1e-5)
    assert split_runs == []


def test_no_split_without_the_blas_limit(split_runs):
    """``set_conv_blas_limit(False)`` (``EMBER_CONV_BLAS_LIMIT=0``): ember never changes BLAS's
    thread count, so no GEMM splits; the product runs on BLAS's own threads."""
    from ember.kernels.runtime import threads
    a = np.ones((40, 20), np.float32)
    b = np.ones((20, 30), np.float32)
    before = threads.get_conv_blas_limit()
    try:
        threads.set_conv_blas_limit(False)
        np.testing.assert_array_equal(linalg.gemm_into(a, b), a @ b)
    finally:
        threads.set_conv_blas_limit(before)
    assert split_runs == []
    np.testing.assert_array_equal(linalg.gemm_into(a, b), a @ b)
    assert split_runs == [(True, False)]


def test_products_take_gemm_into(split_runs, monkeypatch):
    """``matmul`` of a stack and a matrix, ``linear`` (without and with a bias in the GEMM)
    and autograd's linear backward all run their GEMM through ``gemm_into``."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4, 16, 32)).astype(np.float32)
    w = rng.standard_normal((24, 32)).astype(np.float32)
    b = rng.standard_normal(24).astype(np.float32)
    g = rng.standard_normal((4, 16, 24)).astype(np.float32)
    np.testing.assert_allclose(linalg.matmul(x, w.T), x @ w.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(linalg.linear(x, w), x @ w.T, rtol=1e-5, atol=1e-5)
    gx, gw, gb = linalg.linear_backward(g, x, w, (True, True, True))
    np.testing.assert_allclose(gx, g @ w, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gw, g.reshape(-1, 24).T @ x.reshape(-1, 32), rtol=1e-4,
                               atol=1e-4)
    assert split_runs == [(True, False)] * 3 + [(False, False)]
    split_runs.clear()
    monkeypatch.setattr(linalg, "BIAS_GEMM_MIN_MACS", 0)
    np.testing.assert_allclose(linalg.linear(x, w, b), x @ w.T + b, rtol=1e-5, atol=1e-5)
    assert split_runs == [(True, True)]


@pytest.mark.parametrize("xs, ws", [((3, 4, 0), (5, 0)), ((3, 4, 2), (0, 2)), ((0, 3), (5, 3)),
                                    ((2, 0, 3), (5, 3))])
def test_linear_and_its_backward_of_empty_dimensions(xs, ws):
    """No features, no outputs or no rows: NumPy's product's shapes and values (a sum over
    no features is 0), the gradients too (``reshape(-1, 0)`` cannot infer the rows)."""
    rng = np.random.default_rng(8)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    b = rng.standard_normal(ws[0]).astype(np.float32)
    y = linalg.linear(x, w, b)
    np.testing.assert_array_equal(y, np.matmul(x, w.T) + b)
    g = rng.standard_normal(y.shape).astype(np.float32)
    gx, gw, gb = linalg.linear_backward(g, x, w, (True, True, True))
    rows = int(np.prod(xs[:-1]))
    np.testing.assert_array_equal(gx, np.matmul(g, w))
    np.testing.assert_array_equal(gw, g.reshape(rows, ws[0]).T @ x.reshape(rows, ws[1]))
    np.testing.assert_array_equal(gb, g.reshape(rows, ws[0]).sum(0))
