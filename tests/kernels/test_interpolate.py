"""Separable resampling kernels against torch.nn.functional.interpolate in float64: every mode
(nearest, nearest-exact, linear, cubic, area) over 1-3 spatial axes, up and down, with and without
align_corners, sizes and scales; the backward (an adjoint gather) against torch autograd; the tap
tables' transpose; errors as KernelError."""
import numpy as np
import pytest

from ember.kernels import interpolate as I
from ember.kernels.errors import KernelError

torch = pytest.importorskip("torch")
TF = torch.nn.functional
rng = np.random.default_rng(83)

TORCH_MODE = {("linear", 1): "linear", ("linear", 2): "bilinear", ("linear", 3): "trilinear",
              ("cubic", 2): "bicubic"}

CASES = [  # (input shape, output size, mode, align_corners, scales)
    ((2, 3, 7), (12,), "nearest", None, None),
    ((2, 3, 7), (4,), "nearest-exact", None, None),
    ((2, 3, 5, 6), (9, 4), "nearest", None, None),
    ((2, 3, 7), (12,), "linear", False, None),
    ((2, 3, 7), (5,), "linear", True, None),
    ((1, 2, 5, 6), (9, 4), "linear", False, None),
    ((1, 2, 5, 6), (10, 12), "linear", False, (2.0, 2.0)),
    ((1, 2, 4, 5, 3), (6, 3, 5), "linear", True, None),
    ((1, 2, 5, 6), (9, 11), "cubic", False, None),
    ((1, 2, 5, 6), (3, 8), "cubic", True, None),
    ((2, 3, 9, 7), (4, 3), "area", None, None),
    ((2, 3, 6), (6,), "linear", False, None),                  # unchanged: a copy
]


def _torch_kw(x_ndim, mode, align_corners, scales, out):
    nd = x_ndim - 2
    kw = {"mode": TORCH_MODE.get((mode, nd), mode)}
    if mode in ("linear", "cubic"):
        kw["align_corners"] = align_corners
    if scales is not None:
        kw["scale_factor"] = scales
        kw["recompute_scale_factor"] = False
    else:
        kw["size"] = out
    return kw


@pytest.mark.parametrize("case", CASES, ids=[f"{c[2]}-{len(c[1])}d-{i}" for i, c in
                                             enumerate(CASES)])
def test_forward_and_backward_match_torch(case):
    shape, out, mode, ac, scales = case
    x = rng.standard_normal(shape)
    tx = torch.tensor(x, requires_grad=True)
    ty = TF.interpolate(tx, **_torch_kw(len(shape), mode, ac, scales, out))
    y = I.interpolate_forward(x, out, mode, ac, scales)
    assert y.shape == tuple(ty.shape)
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    g = rng.standard_normal(y.shape)
    ty.backward(torch.tensor(g))
    gx = I.interpolate_backward(g, shape, out, mode, ac, scales)
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_integer_input_nearest_keeps_its_dtype():
    x = rng.integers(0, 100, (1, 1, 4, 5)).astype(np.uint8)      # torch's CPU kernel: uint8
    y = I.interpolate_forward(x, (7, 3), "nearest", None, None)
    assert y.dtype == np.uint8
    np.testing.assert_array_equal(y, TF.interpolate(torch.tensor(x), size=(7, 3)).numpy())
    with pytest.raises(KernelError, match="needs a floating-point input"):
        I.interpolate_forward(x, (7, 3), "linear", False, None)


def test_transpose_table_is_the_adjoint():
    idx = np.array([[0, 1], [1, 2], [2, 2]])
    w = np.array([[0.25, 0.75], [0.5, 0.5], [1.0, 0.0]])
    t_idx, t_w = I.transpose_table(idx, w, 4)
    dense = np.zeros((3, 4))
    np.add.at(dense, (np.repeat(np.arange(3), 2), idx.ravel()), w.ravel())
    back = np.zeros((4, 3))
    np.add.at(back, (np.repeat(np.arange(4), t_idx.shape[1]), t_idx.ravel()), t_w.ravel())
    np.testing.assert_array_equal(back, dense.T)


def test_output_size_from_scale_floors_in_double():
    assert I.output_size_from_scale((5, 7), (1.5, 0.3)) == (7, 2)


@pytest.mark.parametrize("call, message", [
    (lambda: I.interpolate_backward(np.zeros((1, 1, 3)), (1, 1, 4), (4,), "linear", False,
                                    None), "does not match"),
    (lambda: I.interpolate_forward(np.zeros((1, 1, 4)), (3,), "cubic", False, None), "cubic"),
])
def test_errors(call, message):
    with pytest.raises(KernelError, match=message):
        call()
