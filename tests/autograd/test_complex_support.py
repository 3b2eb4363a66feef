"""Gradients of complex tensors (ember/autograd/complex_support.py) against torch: holomorphic,
linear and explicit ops (``.grad`` is dL/d(conj z) for a real loss), a real input meeting a
complex gradient gets the real part, and ops without complex support are refused by name."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
Z = RNG.standard_normal((3, 4)) + 1j * RNG.standard_normal((3, 4))
W = RNG.standard_normal((4, 2)) + 1j * RNG.standard_normal((4, 2))
R = RNG.standard_normal((3, 4))

# each: f(m, z, w, r) -> a real scalar loss
LOSSES = {
    "holomorphic": lambda m, z, w, r: ((z * z + z.exp() / (z + 3)) @ w).sin().abs().sum(),
    "linear": lambda m, z, w, r: (m.cat([z.t(), w], 1)[1:, ::2].flip(0) * 2).abs().sum(),
    "explicit": lambda m, z, w, r: (z.real * z.imag + z.angle() + z.conj().abs() ** 2).sum(),
    "real meets complex": lambda m, z, w, r: ((z * r).abs() ** 2).sum() + (r * z).real.sum(),
    "view_as_real": lambda m, z, w, r: (m.view_as_real(z) ** 3).sum(),
}


@pytest.mark.parametrize("name", list(LOSSES))
def test_gradients_match_torch(name):
    fn = LOSSES[name]
    grads = []
    for m in (ember, torch):
        leaves = [m.tensor(a, requires_grad=True) for a in (Z, W, R)]
        loss = fn(m, *leaves)
        loss.backward()
        grads.append([None if t.grad is None else t.grad.detach().numpy() for t in leaves])
    for k, (a, b) in enumerate(zip(*grads)):
        if b is None:
            assert a is None or not np.any(a), k
            continue
        assert a.dtype == b.dtype, (k, a.dtype, b.dtype)
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12, err_msg=f"leaf {k}")


def test_grad_of_squared_modulus_is_2z():
    z = ember.tensor(Z, requires_grad=True)
    (z.abs() ** 2).sum().backward()
    np.testing.assert_allclose(z.grad.numpy(), 2 * Z, rtol=1e-12)


def test_an_op_without_complex_support_is_refused_by_name():
    z = ember.tensor(Z)
    with pytest.raises(RuntimeError, match="not implemented for complex tensors"):
        ember.erf(z)
