"""Separable resampling kernels against torch.nn.functional.interpolate in float64: every mode
(nearest, nearest-exact, linear, cubic, area) over 1-3 spatial axes, up and down, with and without
align_corners, sizes and scales; the backward (an adjoint gather) against torch autograd; the tap
tables' transpose; antialiased bilinear / bicubic (down and up, float32 and float64) against
torch's antialias=True forward and backward; errors as KernelError."""
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


AA_CASES = [  # (input (H, W), output size, scales)
    ((17, 23), (5, 7), None),
    ((8, 8), (3, 5), None),
    ((5, 5), (12, 9), None),
    ((30, 41), (11, 15), (0.37, 0.37)),
    ((9, 12), (18, 6), (2.0, 0.5)),
    ((10, 10), (10, 9), (1.05, 0.95)),                     # unchanged height, scale not 1
    ((1, 6), (4, 2), None),
    ((7, 6), (1, 1), None),
]
AA_TOL = {np.float32: dict(rtol=1e-5, atol=2e-6), np.float64: dict(rtol=1e-12, atol=1e-12)}


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("align_corners", [False, True], ids=["ac0", "ac1"])
@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("case", AA_CASES, ids=[f"{c[0]}-{c[1]}" for c in AA_CASES])
def test_antialias_forward_and_backward_match_torch(case, mode, align_corners, dtype):
    shape, out, scales = case
    x = rng.standard_normal((2, 3) + shape).astype(dtype)
    tx = torch.tensor(x, requires_grad=True)
    kw = {"scale_factor": scales} if scales else {"size": out}
    ty = TF.interpolate(tx, mode={"linear": "bilinear", "cubic": "bicubic"}[mode],
                        align_corners=align_corners, antialias=True, **kw)
    assert tuple(ty.shape[2:]) == out
    y = I.interpolate_aa_forward(x, out, mode, align_corners, scales)
    assert y.dtype == dtype and y.shape == tuple(ty.shape)
    np.testing.assert_allclose(y, ty.detach().numpy(), **AA_TOL[dtype])
    g = rng.standard_normal(y.shape).astype(dtype)
    ty.backward(torch.tensor(g))
    gx = I.interpolate_aa_backward(g, x.shape, out, mode, align_corners, scales)
    assert gx.dtype == dtype
    np.testing.assert_allclose(gx, tx.grad.numpy(), **AA_TOL[dtype])


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_antialias_weights_are_torchs_in_float32(mode):
    """Each output row's taps, read off torch by resampling unit impulses, are the same floats."""
    for n, o in [(5, 12), (300, 224), (23, 7)]:
        x = torch.eye(n, dtype=torch.float32).reshape(n, 1, n, 1).expand(n, 2, n, 3).contiguous()
        ref = TF.interpolate(x, size=(o, 3), mode={"linear": "bilinear", "cubic": "bicubic"}[mode],
                             antialias=True)[:, 0, :, 0].T.numpy()
        idx, w = I._aa_taps(n, o, mode, False, None, np.dtype(np.float32))
        dense = np.zeros((o, n), np.float32)
        np.add.at(dense, (np.repeat(np.arange(o), idx.shape[1]), idx.ravel()), w.ravel())
        np.testing.assert_allclose(dense, ref, rtol=0, atol=2e-7)


def test_antialias_taps_are_normalised_and_banded():
    idx, w = I._aa_taps(1000, 30, "cubic", False, None, np.dtype(np.float64))
    np.testing.assert_allclose(w.sum(1), 1, rtol=0, atol=1e-13)
    assert idx.shape[1] <= 2 * int(np.ceil(2 * 1000 / 30)) + 1           # support widened by scale
    idx, w = I._aa_taps(6, 6, "linear", False, 1.0, np.dtype(np.float64))
    np.testing.assert_array_equal(idx[:, 0], np.arange(6))


@pytest.mark.parametrize("call, message", [
    (lambda: I.interpolate_aa_forward(np.zeros((1, 1, 4)), (3,), "linear", False, None), "4-d"),
    (lambda: I.interpolate_aa_forward(np.zeros((1, 1, 4, 4)), (3, 3), "area", False, None),
     "antialiased mode"),
    (lambda: I.interpolate_aa_forward(np.zeros((1, 1, 4, 4), np.uint8), (3, 3), "linear", False,
                                      None), "'linear' needs a floating-point input, got uint8"),
    (lambda: I.interpolate_aa_backward(np.zeros((1, 1, 3, 3)), (1, 1, 4, 4), (2, 3), "cubic",
                                       False, None), "does not match"),
])
def test_antialias_errors(call, message):
    with pytest.raises(KernelError, match=message):
        call()
