"""Exponential and Cauchy (ember/distributions/continuous.py) against torch.distributions:
log_prob, moments, entropy, cdf and icdf values and their gradients, sampling, expand, rsample
gradients, sampling moments and the validate_args errors."""
import pytest

from tests.distributions.torch_cases import cases
from tests.distributions.transformed_cases import (DCASES, INVALID_PARAMETERS, MOMENT_CASES,
                                                   OUTSIDE_SUPPORT, RSAMPLE_CASES,
                                                   check_distribution_matches_torch,
                                                   check_rsample_gradient_matches_torch,
                                                   check_sample_moments,
                                                   check_invalid_parameters_raise_as_torch,
                                                   check_log_prob_outside_support_raises_as_torch)

FAMILIES = ('Exponential', 'Cauchy')


@pytest.mark.parametrize("case", cases(DCASES, FAMILIES))
def test_distribution_matches_torch(case):
    check_distribution_matches_torch(case)


@pytest.mark.parametrize("case", cases(RSAMPLE_CASES, FAMILIES))
def test_rsample_gradient_matches_torch(case):
    check_rsample_gradient_matches_torch(case)


@pytest.mark.parametrize("case", cases(MOMENT_CASES, FAMILIES))
def test_sample_moments(case):
    check_sample_moments(case)


@pytest.mark.parametrize("ctor,kw", cases(INVALID_PARAMETERS, FAMILIES))
def test_invalid_parameters_raise_as_torch(ctor, kw):
    check_invalid_parameters_raise_as_torch(ctor, kw)


@pytest.mark.parametrize("case,bad", cases(OUTSIDE_SUPPORT, FAMILIES))
def test_log_prob_outside_support_raises_as_torch(case, bad):
    check_log_prob_outside_support_raises_as_torch(case, bad)
