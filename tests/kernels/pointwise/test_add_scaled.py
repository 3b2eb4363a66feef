"""``x += b * alpha`` in one engine pass: eager add's values (b scaled first, then added) for
float32/float64, broadcast b, negative alpha; the size, dtype and rank rules of ``usable``;
Tensor.add_ / sub_ with alpha on large tensors against torch."""
import numpy as np
import pytest

import ember
from ember.kernels.pointwise import add_scaled as A

torch = pytest.importorskip("torch")
rng = np.random.default_rng(59)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("b_shape", [(256, 300), (300,), (1, 300)])
def test_add_scaled_in_place_is_eager_adds_values(dtype, b_shape):
    pytest.importorskip("numba")
    x = rng.standard_normal((256, 300)).astype(dtype)
    b = rng.standard_normal(b_shape).astype(dtype)
    want = x + b * dtype(-0.37)
    ref = (torch.tensor(x) + torch.tensor(b) * -0.37).numpy()
    buf = x.copy()
    A.add_scaled_(buf, b, -0.37)
    np.testing.assert_array_equal(buf, want)
    np.testing.assert_allclose(buf, ref, rtol=1e-6 if dtype == np.float32 else 1e-15)


def test_usable_rules():
    big = np.zeros(A.MIN_SIZE, np.float32)
    from ember.kernels.runtime import compiler
    assert A.usable(big, big) == compiler.available()
    assert not A.usable(big[:-1], big[:-1])                           # too small
    assert not A.usable(big.astype(np.float16), big.astype(np.float16))
    assert not A.usable(big.astype(np.int32), big.astype(np.int32))
    assert not A.usable(big, big.astype(np.float64))                  # b of another dtype
    assert not A.usable(big, big.reshape(1, -1))                      # b of more dimensions


def test_update_is_the_expression():
    np.testing.assert_array_equal(A.update(np.array([1.0, 2.0]), np.array([4.0, 8.0]), 0.5),
                                  [3.0, 6.0])


@pytest.mark.parametrize("method, alpha", [("add_", -0.01), ("sub_", 0.5)])
def test_tensor_in_place_with_alpha_matches_torch(method, alpha):
    x = rng.standard_normal((512, 784)).astype(np.float32)
    g = rng.standard_normal((512, 784)).astype(np.float32)
    e = ember.tensor(x.copy())
    getattr(e, method)(ember.tensor(g), alpha=alpha)
    t = torch.tensor(x.copy())
    getattr(t, method)(torch.tensor(g), alpha=alpha)
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-6, atol=1e-7)
