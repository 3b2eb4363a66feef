"""The Numba running-sum kernels (ember.kernels.scan_numba) against NumPy's float64 running sum
rounded once: every axis position (first, middle, last), both directions, row counts around
the kernel's block of ROWS rows, and the prange driver equal to the one-thread kernel."""
import numpy as np
import pytest

pytest.importorskip("numba")

from ember.kernels import scan_numba  # noqa: E402


def _expected(a, axis, reverse):
    src = np.flip(a, axis) if reverse else a
    out = np.cumsum(src, axis=axis, dtype=np.float64).astype(a.dtype)
    return np.flip(out, axis) if reverse else out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,axis", [((19, 300), 1), ((8, 5), 1), ((7,), 0), ((300, 9), 0),
                                        ((4, 6, 5), 1), ((3, 1, 2), 1)])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumsum_blocks_and_driver_equal_the_float64_running_sum(dtype, shape, axis, reverse):
    a = np.random.default_rng(sum(shape)).standard_normal(shape).astype(dtype) * 100
    a.reshape(-1)[::7] = 1e-4           # small terms a float32 running sum would drop
    n = shape[axis]
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    outer = a.size // (n * inner)
    expected = _expected(a, axis, reverse)
    out = np.full(shape, np.nan, dtype)
    scan_numba.cumsum_blocks(a.reshape(-1), out.reshape(-1), n, inner, reverse, 0, outer)
    np.testing.assert_array_equal(out, expected)
    for parts in (1, 3):
        out = np.full(shape, np.nan, dtype)
        scan_numba.cumsum_parallel(a.reshape(-1), out.reshape(-1), n, inner, reverse, outer,
                                   parts)
        np.testing.assert_array_equal(out, expected)


def test_cumsum_blocks_propagates_nan_and_inf_as_the_running_sum():
    a = np.array([[1.0, np.inf, -np.inf, 2.0], [np.nan, 1.0, 2.0, 3.0]], np.float32)
    out = np.empty_like(a)
    scan_numba.cumsum_blocks(a.reshape(-1), out.reshape(-1), 4, 1, False, 0, 2)
    np.testing.assert_array_equal(out, _expected(a, 1, False))
