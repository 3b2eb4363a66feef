"""The three DFT kernels against torch's ATen ones (torch._fft_c2c / _fft_r2c / _fft_c2r) for
every normalization, several dims and both precisions; argument errors; resize_dim."""
import numpy as np
import pytest

from ember.kernels import fft as K
from ember.kernels.errors import KernelError

torch = pytest.importorskip("torch")
rng = np.random.default_rng(41)


def _close(ours, ref):
    assert ours.dtype == ref.dtype and ours.shape == ref.shape
    tol = 1e-4 if ref.dtype in (np.float32, np.complex64) else 1e-12
    np.testing.assert_allclose(ours, ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("dim", [(1,), (0, 2), (-1, 0)])
@pytest.mark.parametrize("norm", [0, 1, 2])
def test_c2c_both_directions(dtype, dim, norm):
    """Negative dims are wrapped for torch's ATen op (its Python callers wrap them)."""
    a = (rng.standard_normal((4, 5, 6)) + 1j * rng.standard_normal((4, 5, 6))).astype(dtype)
    for forward in (True, False):
        _close(K.fft_c2c(a, dim, norm, forward),
               torch._fft_c2c(torch.tensor(a), [d % a.ndim for d in dim], norm, forward).numpy())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("dim", [(1,), (0, 2)])
@pytest.mark.parametrize("norm", [0, 1, 2])
def test_r2c_onesided_and_full_then_c2r_back(dtype, dim, norm):
    a = rng.standard_normal((4, 5, 6)).astype(dtype)
    for onesided in (True, False):
        _close(K.fft_r2c(a, dim, norm, onesided),
               torch._fft_r2c(torch.tensor(a), list(dim), norm, onesided).numpy())
    half = K.fft_r2c(a, dim, norm, True)
    n = a.shape[dim[-1]]
    _close(K.fft_c2r(half, dim, norm, n),
           torch._fft_c2r(torch.tensor(half), list(dim), norm, n).numpy())


def test_no_dims_is_a_copy_or_a_cast():
    a = np.arange(3.0) + 1j
    out = K.fft_c2c(a, (), 0, True)
    np.testing.assert_array_equal(out, a)
    assert not np.shares_memory(out, a)
    assert K.fft_r2c(np.arange(3.0, dtype=np.float32), (), 0, True).dtype == np.complex64


@pytest.mark.parametrize("call, message", [
    (lambda: K.fft_c2c(np.zeros(3), (0,), 0, True), "expects a complex input"),
    (lambda: K.fft_r2c(np.zeros(3, np.complex64), (0,), 0, True), "float32 or float64"),
    (lambda: K.fft_r2c(np.zeros(3, np.float16), (0,), 0, True), "float32 or float64"),
    (lambda: K.fft_c2r(np.zeros(3), (0,), 0, 4), "expects a complex input"),
    (lambda: K.fft_c2c(np.zeros((2, 3), complex), (2,), 0, True), "out of range"),
    (lambda: K.fft_c2c(np.zeros((2, 3), complex), (1, -1), 0, True), "unique"),
    (lambda: K.fft_c2c(np.zeros((0, 3), complex), (0,), 0, True), r"number of data points \(0\)"),
    (lambda: K.fft_c2c(np.zeros(3, complex), (0,), 3, True), "normalization must be"),
    (lambda: K.fft_c2r(np.zeros(3, complex), (), 0, 4), "at least one dimension"),
    (lambda: K.fft_c2r(np.zeros(3, complex), (0,), 0, 0), r"Invalid number of data points"),
])
def test_argument_errors(call, message):
    with pytest.raises(KernelError, match=message):
        call()


def test_resize_dim_pads_or_trims_the_end():
    a = np.arange(6.0).reshape(2, 3)
    assert K.resize_dim(a, 1, 3) is a
    np.testing.assert_array_equal(K.resize_dim(a, 1, 5), [[0, 1, 2, 0, 0], [3, 4, 5, 0, 0]])
    trimmed = K.resize_dim(a, 0, 1)
    np.testing.assert_array_equal(trimmed, [[0, 1, 2]])
    assert not np.shares_memory(trimmed, a)
