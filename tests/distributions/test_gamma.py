"""Gamma, Beta and Dirichlet (ember/distributions/gamma.py) against torch.distributions: values and
gradients of log_prob, entropy, moments and cdf, rsample gradients, sampling moments, and the
validate_args errors."""
import numpy as np
import pytest

import ember
import ember.distributions as ED

from tests.distributions.torch_cases import (CASES, IMPLICIT_CASES, INVALID_PARAMETERS,
                                             MOMENT_CASES, OUTSIDE_SUPPORT, cases, torch,
                                             check_values_and_gradients_match_torch,
                                             check_implicit_rsample_gradients_are_unbiased,
                                             check_sample_moments,
                                             check_invalid_parameters_raise_as_torch,
                                             check_log_prob_outside_support_raises_as_torch)

FAMILIES = ('Gamma', 'Beta', 'Dirichlet')


@pytest.mark.parametrize("case", cases(list(CASES), FAMILIES))
def test_values_and_gradients_match_torch(case):
    check_values_and_gradients_match_torch(case)


@pytest.mark.parametrize("case", cases(IMPLICIT_CASES, FAMILIES))
def test_implicit_rsample_gradients_are_unbiased(case):
    check_implicit_rsample_gradients_are_unbiased(case)


@pytest.mark.parametrize("case", cases(MOMENT_CASES, FAMILIES))
def test_sample_moments(case):
    check_sample_moments(case)


@pytest.mark.parametrize("ctor,kw", cases(INVALID_PARAMETERS, FAMILIES))
def test_invalid_parameters_raise_as_torch(ctor, kw):
    check_invalid_parameters_raise_as_torch(ctor, kw)


@pytest.mark.parametrize("case,bad", cases(OUTSIDE_SUPPORT, FAMILIES))
def test_log_prob_outside_support_raises_as_torch(case, bad):
    check_log_prob_outside_support_raises_as_torch(case, bad)


def test_gamma_rsample_gradient_matches_torch_standard_gamma_grad():
    ember.manual_seed(1)
    alpha = ember.tensor(np.array([0.3, 1.0, 2.5, 10.0, 50.0]).repeat(40), requires_grad=True)
    rate = ember.tensor(2.0, dtype=ember.float64)
    x = ED.Gamma(alpha, rate).rsample()
    x.sum().backward()
    xs = x.detach().numpy() * 2.0  # the standard-gamma draws
    ref = torch._standard_gamma_grad(torch.tensor(alpha.detach().numpy()), torch.tensor(xs))
    # torch's gradient is itself an approximation (series / asymptotic, ~1e-4 relative)
    np.testing.assert_allclose(alpha.grad.numpy(), ref.numpy() / 2.0, rtol=2e-3, atol=1e-6)


# Chi2 (cases in family_cases.py)
from tests.distributions import family_cases as FC  # noqa: E402


@pytest.mark.parametrize("case", ["Chi2"])
def test_chi2_matches_torch(case):
    FC.check_matches_torch(case)
    FC.check_float32_matches_torch(case)
    FC.check_sample_and_expand(case)
    FC.check_sample_moments(case)


@pytest.mark.parametrize("ctor,kw", FC.cases(FC.INVALID_PARAMETERS, ("Chi2",)))
def test_chi2_invalid_parameters_raise_as_torch(ctor, kw):
    FC.check_invalid_parameters_raise_as_torch(ctor, kw)


@pytest.mark.parametrize("case,bad", FC.cases(FC.OUTSIDE_SUPPORT, ("Chi2",)))
def test_chi2_log_prob_outside_support_raises_as_torch(case, bad):
    FC.check_log_prob_outside_support_raises_as_torch(case, bad)


def test_chi2_is_a_gamma_with_df_and_its_repr():
    d = ED.Chi2(ember.tensor([1.0, 4.0]))
    assert isinstance(d, ED.Gamma)
    np.testing.assert_allclose(d.df.numpy(), [1.0, 4.0])
    assert repr(d) == "Chi2(df: ember.Size([2]))"  # torch's shows no parameter: "Chi2()"
    assert tuple(ED.Chi2(3.0).batch_shape) == ()
