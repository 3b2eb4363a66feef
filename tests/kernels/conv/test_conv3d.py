"""3-d convolution and transposed convolution entry points on ndarrays: every direction against
torch's conv3d / conv_transpose3d and their autograd gradients (float64, float32, integers),
3- and 6-int padding, strides, dilations, groups, bias; argument errors as KernelError."""
import numpy as np
import pytest

from ember.kernels import conv as C
from ember.kernels.errors import KernelError

torch = pytest.importorskip("torch")
TF = torch.nn.functional
rng = np.random.default_rng(3)

# (input shape, weight shape, stride, padding, dilation, groups)
CASES = [
    ((2, 3, 5, 6, 4), (4, 3, 3, 2, 2), 1, 1, 1, 1),
    ((1, 4, 6, 5, 7), (6, 2, 2, 3, 3), (2, 1, 2), (1, 0, 2), (1, 2, 1), 2),
    ((2, 2, 7, 4, 5), (2, 1, 3, 1, 2), (1, 2, 1), 0, (2, 1, 2), 2),
]
IDS = [str(i) for i in range(len(CASES))]


def _torch_conv3d(x, w, b, gy, stride, padding, dilation, groups):
    xt = torch.tensor(x, requires_grad=True)
    wt = torch.tensor(w, requires_grad=True)
    y = TF.conv3d(xt, wt, None if b is None else torch.tensor(b), stride, padding, dilation,
                  groups)
    y.backward(torch.tensor(gy))
    return y.detach().numpy(), xt.grad.numpy(), wt.grad.numpy()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_conv3d_every_direction_matches_torch(case, dtype):
    xs, ws, st, pad, dil, g = case
    x, w = rng.standard_normal(xs).astype(dtype), rng.standard_normal(ws).astype(dtype)
    b = rng.standard_normal(ws[0]).astype(dtype)
    y = C.conv3d_forward(x, w, b, st, pad, dil, g)
    gy = rng.standard_normal(y.shape).astype(dtype)
    y_ref, gx_ref, gw_ref = _torch_conv3d(x.astype(np.float64), w.astype(np.float64),
                                          b.astype(np.float64), gy.astype(np.float64), st, pad,
                                          dil, g)
    tol = 1e-4 if dtype == np.float32 else 1e-12
    gx = C.conv3d_input_grad(gy, w, x.shape, st, pad, dil, g)
    gw = C.conv3d_weight_grad(gy, x, w.shape, st, pad, dil, g)
    for out, ref in ((y, y_ref), (gx, gx_ref), (gw, gw_ref)):
        assert out.dtype == dtype and out.shape == ref.shape
        np.testing.assert_allclose(out, ref, rtol=tol, atol=tol)


def test_six_int_padding_is_low_high_per_axis():
    x, w = rng.standard_normal((1, 2, 4, 5, 3)), rng.standard_normal((3, 2, 2, 2, 2))
    pads = (1, 0, 0, 2, 2, 1)                   # (d_lo, d_hi, h_lo, h_hi, w_lo, w_hi)
    ref = TF.conv3d(TF.pad(torch.tensor(x), (2, 1, 0, 2, 1, 0)), torch.tensor(w)).numpy()
    np.testing.assert_allclose(C.conv3d_forward(x, w, None, 1, pads, 1, 1), ref, rtol=1e-12,
                               atol=1e-12)


# (input shape, weight shape (Cin, Cout/groups, kd, kh, kw), stride, padding, output_padding,
#  groups, dilation)
TRANSPOSED = [
    ((2, 4, 3, 4, 3), (4, 3, 3, 2, 2), (2, 1, 2), (1, 0, 1), (1, 0, 0), 1, 1),
    ((1, 4, 4, 3, 3), (4, 2, 2, 3, 2), 1, 0, 0, 2, (1, 2, 1)),
]


@pytest.mark.parametrize("case", TRANSPOSED, ids=["strided", "grouped-dilated"])
def test_conv_transpose3d_every_direction_matches_torch(case):
    xs, ws, st, pad, opad, g, dil = case
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    b = rng.standard_normal(ws[1] * g)
    y = C.conv_transpose3d_forward(x, w, b, st, pad, opad, g, dil)
    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    yt = TF.conv_transpose3d(xt, wt, torch.tensor(b), st, pad, opad, g, dil)
    gy = rng.standard_normal(tuple(yt.shape))
    yt.backward(torch.tensor(gy))
    np.testing.assert_allclose(y, yt.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(C.conv_transpose3d_input_grad(gy, w, x.shape, st, pad, opad, g,
                                                             dil), xt.grad.numpy(),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(C.conv_transpose3d_weight_grad(gy, x, w.shape, st, pad, opad, g,
                                                              dil), wt.grad.numpy(),
                               rtol=1e-12, atol=1e-12)


def test_integer_convolution_is_exact():
    x = rng.integers(-50, 50, (2, 2, 4, 4, 4)).astype(np.int64)
    w = rng.integers(-9, 9, (3, 2, 2, 2, 2)).astype(np.int64)
    y = C.conv3d_forward(x, w, None, 1, 1, 1, 1)
    assert y.dtype == np.int64
    np.testing.assert_array_equal(y, TF.conv3d(torch.tensor(x), torch.tensor(w), padding=1)
                                  .numpy())


@pytest.mark.parametrize("call, message", [
    (lambda: C.conv3d_forward(np.zeros((1, 2, 4, 4)), np.zeros((1, 2, 2, 2)), None, 1, 0, 1, 1),
     "5-d input"),
    (lambda: C.conv3d_forward(np.zeros((1, 3, 4, 4, 4)), np.zeros((2, 2, 2, 2, 2)), None, 1, 0,
                              1, 1), "to have 2 channels"),
    (lambda: C.conv3d_forward(np.zeros((1, 2, 4, 4, 4)), np.zeros((2, 2, 2, 2, 2)), None, 0, 0,
                              1, 1), "must be positive"),
    (lambda: C.conv3d_forward(np.zeros((1, 2, 4, 4, 4)), np.zeros((2, 2, 2, 2, 2)), None, 1,
                              (1, 2), 1, 1), "padding must be 3 or 6"),
    (lambda: C.conv3d_forward(np.zeros((1, 2, 2, 4, 4)), np.zeros((2, 2, 3, 2, 2)), None, 1, 0,
                              1, 1), "smaller than the dilated kernel"),
    (lambda: C.conv3d_forward(np.zeros((1, 2, 4, 4, 4)), np.zeros((2, 2, 2, 2, 2), np.float32),
                              None, 1, 0, 1, 1), "one dtype"),
    (lambda: C.conv3d_forward(np.zeros((1, 2, 4, 4, 4)), np.zeros((2, 2, 2, 2, 2)),
                              np.zeros(3), 1, 0, 1, 1), "bias must be"),
    (lambda: C.conv3d_input_grad(np.zeros((1, 2, 2, 2, 2)), np.zeros((2, 2, 2, 2, 2)),
                                 (1, 2, 4, 4, 4), 1, 0, 1, 1), "grad_output has shape"),
    (lambda: C.conv_transpose3d_forward(np.zeros((1, 2, 3, 3, 3)), np.zeros((2, 2, 2, 2, 2)),
                                        None, 1, 0, 1, 1, 1), "output padding"),
])
def test_argument_errors(call, message):
    with pytest.raises(KernelError, match=message):
        call()
    assert issubclass(KernelError, ValueError)
