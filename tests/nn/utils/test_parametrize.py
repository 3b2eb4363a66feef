"""nn.utils.parametrize (ember/nn/utils/parametrize.py): registering parametrizations, assignment
through right_inverse, caching, removal, and the errors."""
import numpy as np
import pytest

import ember
from ember.nn.utils import parametrize as P

torch = pytest.importorskip("torch")


class _Symmetric(ember.nn.Module):
    def forward(self, X):
        return X.triu() + X.triu(1).transpose(-1, -2)

    def right_inverse(self, A):
        return A.triu()


class _Scale(ember.nn.Module):
    def forward(self, X):
        return X * 2.0

    def right_inverse(self, A):
        return A / 2.0


def test_register_assign_cache_and_remove():
    m = ember.nn.Linear(3, 3)
    P.register_parametrization(m, "weight", _Symmetric())
    assert P.is_parametrized(m) and P.is_parametrized(m, "weight")
    assert not P.is_parametrized(m, "bias")
    assert type(m).__name__ == "ParametrizedLinear"
    assert P.type_before_parametrizations(m) is ember.nn.Linear
    w = m.weight.detach().numpy()
    np.testing.assert_array_equal(w, w.T)
    P.register_parametrization(m, "weight", _Scale())            # the chain grows
    assert len(m.parametrizations.weight) == 2
    A = np.arange(9.0).reshape(3, 3)
    A = A + A.T
    m.weight = ember.tensor(A, dtype=ember.float32)              # through right_inverse
    np.testing.assert_allclose(m.weight.detach().numpy(), A, rtol=1e-6)
    with P.cached():
        assert m.weight is m.weight
    assert m.weight is not m.weight
    (m(ember.ones(2, 3)).sum()).backward()
    assert m.parametrizations.weight.original.grad is not None
    P.remove_parametrizations(m, "weight")
    assert type(m) is ember.nn.Linear and "weight" in dict(m.named_parameters())
    np.testing.assert_allclose(m.weight.detach().numpy(), A, rtol=1e-6)


def test_parametrization_errors_name_the_problem():
    m = ember.nn.Linear(3, 3)
    with pytest.raises(ember.EmberError, match="no parameter, buffer or parametrized element"):
        P.register_parametrization(m, "nope", _Scale())
    with pytest.raises(ember.EmberError, match="does not have a parametrization on weight"):
        P.remove_parametrizations(m, "weight")
    ember.nn.utils.parametrizations.weight_norm(m)
    with pytest.raises(ember.EmberError, match="leave_parametrized=False"):
        P.remove_parametrizations(m, "weight", leave_parametrized=False)
