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


# Laplace, StudentT and ContinuousBernoulli (cases in family_cases.py)
import numpy as np  # noqa: E402

import ember  # noqa: E402
import ember.distributions as ED  # noqa: E402
from tests.distributions import family_cases as FC  # noqa: E402

REAL_FAMILIES = ("Laplace", "StudentT", "ContinuousBernoulli")


@pytest.mark.parametrize("case", FC.cases(list(FC.CASES), REAL_FAMILIES))
def test_real_family_matches_torch(case):
    FC.check_matches_torch(case)


@pytest.mark.parametrize("case", FC.cases(list(FC.CASES), REAL_FAMILIES))
def test_real_family_float32_matches_torch(case):
    FC.check_float32_matches_torch(case)


@pytest.mark.parametrize("case", FC.cases(list(FC.CASES), REAL_FAMILIES))
def test_real_family_sample_and_expand(case):
    FC.check_sample_and_expand(case)


@pytest.mark.parametrize("case", FC.cases(list(FC.MOMENT_CASES), REAL_FAMILIES))
def test_real_family_sample_moments(case):
    FC.check_sample_moments(case)


@pytest.mark.parametrize("ctor,kw", FC.cases(FC.INVALID_PARAMETERS, REAL_FAMILIES))
def test_real_family_invalid_parameters_raise_as_torch(ctor, kw):
    FC.check_invalid_parameters_raise_as_torch(ctor, kw)


@pytest.mark.parametrize("case,bad", FC.cases(FC.OUTSIDE_SUPPORT, REAL_FAMILIES))
def test_real_family_log_prob_outside_support_raises_as_torch(case, bad):
    FC.check_log_prob_outside_support_raises_as_torch(case, bad)


def _torch_from_noise(case, x, t):
    """The draw rebuilt in torch from the noise recovered from ember's draw."""
    torch = FC.torch
    xs = x.detach().numpy()
    p = {k: v.detach().numpy() for k, v in (("loc", t.loc), ("scale", t.scale))} \
        if case != "ContinuousBernoulli" else {}
    if case == "Laplace":
        d = (xs - p["loc"]) / p["scale"]  # = -sign(u) log(1 - |u|)
        u = torch.tensor(np.sign(d) * -np.expm1(-np.abs(d)))
        return t.loc - t.scale * u.sign() * torch.log1p(-u.abs())
    if case == "StudentT":
        y = torch.tensor((xs - p["loc"]) / p["scale"])
        return t.loc + t.scale * y
    return t.icdf(torch.tensor(FC._np(ED.ContinuousBernoulli(
        probs=ember.tensor(FC.CASES[case][1]["probs"])).cdf(x.detach()))))


@pytest.mark.parametrize("case", ["Laplace", "StudentT", "ContinuousBernoulli"])
def test_real_family_rsample_gradient_matches_torch(case):
    """Gradients of sum(w * x^2) over rsample draws equal torch's through the same noise
    (StudentT: with respect to loc and scale; its df enters through the implicit Chi2 draw)."""
    ember.manual_seed(0)
    e, pe = FC.build(case, "e", True)
    x = e.rsample((5,))
    assert x.requires_grad
    w = np.linspace(0.5, 1.5, x.numel()).reshape(tuple(x.shape))
    (ember.tensor(w) * x * x).sum().backward()
    t, pt = FC.build(case, "t", True)
    tx = _torch_from_noise(case, x, t)
    np.testing.assert_allclose(tx.detach().numpy(), x.detach().numpy(), rtol=1e-7, atol=1e-9)
    (FC.torch.tensor(w) * tx * tx).sum().backward()
    for k in pe:
        if case == "StudentT" and k == "df":
            assert np.all(np.isfinite(pe[k].grad.numpy()))
            continue
        np.testing.assert_allclose(pe[k].grad.numpy(), pt[k].grad.numpy(), rtol=1e-6,
                                   atol=1e-9, err_msg=k)


def test_continuous_bernoulli_checks_probs_first_only_when_validate_args_is_given():
    """As torch: probs outside [0, 1] are clamped unless validate_args is passed."""
    torch = FC.torch
    bad = np.array([0.3, 1.5])
    ED.ContinuousBernoulli(ember.tensor(bad))
    torch.distributions.ContinuousBernoulli(torch.tensor(bad))
    for flag in (True, False):
        with pytest.raises(ValueError, match="The parameter probs has invalid values") as ee:
            ED.ContinuousBernoulli(ember.tensor(bad), validate_args=flag)
        assert isinstance(ee.value, ember.errors.EmberError)
