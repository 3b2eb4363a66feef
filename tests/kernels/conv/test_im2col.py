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


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("subbatch_bytes", [1, 4 << 20])
@pytest.mark.parametrize("xs,ws,stride,pad,dil,groups", [
    ((4, 8, 14, 14), (8, 8, 3, 3), (2, 2), (1, 1), (1, 1), 1),     # ResNet's strided 3x3
    ((3, 6, 11, 10), (4, 3, 3, 2), (2, 3), (1, 2), (2, 1), 2),
    ((1, 3, 9, 9), (5, 3, 5, 5), (3, 2), (2, 0), (1, 1), 1),
    ((5, 4, 7, 7), (6, 4, 3, 3), (2, 2), (0, 0), (1, 1), 1),
])
def test_strided_input_grad_numba_col2im_equals_numpy_and_torch(xs, ws, stride, pad, dil, groups,
                                                                subbatch_bytes, dtype,
                                                                monkeypatch):
    """The strided input gradient (GEMM, then col2im) with columns per image (sub-batches of
    one image) and over a sub-batch (``by_channel``): the Numba col2im gives the NumPy slice
    adds' bits, and torch's gradient."""
    pytest.importorskip("numba")
    torch = pytest.importorskip("torch")
    import ember.kernels.conv as C
    from ember.backends import conv as settings
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal(ws).astype(dtype)
    ho = torch.conv2d(torch.tensor(x), torch.tensor(w), None, stride, pad, dil, groups).shape
    gy = rng.standard_normal(ho).astype(dtype)
    ref = torch.ops.aten.convolution_backward(
        torch.tensor(gy), torch.tensor(x), torch.tensor(w), None, list(stride), list(pad),
        list(dil), False, [0, 0], groups, [True, False, False])[0].numpy()
    layouts = []
    monkeypatch.setattr(im2col, "col2im",
                        lambda *a, f=im2col.col2im: layouts.append(a[3]) or f(*a))
    monkeypatch.setattr(im2col, "SUBBATCH_BYTES", subbatch_bytes)
    monkeypatch.setattr(settings, "algorithm", "im2col")
    fast = C.conv2d_input_grad(gy, w, xs, stride, pad, dil, groups)
    monkeypatch.setattr(im2col, "USE_NUMBA", False)
    slow = C.conv2d_input_grad(gy, w, xs, stride, pad, dil, groups)
    assert layouts and all(layouts) == (subbatch_bytes > 1 and xs[0] > 1)
    np.testing.assert_array_equal(fast, slow)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(fast, ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("xs,ws,stride,groups,swap", [
    ((2, 64, 9, 9), (512, 64, 3, 3), 2, 1, False),    # 294,912 weight elements: dW itself
    ((2, 64, 8, 8), (512, 32, 3, 3), 1, 2, True),     # grouped, 147,456: the swapped product
    ((3, 16, 12, 12), (32, 16, 5, 5), 1, 1, True),    # small: the swapped product
])
def test_weight_grad_of_large_and_small_weights_equals_torch(xs, ws, stride, groups, swap,
                                                             monkeypatch):
    """The weight gradient computed as dW (over SWAP_MAX_ELEMENTS weight elements) or as dW^T
    copied back (``im2col.swapped``): each order, also forced, gives torch's gradient."""
    torch = pytest.importorskip("torch")
    import ember.kernels.conv as C
    from ember.backends import conv as settings
    from ember.kernels.conv.geometry import geometry
    x = rng.standard_normal(xs)
    w = rng.standard_normal(ws)
    gy = rng.standard_normal(torch.conv2d(torch.tensor(x), torch.tensor(w), None, stride, 1, 1,
                                          groups).shape)
    ref = torch.ops.aten.convolution_backward(
        torch.tensor(gy), torch.tensor(x), torch.tensor(w), None, [stride] * 2, [1, 1], [1, 1],
        False, [0, 0], groups, [False, True, False])[1].numpy()
    assert im2col.swapped(geometry("conv2d", xs, ws, stride, 1, 1, groups)) is swap
    monkeypatch.setattr(settings, "algorithm", "im2col")
    for limit in (im2col.SWAP_MAX_ELEMENTS, 0, 1 << 30):
        monkeypatch.setattr(im2col, "SWAP_MAX_ELEMENTS", limit)
        got = C.conv2d_weight_grad(gy, x, ws, stride, 1, 1, groups)
        np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-10)
