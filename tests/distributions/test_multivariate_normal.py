"""MultivariateNormal and Independent (ember/distributions/multivariate_normal.py) against
torch.distributions: values and gradients of log_prob, entropy, moments and cdf, rsample
gradients, sampling moments, and the validate_args errors."""
import numpy as np
import pytest

import ember
import ember.distributions as ED

from tests.distributions.torch_cases import (CASES, INVALID_PARAMETERS, MOMENT_CASES, R,
                                             RSAMPLE_CASES, TD, cases, torch,
                                             check_values_and_gradients_match_torch,
                                             check_rsample_gradient_is_the_reparameterisation,
                                             check_sample_moments,
                                             check_invalid_parameters_raise_as_torch)

FAMILIES = ('MultivariateNormal',)


@pytest.mark.parametrize("case", cases(list(CASES), FAMILIES))
def test_values_and_gradients_match_torch(case):
    check_values_and_gradients_match_torch(case)


@pytest.mark.parametrize("case", cases(RSAMPLE_CASES, FAMILIES))
def test_rsample_gradient_is_the_reparameterisation(case):
    check_rsample_gradient_is_the_reparameterisation(case)


@pytest.mark.parametrize("case", cases(MOMENT_CASES, FAMILIES))
def test_sample_moments(case):
    check_sample_moments(case)


@pytest.mark.parametrize("ctor,kw", cases(INVALID_PARAMETERS, FAMILIES))
def test_invalid_parameters_raise_as_torch(ctor, kw):
    check_invalid_parameters_raise_as_torch(ctor, kw)


def test_independent_and_expand():
    loc, scale = R.standard_normal((2, 3)), R.uniform(0.5, 1.5, (2, 3))
    value = R.standard_normal((2, 3))
    e = ED.Independent(ED.Normal(ember.tensor(loc), ember.tensor(scale)), 1)
    t = TD.Independent(TD.Normal(torch.tensor(loc), torch.tensor(scale)), 1)
    assert tuple(e.batch_shape) == (2,) and tuple(e.event_shape) == (3,)
    np.testing.assert_allclose(e.log_prob(ember.tensor(value)).numpy(),
                               t.log_prob(torch.tensor(value)).numpy(), rtol=1e-12)
    np.testing.assert_allclose(e.entropy().numpy(), t.entropy().numpy(), rtol=1e-12)
    assert e.has_rsample and tuple(e.rsample((5,)).shape) == (5, 2, 3)
    x = e.expand((4, 2))
    assert tuple(x.batch_shape) == (4, 2) and tuple(x.sample().shape) == (4, 2, 3)
    b = ED.Bernoulli(probs=ember.tensor([0.3])).expand((2, 1))
    assert tuple(b.sample().shape) == (2, 1) and tuple(b.batch_shape) == (2, 1)
