"""The numeric constants ember's ops share, checked against their definitions and torch's
values where torch exposes the op (selu's alpha and scale, GELU's tanh form)."""
import math

import numpy as np
import pytest

from ember.kernels import constants as K

torch = pytest.importorskip("torch")


def test_constants_are_their_definitions():
    assert K.SQRT1_2 == pytest.approx(math.sqrt(0.5), rel=1e-15)
    assert K.INV_SQRT_2PI == pytest.approx(1 / math.sqrt(2 * math.pi), rel=1e-15)
    assert K.LN2 == pytest.approx(math.log(2), rel=1e-15)
    assert K.LN10 == pytest.approx(math.log(10), rel=1e-15)
    assert K.TWO_OVER_SQRT_PI == pytest.approx(2 / math.sqrt(math.pi), rel=1e-15)
    assert K.SQRT_PI_2 == pytest.approx(math.sqrt(math.pi) / 2, rel=1e-15)
    assert K.SQRT_2PI == pytest.approx(math.sqrt(2 * math.pi), rel=1e-15)
    assert K.LOG2E == pytest.approx(math.log2(math.e), rel=1e-15)
    assert K.DEG2RAD * 180 == pytest.approx(math.pi) and K.RAD2DEG * math.pi == pytest.approx(180)
    assert K.GELU_TANH_BETA == pytest.approx(math.sqrt(2 / math.pi), rel=1e-15)
    assert math.isnan(K.NAN) and K.NEG_INF == -math.inf and K.PI == math.pi


def test_selu_and_gelu_tanh_constants_give_torchs_values():
    x = np.linspace(-4, 4, 33)
    selu = K.SELU_SCALE * np.where(x > 0, x, K.SELU_ALPHA * np.expm1(x))
    np.testing.assert_allclose(selu, torch.selu(torch.tensor(x)).numpy(), rtol=1e-15, atol=1e-15)
    gelu = x / 2 * (1 + np.tanh(K.GELU_TANH_BETA * (x + K.GELU_TANH_KAPPA * x ** 3)))
    np.testing.assert_allclose(gelu, torch.nn.functional.gelu(torch.tensor(x), approximate="tanh")
                               .numpy(), rtol=1e-14, atol=1e-15)


def test_bce_epsilon_is_torchs_clamp():
    """binary_cross_entropy's gradient divides by max(x (1 - x), BCE_EPSILON): torch's at x = 0."""
    x = torch.tensor([0.0], dtype=torch.float64, requires_grad=True)
    torch.nn.functional.binary_cross_entropy(x, torch.tensor([1.0], dtype=torch.float64)).backward()
    assert x.grad.item() == pytest.approx(-1 / K.BCE_EPSILON, rel=1e-8)   # torch: 1e-12 in float32
