"""OneHotCategorical and OneHotCategoricalStraightThrough (ember/distributions/
one_hot_categorical.py) against torch.distributions: values and gradients, float32, sampling,
expand, enumerate_support, the straight-through gradient and the validate_args errors."""
import numpy as np
import pytest

import ember
import ember.distributions as ED
from tests.distributions.family_cases import (CASES, INVALID_PARAMETERS, INNER_CATEGORICAL,
                                              MOMENT_CASES, OUTSIDE_SUPPORT, build, cases,
                                              check_float32_matches_torch, check_matches_torch,
                                              check_invalid_parameters_raise_as_torch,
                                              check_log_prob_outside_support_raises_as_torch,
                                              check_sample_and_expand, check_sample_moments,
                                              torch)

FAMILIES = ("OneHotCategorical", "OneHotCategoricalStraightThrough")


@pytest.mark.parametrize("case", cases(list(CASES), FAMILIES))
def test_matches_torch(case):
    check_matches_torch(case)


@pytest.mark.parametrize("case", cases(list(CASES), FAMILIES))
def test_float32_matches_torch(case):
    check_float32_matches_torch(case)


@pytest.mark.parametrize("case", cases(list(CASES), FAMILIES))
def test_sample_and_expand(case):
    check_sample_and_expand(case)


@pytest.mark.parametrize("case", cases(list(MOMENT_CASES), FAMILIES))
def test_sample_moments(case):
    check_sample_moments(case)


@pytest.mark.parametrize("ctor,kw", cases(INVALID_PARAMETERS + INNER_CATEGORICAL, FAMILIES))
def test_invalid_parameters_raise_as_torch(ctor, kw):
    check_invalid_parameters_raise_as_torch(ctor, kw)


@pytest.mark.parametrize("case,bad", cases(OUTSIDE_SUPPORT, FAMILIES))
def test_log_prob_outside_support_raises_as_torch(case, bad):
    check_log_prob_outside_support_raises_as_torch(case, bad)


def test_straight_through_rsample_gradient_is_the_probs_gradient():
    """rsample is the one-hot draw in value, and d rsample / d probs is that of probs."""
    ember.manual_seed(0)
    e, pe = build("OneHotCategoricalStraightThrough", "e", True)
    x = e.rsample((6,))
    assert bool(e.support.check(x.detach()).all())
    w = np.linspace(0.5, 1.5, x.numel()).reshape(tuple(x.shape))
    (ember.tensor(w) * x).sum().backward()
    t, pt = build("OneHotCategoricalStraightThrough", "t", True)
    probs = t.probs
    tx = torch.tensor(x.detach().numpy()) + (probs - probs.detach())
    (torch.tensor(w) * tx).sum().backward()
    np.testing.assert_allclose(pe["probs"].grad.numpy(), pt["probs"].grad.numpy(), rtol=1e-10)


def test_sample_is_one_hot_in_probs_dtype():
    d = ED.OneHotCategorical(logits=ember.zeros(3, dtype=ember.float32))
    s = d.sample((4,))
    assert s.dtype == ember.float32 and tuple(s.shape) == (4, 3)
    np.testing.assert_array_equal(s.numpy().sum(-1), 1.0)
    assert not ED.OneHotCategorical.has_rsample
    assert ED.OneHotCategoricalStraightThrough.has_rsample

