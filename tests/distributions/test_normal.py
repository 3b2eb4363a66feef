"""Normal and Uniform (ember/distributions/normal.py) against torch.distributions: values and
gradients of log_prob, entropy, moments and cdf, rsample gradients, sampling moments, and the
validate_args errors."""
import pytest

from tests.distributions.torch_cases import (CASES, cases, INVALID_PARAMETERS, MOMENT_CASES,
                                             OUTSIDE_SUPPORT, RSAMPLE_CASES,
                                             check_values_and_gradients_match_torch,
                                             check_rsample_gradient_is_the_reparameterisation,
                                             check_sample_moments,
                                             check_invalid_parameters_raise_as_torch,
                                             check_log_prob_outside_support_raises_as_torch)

FAMILIES = ('Normal', 'Uniform')


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


@pytest.mark.parametrize("case,bad", cases(OUTSIDE_SUPPORT, FAMILIES))
def test_log_prob_outside_support_raises_as_torch(case, bad):
    check_log_prob_outside_support_raises_as_torch(case, bad)
