"""The thin-layer Numba kernels called directly (weights as (taps, K), tap offsets into the
flattened padded image): ``rows_forward`` and ``rows_weight`` over image ranges and their
``prange`` drivers against torch's conv2d and its weight gradient; the strip length."""
import numpy as np
import pytest

from ember.kernels.conv import thin
from ember.kernels.conv.geometry import geometry, tap_offsets

pytestmark = pytest.mark.skipif(thin.kernels() is None, reason="needs Numba")
torch = pytest.importorskip("torch")
rng = np.random.default_rng(23)

# (input shape, weight shape, padding, dilation): stride 1 only
CASES = [
    ((3, 1, 12, 11), (6, 1, 5, 5), 2, 1),              # LeNet conv1-like
    ((2, 3, 9, 10), (17, 3, 3, 3), (1, 0, 2, 1), 1),   # K past two register blocks, asymmetric
    ((2, 2, 10, 9), (5, 2, 3, 2), 0, (2, 3)),          # dilated
]
IDS = ["lenet1", "K17-asymmetric", "dilated"]


def _setup(case, dtype):
    xs, ws, pad, dil = case
    g = geometry("conv2d", xs, ws, 1, pad, dil, 1)
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal(ws).astype(dtype)
    gy = rng.standard_normal(g.output_shape).astype(dtype)
    xt, wt = torch.tensor(x, dtype=torch.float64, requires_grad=False), \
        torch.tensor(w, dtype=torch.float64, requires_grad=True)
    pt, pb, pl, pr = g.padding
    y = torch.nn.functional.conv2d(torch.nn.functional.pad(xt, (pl, pr, pt, pb)), wt, None, 1,
                                   0, g.dilation)
    y.backward(torch.tensor(gy, dtype=torch.float64))
    return g, x, w, gy, y.detach().numpy(), wt.grad.numpy()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_rows_forward_and_weight_match_torch(case, dtype):
    k = thin.kernels()
    g, x, w, gy, y_ref, gw_ref = _setup(case, dtype)
    tol = 1e-4 if dtype == np.float32 else 1e-12
    wt = np.ascontiguousarray(w.reshape(g.K, -1).T)
    b = rng.standard_normal(g.K).astype(dtype)
    args = (x, wt, b, tap_offsets(g), None, g.padding[0], g.padding[2], g.Hp, g.Wp)
    want = y_ref + b.reshape(1, -1, 1, 1)
    y = np.full(g.output_shape, np.nan, dtype)
    k.rows_forward(*args[:4], y, *args[5:], 0, 1)          # two ranges: image 0, then the rest
    k.rows_forward(*args[:4], y, *args[5:], 1, g.N)
    np.testing.assert_allclose(y, want, rtol=tol, atol=tol * 10)
    y2 = np.full(g.output_shape, np.nan, dtype)
    k.rows_forward_parallel(*args[:4], y2, *args[5:], 2)
    np.testing.assert_array_equal(y2, y)                   # the same sums per image
    wargs = (gy, x, tap_offsets(g), g.padding[0], g.padding[2], g.Hp, g.Wp)
    part = k.rows_weight(*wargs, 0, g.N)
    assert part.shape[:2] == (g.R * g.S * g.C, g.K)
    gw = part.sum(-1).T.reshape(g.weight_shape)
    np.testing.assert_allclose(gw, gw_ref, rtol=tol, atol=tol * 10 * g.N)
    split = k.rows_weight(*wargs, 0, 1) + k.rows_weight(*wargs, 1, g.N)
    np.testing.assert_allclose(split.sum(-1).T.reshape(g.weight_shape), gw_ref, rtol=tol,
                               atol=tol * 10 * g.N)
    par = k.rows_weight_parallel(*wargs, 2)
    np.testing.assert_allclose(par.sum(-1).T.reshape(g.weight_shape), gw_ref, rtol=tol,
                               atol=tol * 10 * g.N)


def test_strip_is_whole_vectors():
    k = thin.kernels()
    for itemsize in (4, 8):
        s = k.strip(itemsize)
        assert s >= 1 and (s * itemsize) % k.VECTOR_BYTES == 0
