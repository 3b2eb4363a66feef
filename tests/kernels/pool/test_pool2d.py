"""Pooling kernels against torch: forward, indices and backward, incl. ceil_mode and padding."""
import numpy as np
import pytest

from ember.kernels.pool import pool2d as pool

torch = pytest.importorskip("torch")
F = torch.nn.functional

rng = np.random.default_rng(0)

MAX_CASES = [  # (shape, kernel, stride, padding, dilation, ceil_mode)
    ((2, 3, 9, 8), 2, 2, 0, 1, False),
    ((2, 3, 9, 8), 3, 2, 1, 1, True),
    ((1, 2, 10, 11), (3, 2), (2, 1), (1, 1), (2, 1), False),
    ((1, 2, 10, 11), 3, 3, 1, 2, True),
    ((2, 1, 7, 7), 3, None, 1, 1, True),
    ((1, 1, 5, 6), 2, 1, 0, 1, False),
]


@pytest.fixture(params=["numpy", "numba"])
def max_path(request, monkeypatch):
    """Max pooling with indices through the NumPy taps or the Numba kernel (at any size)."""
    if request.param == "numba":
        from ember.kernels.pointwise import has_compiler
        if not has_compiler():
            pytest.skip("numba not importable")
        monkeypatch.setattr(pool, "MIN_NUMBA_SIZE", 0)
    else:
        monkeypatch.setattr(pool, "USE_NUMBA", False)
    return request.param


def _torch_grad(fn, x, gy):
    tx = torch.tensor(x, requires_grad=True)
    out = fn(tx)
    y = out[0] if isinstance(out, tuple) else out
    y.backward(torch.tensor(gy))
    return out, tx.grad.numpy()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,k,s,p,d,ceil", MAX_CASES)
def test_max_pool2d_matches_torch(shape, k, s, p, d, ceil, dtype, max_path):
    x = rng.standard_normal(shape).astype(dtype)
    y, idx = pool.max_pool2d_forward(x, k, s, p, d, ceil)
    gy = rng.standard_normal(y.shape).astype(dtype)
    (ty, tidx), tgx = _torch_grad(
        lambda t: F.max_pool2d(t, k, s, p, d, ceil_mode=ceil, return_indices=True), x, gy)
    np.testing.assert_array_equal(y, ty.detach().numpy())
    np.testing.assert_array_equal(idx, tidx.numpy())
    gx = pool.max_pool2d_backward(gy, idx, x.shape)
    assert gx.dtype == dtype
    np.testing.assert_allclose(gx, tgx, rtol=1e-6, atol=1e-6)


def test_max_pool2d_ties_nan_and_infinite_values(max_path):
    x = np.array([[[[1, 1, -np.inf, -np.inf], [1, np.nan, -np.inf, -np.inf],
                    [2, 2, 3, 3], [2, 2, 3, 3]]]], np.float32)
    y, idx = pool.max_pool2d_forward(x, 2, 2, 0, 1, False)
    ty, tidx = F.max_pool2d(torch.tensor(x), 2, 2, return_indices=True)
    np.testing.assert_array_equal(y, ty.numpy())
    np.testing.assert_array_equal(idx, tidx.numpy())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,k,s,p,d,ceil", [
    ((1, 64, 112, 112), 3, 2, 1, 1, False),     # ResNet's stem pool at batch 1
    ((1, 5, 17, 13), 3, 2, 1, 1, True),
    ((2, 3, 15, 11), 3, 2, 1, 1, False),
    ((1, 4, 9, 10), (3, 2), (2, 3), (1, 1), (2, 1), True),
    ((1, 3, 8, 8), 2, 2, 0, 1, False),
    ((1, 2, 7, 9), 3, 1, 1, 1, True),
])
def test_max_pool2d_several_nans_ties_and_inf_per_window_match_torch(shape, k, s, p, d, ceil,
                                                                     dtype, max_path):
    """Dense ties, -inf and several NaNs per window, batch 1 and odd sizes, through the NumPy
    taps and the Numba kernels: values and indices as torch's, whose walk replaces on a larger
    value or a NaN (the first maximum, the last NaN in window order). Both paths reported the
    first NaN; the separable Numba kernel on NaN-free planes is checked on the plain planes."""
    x = rng.integers(-2, 3, shape).astype(dtype)
    x[x == 2] = -np.inf
    x[:, ::2][x[:, ::2] == -2] = np.nan        # even planes hold NaNs, odd planes none
    y, idx = pool.max_pool2d_forward(x, k, s, p, d, ceil)
    ty, tidx = F.max_pool2d(torch.tensor(x), k, s, p, d, ceil_mode=ceil, return_indices=True)
    np.testing.assert_array_equal(y, ty.numpy())
    np.testing.assert_array_equal(idx, tidx.numpy())
    x = rng.standard_normal(shape).astype(dtype)
    y, idx = pool.max_pool2d_forward(x, k, s, p, d, ceil)
    ty, tidx = F.max_pool2d(torch.tensor(x), k, s, p, d, ceil_mode=ceil, return_indices=True)
    np.testing.assert_array_equal(y, ty.numpy())
    np.testing.assert_array_equal(idx, tidx.numpy())


def test_max_pool2d_runs_the_serial_kernel_while_the_parallel_one_compiles(monkeypatch):
    """With the parallel kernel not compiled yet (its compile takes tens of seconds), the serial
    Numba kernel over ember's threads runs, not the NumPy taps (~10x slower: ResNet-18's stem
    pool spent a cold process's first minute there)."""
    pytest.importorskip("numba")
    from ember.kernels.runtime import compiler, threads
    nb = pool._kernels()
    real = compiler.ready
    monkeypatch.setattr(compiler, "ready", lambda f, sig, force=False, later=False:
                        False if f is nb.planes_parallel else real(f, sig, True))
    monkeypatch.setattr(threads, "tbb_parts", lambda n, t, per_thread=4: 4)
    monkeypatch.setattr(pool, "_runnable_keys", set())   # (readiness remembered by earlier tests)
    monkeypatch.setattr(pool, "_running_max", lambda *a: pytest.fail("the NumPy taps ran"))
    monkeypatch.setattr(pool, "MIN_NUMBA_SIZE", 0)
    x = rng.standard_normal((1, 8, 15, 13)).astype(np.float32)
    y, idx = pool.max_pool2d_forward(x, 3, 2, 1, 1, False)
    ty, tidx = F.max_pool2d(torch.tensor(x), 3, 2, 1, return_indices=True)
    np.testing.assert_array_equal(y, ty.numpy())
    np.testing.assert_array_equal(idx, tidx.numpy())


def test_adaptive_max_pool2d_several_nans_per_window_match_torch(max_path):
    x = rng.integers(-2, 3, (1, 3, 7, 9)).astype(np.float64)
    x[x == 2] = np.nan
    x[x == -2] = -np.inf
    for out in [(3, 4), (2, 2), (5, 7)]:
        y, idx = pool.adaptive_max_pool2d_forward(x, out)
        ty, tidx = F.adaptive_max_pool2d(torch.tensor(x), out, return_indices=True)
        np.testing.assert_array_equal(y, ty.numpy())
        np.testing.assert_array_equal(idx, tidx.numpy())


@pytest.mark.parametrize("out", [(1, 1), (4, 2), (2, 3), (8, 6)])
def test_adaptive_max_pool2d_of_equal_windows_is_max_pool2d_as_torch(out, max_path):
    """Windows that divide the plane (a global max pool, 8 -> 4) run max_pool2d's kernels: the
    same values and indices as torch, ties to the first, NaN and -inf windows included."""
    x = rng.integers(-2, 3, (2, 3, 8, 6)).astype(np.float64)
    x[x == 2] = np.nan
    x[0, 0, :4, :3] = -np.inf
    y, idx = pool.adaptive_max_pool2d_forward(x, out)
    ty, tidx = F.adaptive_max_pool2d(torch.tensor(x), out, return_indices=True)
    np.testing.assert_array_equal(y, ty.numpy())
    np.testing.assert_array_equal(idx, tidx.numpy())


AVG_CASES = [  # (shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
    ((2, 3, 9, 8), 2, 2, 0, False, True, None),
    ((2, 3, 9, 8), 3, 2, 1, True, True, None),
    ((2, 3, 9, 8), 3, 2, 1, True, False, None),
    ((1, 2, 10, 11), (3, 2), (2, 1), (1, 1), False, False, None),
    ((1, 2, 7, 7), 3, 2, 1, True, True, 5),
    ((1, 1, 6, 5), 2, None, 1, True, False, None),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,k,s,p,ceil,cip,div", AVG_CASES)
def test_avg_pool2d_matches_torch(shape, k, s, p, ceil, cip, div, dtype):
    x = rng.standard_normal(shape).astype(dtype)
    y = pool.avg_pool2d_forward(x, k, s, p, ceil, cip, div)
    gy = rng.standard_normal(y.shape).astype(dtype)
    ty, tgx = _torch_grad(lambda t: F.avg_pool2d(t, k, s, p, ceil, cip, div), x, gy)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    assert y.dtype == dtype and y.flags.c_contiguous
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=tol, atol=tol)
    gx = pool.avg_pool2d_backward(gy, x.shape, k, s, p, ceil, cip, div)
    np.testing.assert_allclose(gx, tgx, rtol=tol, atol=tol)


@pytest.mark.parametrize("shape,out", [((2, 3, 9, 8), (4, 3)), ((1, 2, 7, 10), 3),
                                       ((1, 1, 5, 5), (5, None)), ((1, 1, 4, 6), (7, 9))])
def test_adaptive_pool2d_matches_torch(shape, out):
    x = rng.standard_normal(shape)
    y = pool.adaptive_avg_pool2d_forward(x, out)
    gy = rng.standard_normal(y.shape)
    ty, tgx = _torch_grad(lambda t: F.adaptive_avg_pool2d(t, out), x, gy)
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(pool.adaptive_avg_pool2d_backward(gy, x.shape), tgx, atol=1e-12)
    y, idx = pool.adaptive_max_pool2d_forward(x, out)
    (ty, tidx), tgx = _torch_grad(lambda t: F.adaptive_max_pool2d(t, out, return_indices=True),
                                  x, gy)
    np.testing.assert_array_equal(y, ty.detach().numpy())
    np.testing.assert_array_equal(idx, tidx.numpy())
    np.testing.assert_allclose(pool.adaptive_max_pool2d_backward(gy, idx, x.shape), tgx,
                               atol=1e-12)


def test_pool1d_matches_torch():
    x = rng.standard_normal((2, 3, 13))
    y, idx = pool.max_pool1d_forward(x, 3, 2, 1, 2, True)
    gy = rng.standard_normal(y.shape)
    (ty, tidx), tgx = _torch_grad(lambda t: F.max_pool1d(t, 3, 2, 1, 2, True, True), x, gy)
    np.testing.assert_array_equal(idx, tidx.numpy())
    np.testing.assert_allclose(pool.max_pool1d_backward(gy, idx, x.shape), tgx, atol=1e-12)
    y = pool.avg_pool1d_forward(x, 4, 3, 2, True, False)
    gy = rng.standard_normal(y.shape)
    ty, tgx = _torch_grad(lambda t: F.avg_pool1d(t, 4, 3, 2, True, False), x, gy)
    np.testing.assert_allclose(y, ty.detach().numpy(), atol=1e-12)
    np.testing.assert_allclose(pool.avg_pool1d_backward(gy, x.shape, 4, 3, 2, True, False), tgx,
                               atol=1e-12)
    y = pool.adaptive_avg_pool1d_forward(x, 5)
    gy = rng.standard_normal(y.shape)
    ty, tgx = _torch_grad(lambda t: F.adaptive_avg_pool1d(t, 5), x, gy)
    np.testing.assert_allclose(y, ty.detach().numpy(), atol=1e-12)
    np.testing.assert_allclose(pool.adaptive_avg_pool1d_backward(gy, x.shape), tgx, atol=1e-12)
    y, idx = pool.adaptive_max_pool1d_forward(x, 4)
    (ty, tidx), tgx = _torch_grad(lambda t: F.adaptive_max_pool1d(t, 4, True), x, gy[..., :4])
    np.testing.assert_array_equal(idx, tidx.numpy())
    np.testing.assert_allclose(pool.adaptive_max_pool1d_backward(gy[..., :4], idx, x.shape), tgx,
                               atol=1e-12)


@pytest.mark.parametrize("call,match", [
    (lambda x: pool.max_pool2d_forward(x, 2, 2, 2, 1, False), "max_pool2d: padding"),
    (lambda x: pool.avg_pool2d_forward(x, 3, 1, 2, False, True, None), "avg_pool2d: padding"),
    (lambda x: pool.max_pool2d_forward(x, 9, 1, 0, 1, False), "max_pool2d: input"),
    (lambda x: pool.max_pool2d_forward(x[0], 2, 2, 0, 1, False), "max_pool2d: expected a 4-d"),
    (lambda x: pool.adaptive_avg_pool2d_forward(x, (0, 2)), "adaptive_avg_pool2d: output_size"),
])
def test_pool_errors_name_the_op(call, match):
    with pytest.raises(ValueError, match=match):
        call(np.zeros((1, 1, 5, 5)))


def test_padding_limits_match_torch():
    x = np.zeros((1, 1, 9, 9))
    for k, p, d in [(3, 1, 1), (3, 2, 2), (2, 1, 1), (3, 2, 1), (4, 2, 1), (3, 3, 3)]:
        try:
            F.max_pool2d(torch.tensor(x), k, 1, p, d)
            torch_ok = True
        except RuntimeError:
            torch_ok = False
        try:
            pool.max_pool2d_forward(x, k, 1, p, d, False)
            ours_ok = True
        except ValueError:
            ours_ok = False
        assert ours_ok == torch_ok, (k, p, d)


@pytest.mark.parametrize("shape,k,s,p,d,ceil", [((4, 3, 16, 16), 2, 2, 0, 1, False),
                                                ((2, 3, 9, 9), 3, 2, 1, 1, True),
                                                ((2, 3, 11, 10), 3, 1, 1, 2, False),
                                                ((1, 2, 7, 7), 2, 3, 1, 1, True)])
def test_max_pool_values_only_path_matches_torch(shape, k, s, p, d, ceil):
    torch = pytest.importorskip("torch")
    from ember.kernels.pool.pool2d import max_pool2d_values
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    x[0, 0, 0, 0] = np.nan
    x[0, 1, 1:3, 1:3] = -np.inf
    ref = torch.nn.functional.max_pool2d(torch.from_numpy(x), k, s, p, d, ceil).numpy()
    np.testing.assert_array_equal(max_pool2d_values(x, k, s, p, d, ceil), ref)


@pytest.mark.parametrize("bad", [{"kernel_size": True}, {"kernel_size": 2.0}, {"stride": 0},
                                 {"padding": 2}, {"dilation": 1.0}])
def test_remembered_pool_arguments_never_hide_an_error(bad):
    x = np.zeros((1, 2, 6, 6), np.float32)
    args = dict(kernel_size=2, stride=2, padding=0, dilation=1)
    pool.max_pool2d_forward(x, args["kernel_size"], args["stride"], args["padding"],
                            args["dilation"], False)
    args.update(bad)
    with pytest.raises((ValueError, TypeError)):
        pool.max_pool2d_forward(x, args["kernel_size"], args["stride"], args["padding"],
                                args["dilation"], False)


def test_remembered_pool_arguments_give_the_same_result():
    x = np.random.default_rng(0).standard_normal((2, 3, 7, 7)).astype(np.float32)
    first = pool.max_pool2d_forward(x, (3, 2), (2, 1), (1, 0), 1, True)
    again = pool.max_pool2d_forward(x, (3, 2), (2, 1), (1, 0), 1, True)
    listed = pool.max_pool2d_forward(x, [3, 2], [2, 1], [1, 0], [1, 1], True)
    for a, b in ((first, again), (first, listed)):
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])


def test_the_2x2_pool_split_over_threads_equals_one_chunk(monkeypatch):
    """The 2x2 forward runs in one chunk below ``POOL_2X2_PARALLEL_SIZE`` outputs (a pool
    hand-over costs more than LeNet's pools) and split from there: same values and indices."""
    if pool._kernels() is None:
        pytest.skip("needs Numba")
    from ember.kernels.runtime.threads import get_num_threads, set_num_threads
    x = np.random.default_rng(3).standard_normal((4, 6, 12, 12)).astype(np.float32)
    x[0, 0, :2, :2] = np.nan
    one = pool.max_pool2d_forward(x, 2, 2, 0, 1, False)
    before = get_num_threads()
    monkeypatch.setattr(pool, "POOL_2X2_PARALLEL_SIZE", 0)
    set_num_threads(2)
    try:
        split = pool.max_pool2d_forward(x, 2, 2, 0, 1, False)
    finally:
        set_num_threads(before)
    np.testing.assert_array_equal(one[0], split[0])
    np.testing.assert_array_equal(one[1], split[1])


def test_the_values_only_pool_split_over_tbb_equals_one_chunk(monkeypatch):
    """From ``VALUES_TBB_SIZE`` outputs the values-only pool runs its planes on Numba's TBB
    threads (``planes_values_parallel``): the same values as one chunk, NaN and -inf windows
    included."""
    from tests.kernels.numba_threads import require_numba_threads
    require_numba_threads(2)
    if pool._kernels() is None:
        pytest.skip("needs Numba")
    from ember.kernels.runtime import threads
    x = np.random.default_rng(4).standard_normal((2, 7, 15, 13)).astype(np.float32)
    x[0, 0, 0, 0] = np.nan
    x[1, 2, :3, :3] = -np.inf
    monkeypatch.setattr(pool, "VALUES_TBB_SIZE", 1 << 30)
    monkeypatch.setattr(pool, "VALUES_PARALLEL_SIZE", 1 << 30)
    one = pool.max_pool2d_values(x, 3, 2, 1, 1, True)
    monkeypatch.setattr(pool, "VALUES_TBB_SIZE", 0)
    before = threads.get_num_threads()
    threads.set_num_threads(2)
    try:
        if threads.parallel_layer() != "tbb":
            pytest.skip("Numba's TBB layer is not the threading layer here")
        pool.max_pool2d_values(x, 3, 2, 1, 1, True)   # compiles the parallel kernel (sync)
        nb, calls = pool._kernels(), []
        real = nb.planes_values_parallel
        monkeypatch.setattr(nb, "planes_values_parallel",
                            lambda *a: calls.append(a[-1]) or real(*a))
        split = pool.max_pool2d_values(x, 3, 2, 1, 1, True)
    finally:
        threads.set_num_threads(before)
    assert len(calls) == 1 and calls[0] > 1   # this call ran the kernel, in several runs
    np.testing.assert_array_equal(one, split)


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
    pytest.importorskip("numba")
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


def test_max_pool2d_scatter_refuses_indices_outside_the_plane(monkeypatch):
    pytest.importorskip("numba")
    monkeypatch.setattr(pool, "MIN_NUMBA_SIZE", 0)
    gy = np.ones((1, 2, 2, 2), np.float32)
    idx = np.zeros((1, 2, 2, 2), np.int64)
    idx[0, 1, 1, 1] = 16
    with pytest.raises(ValueError, match="max_pool2d_backward: indices outside"):
        pool.max_pool2d_backward(gy, idx, (1, 2, 4, 4))


def test_max_pool2d_scatter_split_over_threads_equals_inline(monkeypatch):
    pytest.importorskip("numba")
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


@pytest.mark.parametrize("shape", [(3, 4, 8, 8), (2, 3, 9, 11), (1, 2, 2, 2)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_max_pool2d_2x2_numpy_path_equals_the_general_taps(shape, dtype, monkeypatch):
    """The 2x2 NumPy path (``_max_2x2``) gives the general taps' values and indices: ties,
    all -inf windows, odd sizes, a non-contiguous input; a window with NaN goes to the taps."""
    monkeypatch.setattr(pool, "USE_NUMBA", False)
    x = rng.integers(-2, 3, shape).astype(dtype)
    x[x == 2] = -np.inf
    x = x.transpose(0, 1, 3, 2).copy().transpose(0, 1, 3, 2)
    fast = pool._max_2x2(x, (shape[2] // 2, shape[3] // 2))
    assert fast is not None
    monkeypatch.setattr(pool, "_max_2x2", lambda x, out: None)
    y, idx = pool.max_pool2d_forward(x, 2, 2, 0, 1, False)
    np.testing.assert_array_equal(fast[0], y)
    np.testing.assert_array_equal(fast[1], idx)
    x[0, 0, 0, 1] = np.nan
    assert pool._max_2x2(x, (shape[2] // 2, shape[3] // 2)) is None


@pytest.mark.parametrize("shape", [(0, 3, 8, 8), (2, 0, 8, 8)])
def test_max_pool2d_backward_of_an_empty_batch_is_empty(shape, max_path):
    x = np.zeros(shape, np.float32)
    y, idx = pool.max_pool2d_forward(x, 2, 2, 0, 1, False)
    gx = pool.max_pool2d_backward(np.ones(y.shape, np.float32), idx, shape)
    assert gx.shape == shape and gx.dtype == np.float32
