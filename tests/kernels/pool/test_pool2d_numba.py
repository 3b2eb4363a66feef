"""The 2-d max-pool Numba kernels: the general and 2x2 plane kernels against the NumPy taps and
torch (ties, NaN, -inf, padding, dilation, ceil_mode), the parallel driver, the values-only
kernel, and the gradient scatter (bad indices counted, not written)."""
import numpy as np
import pytest

from ember.kernels.pool import pool2d as pool

torch = pytest.importorskip("torch")
F = torch.nn.functional

rng = np.random.default_rng(0)


def test_max_pool2d_numba_kernel_equals_numpy_taps(monkeypatch):
    """Random values with ties, NaN and -inf, padded and dilated windows, ceil_mode, many planes
    (split over threads): the Numba kernel gives the NumPy path's values and indices."""
    from ember.kernels.pointwise import has_compiler
    if not has_compiler():
        pytest.skip("numba not importable")
    x = rng.integers(-3, 4, (3, 5, 13, 12)).astype(np.float64)
    x[x == 3] = -np.inf
    x[0, 0, 2, 3] = x[1, 2, 7, 7] = np.nan
    x[2, 4] = -np.inf
    for args in [(2, 2, 0, 1, False), (3, 2, 1, 1, True), ((3, 2), (2, 1), (1, 1), (2, 1), False)]:
        monkeypatch.setattr(pool, "MIN_NUMBA_SIZE", 0)
        y, idx = pool.max_pool2d_forward(x, *args)
        monkeypatch.setattr(pool, "USE_NUMBA", False)
        ry, ridx = pool.max_pool2d_forward(x, *args)
        monkeypatch.setattr(pool, "USE_NUMBA", True)
        np.testing.assert_array_equal(y, ry)
        np.testing.assert_array_equal(idx, ridx)


def test_max_pool2d_2x2_kernel_and_scatter_run(monkeypatch):
    pytest.importorskip("numba")
    from ember.kernels.pool import pool2d_numba as pool_numba
    monkeypatch.setattr(pool, "MIN_NUMBA_SIZE", 0)
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    y, idx = pool.max_pool2d_forward(x, 2, 2, 0, 1, False)
    pool.max_pool2d_backward(y, idx, x.shape)
    assert pool_numba.planes_2x2.overloads and pool_numba.scatter.overloads


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_max_pool2d_2x2_kernel_equals_general_kernel_on_ties_nan_and_inf(dtype):
    """Dense ties, several NaNs and -inf per window: the 2x2 kernel's column-pair order gives
    the general kernel's window-order winner (first maximum, last NaN)."""
    pytest.importorskip("numba")
    from ember.kernels.pool import pool2d_numba as pool_numba
    x = rng.integers(-2, 2, (4, 3, 10, 12)).astype(dtype)
    x[x == 1] = np.nan
    x[x == -2] = -np.inf
    y, idx = np.empty((4, 3, 5, 6), dtype), np.empty((4, 3, 5, 6), np.int64)
    ry, ridx = y.copy(), idx.copy()
    pool_numba.planes_2x2(x, y, idx, 0, 12)
    pool_numba.planes(x, 2, 2, 2, 2, 0, 0, 1, 1, ry, ridx, 0, 12)
    np.testing.assert_array_equal(y, ry)
    np.testing.assert_array_equal(idx, ridx)




@pytest.mark.parametrize("k, s, p, d", [(3, 2, 1, 1), ((2, 3), (1, 2), (1, 0), (2, 1))])
def test_planes_and_planes_parallel_match_torch(k, s, p, d):
    pytest.importorskip("numba")
    from ember.kernels.pool import pool2d_numba as pool_numba
    x = rng.standard_normal((2, 3, 11, 10))
    ty, tidx = F.max_pool2d(torch.tensor(x), k, s, p, d, return_indices=True)
    kh, kw = (k, k) if np.isscalar(k) else k
    sh, sw = (s, s) if np.isscalar(s) else s
    ph, pw = (p, p) if np.isscalar(p) else p
    dh, dw = (d, d) if np.isscalar(d) else d
    y = np.full(tuple(ty.shape), np.nan)
    idx = np.full(y.shape, -1, np.int64)
    pool_numba.planes(x, kh, kw, sh, sw, ph, pw, dh, dw, y, idx, 0, 2)    # planes n*C + c
    pool_numba.planes(x, kh, kw, sh, sw, ph, pw, dh, dw, y, idx, 2, 6)
    np.testing.assert_array_equal(y, ty.numpy())
    np.testing.assert_array_equal(idx, tidx.numpy())
    y2, idx2 = np.full_like(y, np.nan), np.full_like(idx, -1)
    pool_numba.planes_parallel(x, kh, kw, sh, sw, ph, pw, dh, dw, y2, idx2, 3)
    np.testing.assert_array_equal(y2, y)
    np.testing.assert_array_equal(idx2, idx)


@pytest.mark.parametrize("k, s, p, ceil", [(3, 2, 1, False), (3, 2, 0, True), (3, 1, 1, False)])
def test_planes_three_tap_loops_on_ties_and_inf_match_torch(k, s, p, ceil):
    """The literal-stride loops of ``planes`` (three window rows, three column taps at stride 1
    or 2) on dense ties and -inf: torch's first-maximum indices."""
    pytest.importorskip("numba")
    from ember.kernels.pool import pool2d_numba as pool_numba
    x = rng.integers(-2, 2, (2, 3, 12, 13)).astype(np.float32)
    x[x == -2] = -np.inf
    ty, tidx = F.max_pool2d(torch.tensor(x), k, s, p, 1, ceil, return_indices=True)
    y = np.full(tuple(ty.shape), np.nan, np.float32)
    idx = np.full(y.shape, -1, np.int64)
    pool_numba.planes(x, k, k, s, s, p, p, 1, 1, y, idx, 0, 6)
    np.testing.assert_array_equal(y, ty.numpy())
    np.testing.assert_array_equal(idx, tidx.numpy())


VALUES_CASES = [  # (shape, kernel, stride, padding, dilation, ceil_mode): each loop of planes_values
    ((2, 3, 13, 17), 3, 2, 1, 1, False),          # 3 taps, stride 2 (ResNet's stem pool)
    ((1, 4, 111, 111), 3, 2, 0, 1, True),         # ceil mode: the last window's rows cut short
    ((2, 3, 9, 10), 3, 1, 1, 1, False),           # 3 taps, stride 1 (GoogLeNet's branch pool)
    ((2, 3, 13, 12), (3, 2), (2, 3), (1, 0), (2, 1), True),   # generic: dilated rows, 2 columns
    ((1, 2, 9, 9), 3, 2, 1, 2, False),            # dilated 3 taps: the generic column loop
    ((2, 2, 10, 11), 5, 3, 2, 1, True),           # 5 taps
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", VALUES_CASES, ids=[str(i) for i in range(len(VALUES_CASES))])
def test_planes_values_matches_torch(case, dtype):
    """The values-only kernel over two plane ranges, on ties, NaN (propagates) and -inf,
    against torch's values."""
    pytest.importorskip("numba")
    from ember.kernels.pool import pool2d_numba as pool_numba
    shape, k, s, p, d, ceil = case
    x = rng.integers(-3, 4, shape).astype(dtype)
    x[x == 3] = -np.inf
    x[0, 0, 1, 2] = x[-1, -1, -2, -1] = np.nan
    ref = F.max_pool2d(torch.tensor(x), k, s, p, d, ceil).numpy()
    two = lambda v: (v, v) if np.isscalar(v) else v   # noqa: E731
    y = np.full(ref.shape, 7, dtype)
    planes = shape[0] * shape[1]
    args = (x, *two(k), *two(s), *two(p), *two(d), y)
    pool_numba.planes_values(*args, 0, planes // 2)
    pool_numba.planes_values(*args, planes // 2, planes)
    np.testing.assert_array_equal(y, ref)


def test_max_pool2d_values_runs_the_kernel_split_over_threads(monkeypatch):
    """``max_pool2d_values`` runs ``planes_values`` (not the NumPy taps) once it is compiled,
    split over ember's threads from ``VALUES_PARALLEL_SIZE`` outputs: torch's values."""
    pytest.importorskip("numba")
    from ember.kernels.runtime import compiler
    from ember.kernels.runtime.threads import get_num_threads, set_num_threads
    real = compiler.ready
    monkeypatch.setattr(compiler, "ready", lambda f, sig, force=False, later=False:
                        real(f, sig, True))
    monkeypatch.setattr(pool, "_tap", lambda *a: pytest.fail("the NumPy taps ran"))
    monkeypatch.setattr(pool, "VALUES_PARALLEL_SIZE", 0)
    x = rng.standard_normal((2, 5, 15, 13)).astype(np.float32)
    x[1, 2, 3, 4] = np.nan
    before = get_num_threads()
    set_num_threads(2)
    try:
        y = pool.max_pool2d_values(x, 3, 2, 1, 1, True)
    finally:
        set_num_threads(before)
    np.testing.assert_array_equal(y, F.max_pool2d(torch.tensor(x), 3, 2, 1, 1, True).numpy())


def test_scatter_adds_at_indices_and_counts_the_bad_ones():
    pytest.importorskip("numba")
    from ember.kernels.pool import pool2d_numba as pool_numba
    gy = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    idx = np.array([[0, 0, 3], [5, -1, 1]])
    gx = np.zeros((2, 4))
    assert pool_numba.scatter(gy, idx, gx, 0, 2) == 2        # 5 and -1 are outside [0, 4)
    np.testing.assert_array_equal(gx, [[3.0, 0, 0, 3.0], [0, 6.0, 0, 0]])
    gx = np.zeros((2, 4))
    assert pool_numba.scatter(gy, idx, gx, 1, 2) == 2
    np.testing.assert_array_equal(gx[0], 0)


@pytest.mark.parametrize("parts", [1, 2, 5])
def test_2x2_and_scatter_prange_drivers_equal_the_serial_kernels(parts):
    """``planes_2x2_parallel`` and ``scatter_parallel`` (runs of planes in a ``prange``) give
    the serial kernels' values, indices and gradients; the scatter zeroes its planes itself
    (the output starts as garbage) and its bad-index count sums over the runs."""
    pytest.importorskip("numba")
    from ember.kernels.pool import pool2d_numba as pool_numba
    x = rng.integers(-2, 3, (3, 4, 6, 8)).astype(np.float32)
    x[x == 2] = np.nan
    y, idx = np.empty((3, 4, 3, 4), np.float32), np.empty((3, 4, 3, 4), np.int64)
    ry, ridx = y.copy(), idx.copy()
    pool_numba.planes_2x2(x, ry, ridx, 0, 12)
    pool_numba.planes_2x2_parallel(x, y, idx, parts)
    np.testing.assert_array_equal(y, ry)
    np.testing.assert_array_equal(idx, ridx)
    gy = rng.standard_normal((12, 12)).astype(np.float32)
    at = ridx.reshape(12, 12).copy()
    at[3, 0], at[7, 5] = -1, 48                  # outside [0, 48): counted, not written
    gx = np.full((12, 48), 7.0, np.float32)
    expect = np.zeros((12, 48), np.float32)
    for p in range(12):
        for t in range(12):
            if 0 <= at[p, t] < 48:
                expect[p, at[p, t]] += gy[p, t]
    assert pool_numba.scatter_parallel(gy, at, gx, parts) == 2
    np.testing.assert_array_equal(gx, expect)
