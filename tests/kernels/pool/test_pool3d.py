"""3-d pooling kernels on ndarrays against torch: max pool (values, indices into each volume,
backward), adaptive max, average pool with ceil_mode / count_include_pad / divisor_override and
its backward, adaptive average and its backward; integer inputs; argument errors."""
import numpy as np
import pytest

from ember.kernels.errors import KernelError
from ember.kernels.pool import pool3d as P

torch = pytest.importorskip("torch")
F = torch.nn.functional
rng = np.random.default_rng(43)

MAX_CASES = [  # (shape, kernel, stride, padding, dilation, ceil_mode)
    ((2, 2, 5, 6, 7), 2, 2, 0, 1, False),
    ((1, 3, 7, 6, 5), (3, 2, 2), (2, 1, 2), (1, 1, 0), (1, 2, 1), True),
    ((1, 1, 6, 6, 6), 3, 1, 1, 2, False),
]


@pytest.mark.parametrize("case", MAX_CASES, ids=["plain", "mixed-ceil", "dilated"])
def test_max_pool3d_forward_and_backward_match_torch(case):
    shape, k, s, p, d, ceil = case
    x = rng.integers(-3, 4, shape).astype(np.float64)      # ties
    x[0, 0, 1, 1, 1] = np.nan
    y, idx = P.max_pool3d_forward(x, k, s, p, d, ceil)
    tx = torch.tensor(x, requires_grad=True)
    ty, tidx = F.max_pool3d(tx, k, s, p, d, ceil_mode=ceil, return_indices=True)
    np.testing.assert_array_equal(y, ty.detach().numpy())
    np.testing.assert_array_equal(idx, tidx.numpy())
    gy = rng.standard_normal(y.shape)
    ty.backward(torch.tensor(gy))
    np.testing.assert_allclose(P.max_pool3d_backward(gy, idx, x.shape), tx.grad.numpy(),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("out", [(2, 3, 2), 1, (3, None, 2)])
def test_adaptive_pools_match_torch(out):
    x = rng.standard_normal((2, 3, 5, 7, 4))
    y, idx = P.adaptive_max_pool3d_forward(x, out)
    ty, tidx = F.adaptive_max_pool3d(torch.tensor(x), out, return_indices=True)
    np.testing.assert_array_equal(y, ty.numpy())
    np.testing.assert_array_equal(idx, tidx.numpy())
    tx = torch.tensor(x, requires_grad=True)
    ta = F.adaptive_avg_pool3d(tx, out)
    np.testing.assert_allclose(P.adaptive_avg_pool3d_forward(x, out), ta.detach().numpy(),
                               rtol=1e-12, atol=1e-12)
    gy = rng.standard_normal(tuple(ta.shape))
    ta.backward(torch.tensor(gy))
    np.testing.assert_allclose(P.adaptive_avg_pool3d_backward(gy, x.shape), tx.grad.numpy(),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("k, s, p, ceil, cip, div", [
    (2, 2, 0, False, True, None), (3, 2, 1, True, False, None), ((3, 2, 2), (1, 2, 2), (1, 0, 1),
                                                                 True, True, None),
    (2, 1, 1, False, True, 3),
])
def test_avg_pool3d_forward_and_backward_match_torch(k, s, p, ceil, cip, div):
    x = rng.standard_normal((2, 2, 5, 6, 7))
    tx = torch.tensor(x, requires_grad=True)
    ty = F.avg_pool3d(tx, k, s, p, ceil, cip, div)
    np.testing.assert_allclose(P.avg_pool3d_forward(x, k, s, p, ceil, cip, div),
                               ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    gy = rng.standard_normal(tuple(ty.shape))
    ty.backward(torch.tensor(gy))
    np.testing.assert_allclose(P.avg_pool3d_backward(gy, x.shape, k, s, p, ceil, cip, div),
                               tx.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_integer_inputs_follow_torchs_cpu_kernels():
    x = rng.integers(-20, 20, (1, 2, 4, 5, 6)).astype(np.int64)
    np.testing.assert_array_equal(P.avg_pool3d_forward(x, 2, 2, 0, False, True, None),
                                  F.avg_pool3d(torch.tensor(x), 2, 2).numpy())
    y, idx = P.max_pool3d_forward(x, 2, 1, 0, 1, False)
    ty, tidx = F.max_pool3d(torch.tensor(x), 2, 1, return_indices=True)
    np.testing.assert_array_equal(y, ty.numpy())
    np.testing.assert_array_equal(idx, tidx.numpy())


@pytest.mark.parametrize("call, message", [
    (lambda: P.max_pool3d_forward(np.zeros((1, 1, 4, 4)), 2, 2, 0, 1, False), "5-d input"),
    (lambda: P.max_pool3d_forward(np.zeros((1, 1, 4, 4, 4), bool), 2, 2, 0, 1, False),
     "floating-point or integer"),
    (lambda: P.adaptive_avg_pool3d_forward(np.zeros((1, 1, 4, 4, 4), np.int64), 2),
     "floating-point input"),
    (lambda: P.max_pool3d_backward(np.zeros((1, 1, 2, 2, 2)), np.zeros((1, 1, 2, 2, 1),
                                                                      np.int64), (1, 1, 4, 4, 4)),
     "grad_output"),
])
def test_argument_errors(call, message):
    with pytest.raises(KernelError, match=message):
        call()
