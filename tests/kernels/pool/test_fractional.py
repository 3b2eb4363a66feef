"""Fractional max pooling kernels against torch's CPU ones given the same random samples
(``_random_samples``): values and flat indices, 2-d and 3-d, ties and NaN; argument errors."""
import numpy as np
import pytest

from ember.kernels.errors import KernelError
from ember.kernels.pool import fractional as P

torch = pytest.importorskip("torch")
F = torch.nn.functional
rng = np.random.default_rng(47)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k, out", [(2, (5, 4)), ((3, 2), (4, 6)), (2, (1, 1))])
def test_fractional_max_pool2d_matches_torch(k, out, dtype):
    x = rng.integers(-3, 4, (2, 3, 9, 10)).astype(dtype)     # ties
    x[0, 1, 2, 3] = np.nan
    samples = rng.random((2, 3, 2)).astype(dtype)
    y, idx = P.fractional_max_pool2d(x, samples, (k,) if np.isscalar(k) else k, out)
    ty, tidx = F.fractional_max_pool2d(torch.tensor(x), k, output_size=out, return_indices=True,
                                       _random_samples=torch.tensor(samples))
    np.testing.assert_array_equal(y, ty.numpy())
    np.testing.assert_array_equal(idx, tidx.numpy())


def test_fractional_max_pool3d_matches_torch():
    x = rng.standard_normal((1, 2, 7, 8, 7))
    samples = rng.random((1, 2, 3))
    y, idx = P.fractional_max_pool3d(x, samples, (2, 3, 2), (4, 3, 5))
    ty, tidx = F.fractional_max_pool3d(torch.tensor(x), (2, 3, 2), output_size=(4, 3, 5),
                                       return_indices=True, _random_samples=torch.tensor(samples))
    np.testing.assert_array_equal(y, ty.numpy())
    np.testing.assert_array_equal(idx, tidx.numpy())


@pytest.mark.parametrize("call, message", [
    (lambda: P.fractional_max_pool2d(np.zeros((1, 4, 4)), np.zeros((1, 1, 2)), (2,), (2,)),
     "4-d input"),
    (lambda: P.fractional_max_pool2d(np.zeros((1, 1, 4, 4)), np.zeros((1, 1, 2), np.float32),
                                     (2,), (2,)), "random samples of its dtype"),
    (lambda: P.fractional_max_pool2d(np.zeros((1, 1, 4, 4)), np.zeros((1, 1, 2)), (2,), (4,)),
     "too large"),
    (lambda: P.fractional_max_pool2d(np.zeros((1, 1, 4, 4)), np.zeros((1, 2, 2)), (2,), (2,)),
     "random_samples must have shape"),
    (lambda: P.fractional_max_pool3d(np.zeros((1, 1, 4, 4, 4)), np.zeros((1, 1, 3)), (0,),
                                     (2,)), "positive ints"),
    # torch's 3-d check is strict: output + kernel - 1 == input is refused (2-d accepts it)
    (lambda: P.fractional_max_pool3d(np.zeros((1, 1, 6, 6, 6)), np.zeros((1, 1, 3)), (2,),
                                     (4, 4, 5)), "need output \\+ kernel - 1 < input"),
])
def test_argument_errors(call, message):
    """torch's limits (3-d: ``fractional_max_pool3d_out(): pool width 2 too large``)."""
    with pytest.raises(KernelError, match=message):
        call()
