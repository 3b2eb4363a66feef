"""Poisson, Binomial, Geometric, NegativeBinomial and Multinomial (ember/distributions/counts.py)
against torch.distributions: values and gradients of log_prob, entropy, moments, float32,
enumerate_support, sampling (shapes, dtypes, support, moments of 100k draws), expand and the
validate_args errors."""
import math

import numpy as np
import pytest

import ember
import ember.distributions as ED
from tests.distributions.family_cases import (CASES, INVALID_PARAMETERS, INNER_CATEGORICAL,
                                              MOMENT_CASES, OUTSIDE_SUPPORT, cases,
                                              check_float32_matches_torch, check_matches_torch,
                                              check_invalid_parameters_raise_as_torch,
                                              check_log_prob_outside_support_raises_as_torch,
                                              check_sample_and_expand, check_sample_moments,
                                              torch)

FAMILIES = ("Poisson", "Binomial", "Geometric", "NegativeBinomial", "Multinomial")
TD = torch.distributions


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


def test_number_parameters_give_an_empty_batch_shape():
    assert tuple(ED.Poisson(2.0).batch_shape) == ()
    assert tuple(ED.Geometric(0.3).sample((4,)).shape) == (4,)
    b = ED.Binomial(probs=ember.tensor([0.5, 0.25]))
    assert b.total_count.dtype == ember.float32 and float(b.total_count[0]) == 1.0
    assert tuple(ED.NegativeBinomial(3.0, logits=0.5).batch_shape) == ()


def test_edge_values_match_torch():
    """rate 0, probs 1 with value 0, total_count + value == 0."""
    cases_ = [(lambda D, t: D.Poisson(t([0.0, 2.0])), [0.0, 0.0]),
              (lambda D, t: D.Geometric(t([1.0, 0.5])), [0.0, 0.0]),
              (lambda D, t: D.NegativeBinomial(t([0.0, 2.0]), t([0.3, 0.3])), [0.0, 0.0]),
              (lambda D, t: D.Binomial(t([0.0, 4.0]), t([0.0, 1.0])), [0.0, 4.0])]
    for make, v in cases_:
        e = make(ED, lambda x: ember.tensor(np.array(x)))
        t = make(TD, lambda x: torch.tensor(np.array(x)))
        np.testing.assert_allclose(e.log_prob(ember.tensor(np.array(v))).numpy(),
                                   t.log_prob(torch.tensor(np.array(v))).numpy(), rtol=1e-10)


def test_inhomogeneous_binomial_entropy_is_unsupported():
    d = ED.Binomial(ember.tensor([2.0, 3.0]), ember.tensor([0.5, 0.5]))
    with pytest.raises(NotImplementedError, match="Inhomogeneous total count"):
        d.entropy()
    with pytest.raises(NotImplementedError, match="Inhomogeneous total count"):
        d.enumerate_support()


def test_multinomial_needs_an_int_total_count():
    with pytest.raises(NotImplementedError, match="inhomogeneous total_count"):
        ED.Multinomial(ember.tensor(3), probs=ember.tensor([0.5, 0.5]))
    with pytest.raises(ValueError, match="Either `probs` or `logits`"):
        ED.Binomial(3, probs=ember.tensor([0.5]), logits=ember.tensor([0.0]))


def test_multinomial_entropy_is_exact():
    """Against a brute-force sum over the support (torch's entropy computes lgamma(n + 1) in
    float32, so it is compared only to 1e-6)."""
    p = np.array([0.2, 0.3, 0.5])
    d = ED.Multinomial(4, probs=ember.tensor(p))
    support = [np.array([a, b, 4 - a - b], dtype=np.float64)
               for a in range(5) for b in range(5 - a)]
    lp = np.array([math.lgamma(5) - sum(math.lgamma(k + 1) for k in x) + (x * np.log(p)).sum()
                   for x in support])
    np.testing.assert_allclose(float(d.entropy()), -(np.exp(lp) * lp).sum(), rtol=1e-12)
    t = TD.Multinomial(4, probs=torch.tensor(p))
    np.testing.assert_allclose(float(d.entropy()), float(t.entropy()), rtol=1e-6)


def test_multinomial_samples_sum_to_total_count():
    ember.manual_seed(1)
    d = ED.Multinomial(7, logits=ember.tensor(np.zeros((2, 5))))
    s = d.sample((4,))
    assert tuple(s.shape) == (4, 2, 5) and s.dtype == ember.float64
    np.testing.assert_array_equal(s.numpy().sum(-1), 7.0)
