"""Fast paths of LeNet's kernels (issue 13) against their general paths and torch: ``where`` by
bit masks, the 2x2 max pool and the Numba scatter of its gradient, the Numba col2im of the
stride-1 input gradient. Each compared in float32 and float64, on odd shapes and views."""
import numpy as np
import pytest

from ember.kernels import elementwise, pool
from ember.kernels.conv import im2col
from ember.kernels.pointwise import compile_form

rng = np.random.default_rng(0)


def _numba():
    from ember.kernels.pointwise import has_compiler
    if not has_compiler():
        pytest.skip("numba not importable")


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int8, np.int64,
                                   np.uint16, np.bool_])
def test_where_bit_select_equals_numpy_where(dtype):
    a = (rng.standard_normal((8, 3, 200)) * 5).astype(dtype)
    b = (rng.standard_normal((3, 1)) * 5).astype(dtype)
    c = rng.random((8, 1, 200)) > 0.5
    assert a.size >= elementwise.SELECT_MIN_SIZE
    for x, y in [(a, b), (b, a), (a, a[::-1])]:
        out = elementwise.where(c, x, y)
        assert out.dtype == np.dtype(dtype) and out.shape == (8, 3, 200)
        np.testing.assert_array_equal(out, np.where(c, x, y))
    np.testing.assert_array_equal(elementwise.where(c, a, 0), np.where(c, a, dtype(0)))
    np.testing.assert_array_equal(elementwise.where(c, 1, a), np.where(c, dtype(1), a))
    t = a.transpose(2, 0, 1)   # non-contiguous
    np.testing.assert_array_equal(elementwise.where(c.transpose(2, 0, 1), t, b.T[None]),
                                  np.where(c.transpose(2, 0, 1), t, b.T[None]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_where_bit_select_keeps_nan_signed_zero_and_infinity(dtype):
    x = np.full(5000, -0.0, dtype)
    x[::3], x[1::7] = np.nan, -np.inf
    c = rng.random(5000) > 0.3
    for fill in (0.0, 1.5, -0.0):
        out = elementwise.where(c, x, fill)
        ref = np.where(c, x, dtype(fill))
        assert out.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(out, ref)
        np.testing.assert_array_equal(np.signbit(out), np.signbit(ref))


def test_relu_backward_through_where_matches_torch():
    torch = pytest.importorskip("torch")
    import ember
    x = rng.standard_normal((64, 6, 28, 28)).astype(np.float32)
    x[0, 0, 0, :4] = 0.0
    g = rng.standard_normal(x.shape).astype(np.float32)
    g[0, 0, 1, :4] = np.nan           # masked-off NaN gradients stay zero, as torch's
    ex = ember.tensor(x, requires_grad=True)
    ember.relu(ex).backward(ember.tensor(g))
    tx = torch.tensor(x, requires_grad=True)
    torch.relu(tx).backward(torch.tensor(g))
    np.testing.assert_array_equal(ex.grad.numpy(), tx.grad.numpy())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_relu_grad_engine_pass_equals_the_bit_select(dtype, monkeypatch):
    """``elementwise.relu_grad``'s one engine pass gives the bits of gt + where's bit select:
    NaN and -0.0 results give +0, the gradient's NaN, -0.0 and infinities are copied."""
    _numba()
    from ember.kernels.runtime import compiler
    monkeypatch.setattr(compiler, "compile_mode", lambda: "sync")
    y = np.maximum(rng.standard_normal((64, 6, 28, 28)), 0).astype(dtype)
    g = rng.standard_normal(y.shape).astype(dtype)
    y.reshape(-1)[:40:4] = [np.nan, -0.0, np.inf, -np.inf, 1e-30, 0.0, 2.0, np.nan, 3.0, 1.0]
    g.reshape(-1)[:40:3] = [np.nan, -0.0, np.inf, -np.inf, 5.0, np.nan, -0.0, 1.0, 2.0, 3.0,
                            4.0, 5.0, 6.0, 7.0]
    got = elementwise.relu_grad(g, y)
    assert compile_form(elementwise._relu_grad_form, ("grad", "output"), (g, y))(
        g, y, fallback=False) is not None
    want = elementwise.where(elementwise.gt(y, 0), g, 0.0)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got.view(f"i{got.itemsize}"), want.view(f"i{got.itemsize}"))
    small = elementwise.relu_grad(g[0, 0], y[0, 0])          # below the engine's threshold
    np.testing.assert_array_equal(small, want[0, 0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tanh_and_sigmoid_backward_engine_pass_equals_numpy(dtype, monkeypatch):
    """The one-pass engine kernels of tanh_backward / sigmoid_backward give the bits of the
    NumPy operations in the same order; a broadcast or mixed-dtype call takes the NumPy path."""
    _numba()
    from ember.kernels.runtime import compiler
    monkeypatch.setattr(compiler, "compile_mode", lambda: "sync")
    y = np.tanh(rng.standard_normal((300, 400))).astype(dtype)
    g = rng.standard_normal(y.shape).astype(dtype)
    y[0, :4], g[1, :4] = [np.nan, -0.0, 1.0, -1.0], [np.nan, np.inf, -0.0, 1e30]
    one = dtype(1)
    forms = {"tanh_backward": lambda g, y: g * (one - y * y),
             "sigmoid_backward": lambda g, y: g * (one - y) * y}   # torch's order
    for name, form in forms.items():
        got, want = getattr(elementwise, name)(g, y), form(g, y)
        kernel = compile_form(getattr(elementwise, f"_{name}_form"), ("grad", "output"), (g, y))
        assert kernel(g, y, fallback=False) is not None
        assert got.dtype == np.dtype(dtype)
        bits = f"i{got.itemsize}"
        np.testing.assert_array_equal(got.view(bits), want.view(bits))
        broadcast = getattr(elementwise, name)(g[:1], y)        # the NumPy path
        np.testing.assert_array_equal(broadcast.view(bits), form(g[:1], y).view(bits))


POOL_CASES = [  # (shape, kernel, stride, padding, dilation, ceil_mode)
    ((3, 5, 28, 28), 2, 2, 0, 1, False),     # the 2x2 kernel
    ((3, 5, 9, 11), 2, 2, 0, 1, False),      # 2x2, odd sizes floor: still the 2x2 kernel
    ((3, 5, 9, 11), 2, 2, 0, 1, True),       # ceil_mode: partial windows, general kernel
    ((3, 5, 10, 10), 2, 2, 1, 1, False),     # padded
    ((3, 5, 10, 10), 2, 2, 0, 2, False),     # dilated
    ((3, 5, 10, 10), 3, 1, 1, 1, False),     # overlapping windows: repeated indices
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", POOL_CASES, ids=[str(i) for i in range(len(POOL_CASES))])
def test_max_pool2d_fast_paths_match_torch(case, dtype, monkeypatch):
    _numba()
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    monkeypatch.setattr(pool, "MIN_NUMBA_SIZE", 0)
    shape, k, s, p, d, ceil = case
    x = rng.integers(-4, 5, shape).astype(dtype)     # ties
    x[0, 0, 1, 1] = np.nan
    x[1, 1] = -np.inf
    x = x.transpose(0, 1, 3, 2).copy().transpose(0, 1, 3, 2)   # non-contiguous input
    y, idx = pool.max_pool2d_forward(x, k, s, p, d, ceil)
    gy = rng.standard_normal(y.shape).astype(dtype)[..., ::-1]   # non-contiguous gradient
    tx = torch.tensor(x, requires_grad=True)
    ty, tidx = F.max_pool2d(tx, k, s, p, d, ceil_mode=ceil, return_indices=True)
    ty.backward(torch.tensor(gy.copy()))
    np.testing.assert_array_equal(y, ty.detach().numpy())
    np.testing.assert_array_equal(idx, tidx.numpy())
    gx = pool.max_pool2d_backward(gy, idx, x.shape)
    assert gx.dtype == dtype
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-6, atol=1e-6)
    monkeypatch.setattr(pool, "USE_NUMBA", False)
    ry, ridx = pool.max_pool2d_forward(x, k, s, p, d, ceil)
    np.testing.assert_array_equal(y, ry)
    np.testing.assert_array_equal(idx, ridx)
    np.testing.assert_allclose(pool.max_pool2d_backward(gy, idx, x.shape), gx, rtol=1e-6,
                               atol=1e-6)


def test_max_pool2d_2x2_kernel_and_scatter_run(monkeypatch):
    _numba()
    from ember.kernels import pool_numba
    monkeypatch.setattr(pool, "MIN_NUMBA_SIZE", 0)
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    y, idx = pool.max_pool2d_forward(x, 2, 2, 0, 1, False)
    pool.max_pool2d_backward(y, idx, x.shape)
    assert pool_numba.planes_2x2.overloads and pool_numba.scatter.overloads


def test_max_pool2d_scatter_refuses_indices_outside_the_plane(monkeypatch):
    _numba()
    monkeypatch.setattr(pool, "MIN_NUMBA_SIZE", 0)
    gy = np.ones((1, 2, 2, 2), np.float32)
    idx = np.zeros((1, 2, 2, 2), np.int64)
    idx[0, 1, 1, 1] = 16
    with pytest.raises(ValueError, match="max_pool2d_backward: indices outside"):
        pool.max_pool2d_backward(gy, idx, (1, 2, 4, 4))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("xs,ws,pad,dil", [
    ((64, 6, 14, 14), (16, 6, 5, 5), (0, 0), (1, 1)),    # LeNet conv2
    ((3, 2, 9, 11), (8, 2, 3, 4), (1, 2), (2, 1)),
    ((2, 3, 7, 7), (5, 3, 5, 5), (2, 2), (1, 1)),
])
def test_input_grad_rows_numba_col2im_equals_numpy_and_torch(xs, ws, pad, dil, dtype,
                                                             monkeypatch):
    _numba()
    torch = pytest.importorskip("torch")
    import ember.kernels.conv as C
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal(ws).astype(dtype)
    ho = torch.conv2d(torch.tensor(x), torch.tensor(w), None, 1, pad, dil).shape
    gy = rng.standard_normal(ho).astype(dtype)
    ref = torch.ops.aten.convolution_backward(
        torch.tensor(gy), torch.tensor(x), torch.tensor(w), None, [1, 1], list(pad), list(dil),
        False, [0, 0], 1, [True, False, False])[0].numpy()
    calls = []
    monkeypatch.setattr(im2col, "_input_grad_rows",
                        lambda *a, f=im2col._input_grad_rows: calls.append(1) or f(*a))
    from ember.backends import conv as settings
    monkeypatch.setattr(settings, "algorithm", "im2col")
    fast = C.conv2d_input_grad(gy, w, xs, 1, pad, dil, 1)
    monkeypatch.setattr(im2col, "USE_NUMBA", False)
    slow = C.conv2d_input_grad(gy, w, xs, 1, pad, dil, 1)
    assert len(calls) == 2
    np.testing.assert_array_equal(fast, slow)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(fast, ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_max_pool2d_2x2_kernel_equals_general_kernel_on_ties_nan_and_inf(dtype):
    """Dense ties, several NaNs and -inf per window: the 2x2 kernel's column-pair order gives
    the general kernel's window-order winner (first maximum, first NaN)."""
    _numba()
    from ember.kernels import pool_numba
    x = rng.integers(-2, 2, (4, 3, 10, 12)).astype(dtype)
    x[x == 1] = np.nan
    x[x == -2] = -np.inf
    y, idx = np.empty((4, 3, 5, 6), dtype), np.empty((4, 3, 5, 6), np.int64)
    ry, ridx = y.copy(), idx.copy()
    pool_numba.planes_2x2(x, y, idx, 0, 12)
    pool_numba.planes(x, 2, 2, 2, 2, 0, 0, 1, 1, ry, ridx, 0, 12)
    np.testing.assert_array_equal(y, ry)
    np.testing.assert_array_equal(idx, ridx)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 5])
def test_thin_forward_of_lenet_conv1_matches_torch_on_a_view(n, dtype):
    """LeNet's first layer takes ``thin`` (heuristic), on a non-contiguous input, batch of one
    and several images (split over threads)."""
    _numba()
    torch = pytest.importorskip("torch")
    import ember.kernels.conv as C
    from ember.kernels.conv import selector
    x = rng.standard_normal((n, 1, 28, 30)).astype(dtype)[..., 1:29]
    w = rng.standard_normal((6, 1, 5, 5)).astype(dtype)
    b = rng.standard_normal(6).astype(dtype)
    assert selector.heuristic("forward", C.geometry("conv2d", x.shape, w.shape, 1, 2, 1, 1)) \
        == "thin"
    y = C.conv2d_forward(x, w, b, 1, 2, 1, 1)
    ref = torch.conv2d(torch.tensor(x), torch.tensor(w), torch.tensor(b), 1, 2).numpy()
    assert y.dtype == dtype and y.flags.c_contiguous
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(y, ref, rtol=tol, atol=tol)


def test_max_pool2d_scatter_split_over_threads_equals_inline(monkeypatch):
    _numba()
    from ember.kernels.runtime.threads import get_num_threads, set_num_threads
    monkeypatch.setattr(pool, "MIN_NUMBA_SIZE", 0)
    x = rng.standard_normal((4, 6, 12, 12))
    y, idx = pool.max_pool2d_forward(x, 3, 1, 1, 1, False)     # overlapping windows
    gy = rng.standard_normal(y.shape)
    inline = pool.max_pool2d_backward(gy, idx, x.shape)
    before = get_num_threads()
    monkeypatch.setattr(pool, "SCATTER_PARALLEL_SIZE", 0)
    set_num_threads(2)
    try:
        split = pool.max_pool2d_backward(gy, idx, x.shape)
    finally:
        set_num_threads(before)
    np.testing.assert_array_equal(split, inline)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows", [1, 2, 3])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_of_few_rows_on_the_gemv_kernel_equals_blas(dtype, rows, bias, monkeypatch):
    """``linear`` with at most GEMV_MAX_ROWS rows and a large weight runs ``linear_numba`` on the
    TBB threads (when there are two); the result is BLAS's up to summation order, NaN kept."""
    _numba()
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
