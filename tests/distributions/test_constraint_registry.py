"""biject_to and transform_to (ember/distributions/constraint_registry.py) against torch: the
transform registered for each constraint, its values, inverse and log |det J|, the errors, and a
constrained parameter fitted through biject_to."""
import math

import numpy as np
import pytest

import ember
import ember.distributions as ED
from ember.distributions import constraints as EC
from tests.distributions.transformed_cases import R, TD, X, torch

TC = torch.distributions.constraints


def _constraints(C, mk):
    return [C.real, C.positive, C.nonnegative, C.greater_than(mk(1.5)), C.greater_than(-2.0),
            C.less_than(3.0), C.interval(-1.0, 2.0), C.unit_interval, C.half_open_interval(0, 4),
            C.simplex, C.independent(C.positive, 1), C.real_vector]


@pytest.mark.parametrize("which", ["biject_to", "transform_to"])
def test_biject_to_and_transform_to_match_torch(which):
    ec = _constraints(EC, ember.tensor)
    tc = _constraints(TC, torch.tensor)
    for c_e, c_t in zip(ec, tc):
        fe, ft = getattr(ED, which)(c_e), getattr(TD, which)(c_t)
        ye, yt = fe(ember.tensor(X)), ft(torch.tensor(X))
        np.testing.assert_allclose(ye.numpy(), yt.numpy(), rtol=1e-12, err_msg=repr(c_e))
        assert bool(c_e.check(ye).all()), c_e
        if fe.bijective:
            np.testing.assert_allclose(fe.inv(ye).numpy(), X, rtol=1e-9, atol=1e-9)
            np.testing.assert_allclose(fe.log_abs_det_jacobian(ember.tensor(X), ye).numpy(),
                                       ft.log_abs_det_jacobian(torch.tensor(X), yt).numpy(),
                                       rtol=1e-10, atol=1e-12)
        assert fe.bijective == ft.bijective
    m = R.standard_normal((2, 3, 3))
    for c_e, c_t in ((EC.lower_cholesky, TC.lower_cholesky),
                     (EC.positive_definite, TC.positive_definite)):
        fe, ft = ED.transform_to(c_e), TD.transform_to(c_t)
        ye, yt = fe(ember.tensor(m)), ft(torch.tensor(m))
        np.testing.assert_allclose(ye.numpy(), yt.numpy(), rtol=1e-12)
        assert bool(c_e.check(ye).all())
        np.testing.assert_allclose(fe.inv(ye).numpy(), ft.inv(yt).numpy(), rtol=1e-9,
                                   atol=1e-12)
    with pytest.raises(NotImplementedError, match="Cannot transform _LowerCholesky"):
        ED.biject_to(EC.lower_cholesky)
    with pytest.raises(TypeError, match="Constraint subclass or instance"):
        ED.biject_to.register(int, lambda c: None)


def test_biject_to_optimizes_a_constrained_parameter():
    """The usual pattern: an unconstrained leaf mapped onto the simplex by biject_to, fitted by
    maximum likelihood, lands on the empirical frequencies."""
    counts = ember.tensor([10.0, 30.0, 60.0])
    u = ember.zeros(2, requires_grad=True)
    opt = ember.optim.Adam([u], lr=0.1)
    f = ED.biject_to(EC.simplex)
    for _ in range(300):
        opt.zero_grad()
        loss = -(counts * f(u).log()).sum()
        loss.backward()
        opt.step()
    np.testing.assert_allclose(f(u).detach().numpy(), [0.1, 0.3, 0.6], atol=2e-3)
    assert math.isclose(float(f(u).sum()), 1.0, rel_tol=1e-6)

