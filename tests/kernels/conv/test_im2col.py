"""im2col convolution (ember.kernels.conv.im2col): the Numba col2im of the stride-1 input
gradient against the NumPy one and torch."""
import numpy as np
import pytest

from ember.kernels.conv import im2col

rng = np.random.default_rng(0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("xs,ws,pad,dil", [
    ((64, 6, 14, 14), (16, 6, 5, 5), (0, 0), (1, 1)),    # LeNet conv2
    ((3, 2, 9, 11), (8, 2, 3, 4), (1, 2), (2, 1)),
    ((2, 3, 7, 7), (5, 3, 5, 5), (2, 2), (1, 1)),
])
def test_input_grad_rows_numba_col2im_equals_numpy_and_torch(xs, ws, pad, dil, dtype,
                                                             monkeypatch):
    pytest.importorskip("numba")
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
