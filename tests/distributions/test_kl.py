"""kl_divergence and register_kl (ember/distributions/kl.py) against torch: each registered pair's
value and gradients, infinite divergences, mixed and Independent pairs, a missing pair, and the
dispatch to the closest registered pair of a subclass."""
import numpy as np
import pytest

import ember
import ember.distributions as ED
from tests.distributions import transformed_cases
from tests.distributions.torch_cases import (KL_PAIRS, TD, check_kl_divergence_matches_torch,
                                             torch)


@pytest.mark.parametrize("case", KL_PAIRS)
def test_kl_divergence_matches_torch(case):
    check_kl_divergence_matches_torch(case)


@pytest.mark.parametrize("case", transformed_cases.KL_CASES)
def test_kl_divergence_of_transformed_families_matches_torch(case):
    """Pairs of the same transformed family (equal transforms), and Exponential."""
    transformed_cases.check_kl_divergence_matches_torch(case)


def test_kl_special_cases():
    # support of p outside q's: infinite, as torch
    p, q = ED.Uniform(0.0, 2.0), ED.Uniform(0.5, 3.0)
    assert float(ED.kl_divergence(p, q)) == float("inf")
    tp, tq = TD.Uniform(0.0, 2.0), TD.Uniform(0.5, 3.0)
    assert float(TD.kl_divergence(tp, tq)) == float("inf")
    # Uniform || Normal and Independent || Independent
    u = ED.Uniform(ember.tensor([0.0, 1.0]), ember.tensor([1.0, 4.0]))
    nrm = ED.Normal(ember.tensor([0.3, 2.0]), ember.tensor([1.0, 0.5]))
    tu = TD.Uniform(torch.tensor([0.0, 1.0]), torch.tensor([1.0, 4.0]))
    tn = TD.Normal(torch.tensor([0.3, 2.0]), torch.tensor([1.0, 0.5]))
    np.testing.assert_allclose(ED.kl_divergence(u, nrm).numpy(),
                               TD.kl_divergence(tu, tn).numpy(), rtol=1e-6)
    np.testing.assert_allclose(
        float(ED.kl_divergence(ED.Independent(u, 1), ED.Independent(nrm, 1))),
        float(TD.kl_divergence(TD.Independent(tu, 1), TD.Independent(tn, 1))), rtol=1e-6)
    # Bernoulli with a zero probability: infinite where p puts mass q does not
    pe, qe = [0.5, 0.0], [0.0, 0.5]
    b1, b0 = ED.Bernoulli(probs=ember.tensor(pe)), ED.Bernoulli(probs=ember.tensor(qe))
    tb1, tb0 = TD.Bernoulli(probs=torch.tensor(pe)), TD.Bernoulli(probs=torch.tensor(qe))
    np.testing.assert_allclose(ED.kl_divergence(b1, b0).numpy(),
                               TD.kl_divergence(tb1, tb0).numpy(), rtol=1e-6)
    with pytest.raises(NotImplementedError, match="No KL"):
        ED.kl_divergence(ED.Normal(0.0, 1.0), ED.Gamma(1.0, 1.0))

    class MyNormal(ED.Normal):
        pass

    @ED.register_kl(MyNormal, MyNormal)
    def _kl(p, q):
        return ember.tensor(42.0)
    assert float(ED.kl_divergence(MyNormal(0.0, 1.0), MyNormal(0.0, 1.0))) == 42.0
    # a subclass pair without its own entry uses the closest registered one
    assert float(ED.kl_divergence(MyNormal(0.0, 1.0), ED.Normal(0.0, 1.0))) == 0.0

