"""The 3-d im2col algorithm's three functions called directly (checked arguments: s, d as 3 ints,
p as (low, high) pairs, the output size) against torch's conv3d and its gradients; the forward
and input gradient are adjoint."""
import numpy as np
import pytest

from ember.kernels.conv import im2col3d

torch = pytest.importorskip("torch")
TF = torch.nn.functional
rng = np.random.default_rng(5)

# (input shape, weight shape, s, p ((lo, hi) per axis), d, groups)
CASES = [
    ((2, 3, 5, 6, 4), (4, 3, 3, 2, 2), (1, 1, 1), ((1, 1), (0, 0), (1, 1)), (1, 1, 1), 1),
    ((1, 4, 6, 7, 5), (6, 2, 2, 3, 2), (2, 1, 3), ((0, 1), (2, 0), (1, 2)), (1, 2, 1), 2),
    ((2, 3, 5, 5, 6), (3, 1, 1, 2, 3), (1, 2, 1), ((0, 0), (0, 0), (0, 0)), (2, 1, 2), 3),
]


def _out(xs, ws, s, p, d):
    return tuple((xs[2 + i] + p[i][0] + p[i][1] - d[i] * (ws[2 + i] - 1) - 1) // s[i] + 1
                 for i in range(3))


@pytest.mark.parametrize("case", CASES, ids=["plain", "strided-asymmetric", "depthwise-like"])
def test_directions_match_torch(case):
    xs, ws, s, p, d, g = case
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    out = _out(xs, ws, s, p, d)
    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    pads = tuple(v for lo_hi in reversed(p) for v in lo_hi)
    yt = TF.conv3d(TF.pad(xt, pads), wt, None, s, 0, d, g)
    gy = rng.standard_normal(tuple(yt.shape))
    yt.backward(torch.tensor(gy))
    y = im2col3d.forward(x, w, s, p, d, g, out)
    assert y.shape == tuple(yt.shape) and y.flags.c_contiguous
    np.testing.assert_allclose(y, yt.detach().numpy(), rtol=1e-12, atol=1e-12)
    gx = im2col3d.input_grad(gy, w, xs, s, p, d, g)
    np.testing.assert_allclose(gx, xt.grad.numpy(), rtol=1e-12, atol=1e-12)
    gw = im2col3d.weight_grad(gy, x, ws, s, p, d, g)
    np.testing.assert_allclose(gw, wt.grad.numpy(), rtol=1e-12, atol=1e-12)
    # adjoint: <forward(x), gy> == <x, input_grad(gy)>
    np.testing.assert_allclose(np.vdot(y, gy), np.vdot(x, gx), rtol=1e-10)


def test_float32_stays_float32():
    x = rng.standard_normal((1, 2, 4, 4, 4)).astype(np.float32)
    w = rng.standard_normal((3, 2, 2, 2, 2)).astype(np.float32)
    z = ((0, 0),) * 3
    y = im2col3d.forward(x, w, (1, 1, 1), z, (1, 1, 1), 1, (3, 3, 3))
    assert y.dtype == np.float32
    ref = TF.conv3d(torch.tensor(x, dtype=torch.float64), torch.tensor(w, dtype=torch.float64))
    np.testing.assert_allclose(y, ref.numpy(), rtol=1e-5, atol=1e-5)
