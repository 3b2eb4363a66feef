"""TransformedDistribution and the families built on it (and Exponential, Cauchy), against
torch.distributions on the same inputs, shared by tests/distributions/test_transformed_distribution.py,
test_continuous.py and test_kl.py: ``_dist(case, lib)`` builds a case in ember (lib='e') or torch
(lib='t'); the check_* functions run one case."""
import numpy as np
import pytest

import ember
import ember.distributions as ED
from ember.distributions import transforms as ET

torch = pytest.importorskip("torch")
TD = torch.distributions
TT = torch.distributions.transforms

R = np.random.default_rng(0)
X = R.standard_normal((3, 4))
LOC, SCALE = R.standard_normal(4), R.uniform(0.5, 2.0, 4)


def _dist(case, lib, grad=False, other=False):
    """The case's distribution and its parameter leaves; ``other``: shifted parameters."""
    D, T, mk = (ED, ET, ember.tensor) if lib == "e" else (TD, TT, torch.tensor)
    leaf = lambda v: mk(np.asarray(v, dtype=np.float64), requires_grad=grad)  # noqa: E731
    loc, scale = (leaf(LOC + 0.5), leaf(SCALE * 1.3)) if other else (leaf(LOC), leaf(SCALE))
    p = {"loc": loc, "scale": scale}
    if case == "LogNormal":
        return D.LogNormal(loc, scale), p
    if case == "Gumbel":
        return D.Gumbel(loc, scale), p
    if case == "HalfNormal":
        return D.HalfNormal(scale), {"scale": scale}
    if case == "LogisticNormal":
        return D.LogisticNormal(loc, scale), p
    if case == "TanhNormal":  # the squashed Gaussian of soft actor-critic
        return D.TransformedDistribution(D.Normal(loc, scale), [T.TanhTransform(),
                                                                T.AffineTransform(1.0, 2.0)]), p
    if case == "Logistic":  # torch's docstring example: Uniform through inverse sigmoid
        low, high = leaf(np.zeros(4)), leaf(np.ones(4))
        return D.TransformedDistribution(D.Uniform(low, high), [T.SigmoidTransform().inv,
                                                                T.AffineTransform(loc, scale)]), p
    if case == "Exponential":
        return D.Exponential(scale), {"rate": scale}
    if case == "Cauchy":
        return D.Cauchy(loc, scale), p
    if case == "HalfCauchy":
        return D.HalfCauchy(scale), {"scale": scale}
    if case == "Weibull":
        conc = leaf(np.array([0.5, 1.5, 2.0, 3.0]))
        return D.Weibull(scale, conc), {"scale": scale, "concentration": conc}
    if case == "Pareto":
        alpha = leaf(np.array([0.7, 1.5, 2.5, 4.0]))
        return D.Pareto(scale, alpha), {"scale": scale, "alpha": alpha}
    if case == "InverseGamma":
        conc = leaf(np.array([0.5, 1.5, 2.5, 4.0]))
        return D.InverseGamma(conc, scale), {"concentration": conc, "rate": scale}
    if case == "Kumaraswamy":
        c1, c0 = leaf(np.array([0.5, 1.5, 2.5, 4.0])), leaf(np.array([2.0, 0.7, 3.0, 1.2]))
        return D.Kumaraswamy(c1, c0), {"concentration1": c1, "concentration0": c0}
    probs = leaf(np.array([0.2, 0.5, 0.7, 0.9]))
    temp = leaf(0.7)
    if case == "RelaxedBernoulli":
        return D.RelaxedBernoulli(temp, probs=probs), {"probs": probs, "temperature": temp}
    if case == "RelaxedOneHotCategorical":
        logits = leaf(X[:2])
        return D.RelaxedOneHotCategorical(temp, logits=logits), {"logits": logits,
                                                                  "temperature": temp}
    raise KeyError(case)


DCASES = ["LogNormal", "Gumbel", "HalfNormal", "LogisticNormal", "TanhNormal", "Logistic",
          "RelaxedBernoulli", "RelaxedOneHotCategorical", "Exponential", "Cauchy", "HalfCauchy",
          "Weibull", "Pareto", "InverseGamma", "Kumaraswamy"]
CDF_CASES = ("LogNormal", "Gumbel", "HalfNormal", "TanhNormal", "Logistic", "Exponential",
             "Cauchy", "HalfCauchy", "Weibull", "Pareto", "Kumaraswamy")


def _value(case):
    if case == "LogisticNormal":
        v = R.uniform(0.1, 1, (2, 5))
        return v / v.sum(-1, keepdims=True)
    if case == "RelaxedOneHotCategorical":
        v = R.uniform(0.1, 1, (2, 4))
        return v / v.sum(-1, keepdims=True)
    if case == "TanhNormal":
        return R.uniform(-0.9, 2.9, (2, 4))
    if case == "Kumaraswamy":
        return R.uniform(0.05, 0.95, (2, 4))
    if case in ("RelaxedBernoulli", "Logistic"):
        return R.uniform(0.05, 0.95, (2, 4)) if case == "RelaxedBernoulli" else X[:2]
    if case in ("Gumbel", "Cauchy"):
        return X[:2]
    if case == "Pareto":
        return SCALE * R.uniform(1.0, 3.0, (2, 4))
    return R.uniform(0.1, 3.0, (2, 4))


def check_distribution_matches_torch(case):
    e, pe = _dist(case, "e", True)
    t, pt = _dist(case, "t", True)
    assert tuple(e.batch_shape) == tuple(t.batch_shape)
    assert tuple(e.event_shape) == tuple(t.event_shape)
    assert e.has_rsample == t.has_rsample
    assert type(e.support).__name__ == type(t.support).__name__
    assert e.support.event_dim == t.support.event_dim
    v = _value(case)
    le, lt = e.log_prob(ember.tensor(v)), t.log_prob(torch.tensor(v))
    np.testing.assert_allclose(le.detach().numpy(), lt.detach().numpy(), rtol=1e-10, atol=1e-12)
    loss_e, loss_t = le.sum(), lt.sum()
    for prop in ("mean", "variance", "mode", "stddev"):
        try:
            tv = getattr(t, prop)
        except NotImplementedError:
            with pytest.raises(NotImplementedError):
                getattr(e, prop)
            continue
        ev = getattr(e, prop)
        if case == "Kumaraswamy" and prop == "mode":  # torch's formula is NaN whenever c0 > 1
            c1, c0 = pe["concentration1"].detach().numpy(), pe["concentration0"].detach().numpy()
            tv = torch.tensor(np.where((c1 < 1) | (c0 < 1), np.nan,
                                       ((c1 - 1) / (c1 * c0 - 1)) ** (1 / c1)))
        np.testing.assert_allclose(ev.detach().numpy(), tv.detach().numpy(), rtol=1e-10,
                                   atol=1e-12, err_msg=prop)
    try:
        th = t.entropy()
    except NotImplementedError:
        with pytest.raises(NotImplementedError):
            e.entropy()
    else:
        eh = e.entropy()
        np.testing.assert_allclose(eh.detach().numpy(), th.detach().numpy(), rtol=1e-10)
        loss_e, loss_t = loss_e + eh.sum(), loss_t + th.sum()
    if case in CDF_CASES:
        ce, ct = e.cdf(ember.tensor(v)), t.cdf(torch.tensor(v))
        np.testing.assert_allclose(ce.detach().numpy(), ct.detach().numpy(), rtol=1e-10)
        q = np.array([0.1, 0.4, 0.6, 0.95])
        np.testing.assert_allclose(e.icdf(ember.tensor(q)).detach().numpy(),
                                   t.icdf(torch.tensor(q)).detach().numpy(), rtol=1e-10)
        loss_e, loss_t = loss_e + ce.sum(), loss_t + ct.sum()
    loss_e.backward()
    loss_t.backward()
    for k in pe:
        np.testing.assert_allclose(pe[k].grad.numpy(), pt[k].grad.numpy(), rtol=1e-8,
                                   atol=1e-10, err_msg=k)
    s = e.sample((6,))
    assert tuple(s.shape) == (6,) + tuple(t.batch_shape) + tuple(t.event_shape)
    assert not s.requires_grad and bool(e.support.check(s).all())
    x = e.expand((2,) + tuple(e.batch_shape))
    y = t.expand((2,) + tuple(t.batch_shape))
    assert tuple(x.batch_shape) == tuple(y.batch_shape) and type(x) is type(e)
    assert tuple(x.sample().shape) == tuple(y.sample().shape)
    assert repr(e) == repr(t).replace("torch.float64", "ember.float64") or \
        repr(e).split("(")[0] == repr(t).split("(")[0]


def _noise_to_torch(case, x, t):
    """The sample rebuilt in torch from the base noise recovered from ember's draw."""
    xs = x.detach().numpy()
    if case == "LogNormal":
        eps = torch.tensor((np.log(xs) - LOC) / SCALE)
        return (t.loc + eps * t.scale).exp()
    if case == "Gumbel":
        u = torch.tensor(np.exp(-np.exp(-(xs - LOC) / SCALE)))
        return t.loc - t.scale * (-(u.log())).log()
    if case == "TanhNormal":
        eps = torch.tensor((np.arctanh((xs - 1.0) / 2.0) - LOC) / SCALE)
        base = t.base_dist
        return 1.0 + 2.0 * torch.tanh(base.loc + eps * base.scale)
    if case == "Exponential":
        u = torch.tensor(1 - np.exp(-xs * SCALE))
        return -torch.log1p(-u) / t.rate
    if case == "Weibull":
        c = np.array([0.5, 1.5, 2.0, 3.0])
        e = torch.tensor((xs / SCALE) ** c)
        return t.scale * e ** t.concentration.reciprocal()
    if case == "Kumaraswamy":
        c1, c0 = np.array([0.5, 1.5, 2.5, 4.0]), np.array([2.0, 0.7, 3.0, 1.2])
        u = torch.tensor((1 - xs ** c1) ** c0)
        return (1 - u ** t.concentration0.reciprocal()) ** t.concentration1.reciprocal()
    if case == "RelaxedBernoulli":
        T, p = 0.7, np.array([0.2, 0.5, 0.7, 0.9])
        logit_u = torch.tensor(T * np.log(xs / (1 - xs)) - np.log(p / (1 - p)))
        return torch.sigmoid((logit_u + t.logits) / t.temperature)
    if case == "RelaxedOneHotCategorical":
        g = torch.tensor(0.7 * np.log(xs) - t.logits.detach().numpy())
        return torch.softmax((t.logits + g) / t.temperature, -1)
    raise KeyError(case)


RSAMPLE_CASES = ["LogNormal", "Gumbel", "TanhNormal", "RelaxedBernoulli", "RelaxedOneHotCategorical",
                 "Exponential", "Weibull", "Kumaraswamy"]


def check_rsample_gradient_matches_torch(case):
    ember.manual_seed(0)
    e, pe = _dist(case, "e", True)
    x = e.rsample((5,))
    assert x.requires_grad
    w = np.linspace(0.5, 1.5, x.numel()).reshape(tuple(x.shape))
    (ember.tensor(w) * x * x).sum().backward()
    t, pt = _dist(case, "t", True)
    tx = _noise_to_torch(case, x, t)
    np.testing.assert_allclose(tx.detach().numpy(), x.detach().numpy(), rtol=1e-8, atol=1e-10)
    (torch.tensor(w) * tx * tx).sum().backward()
    for k in pe:
        np.testing.assert_allclose(pe[k].grad.numpy(), pt[k].grad.numpy(), rtol=1e-6,
                                   atol=1e-9, err_msg=k)


MOMENT_CASES = ["LogNormal", "Gumbel", "HalfNormal", "Exponential", "Weibull", "Kumaraswamy"]


def check_sample_moments(case):
    ember.manual_seed(4)
    e, _ = _dist(case, "e")
    n = 20000
    x = e.sample((n,)).numpy()
    mean, var = e.mean.numpy(), e.variance.numpy()
    m4 = ((x - mean) ** 4).mean(0)
    assert np.all(np.abs(x.mean(0) - mean) < 5 * np.sqrt(var / n))
    if case == "LogNormal":  # heavy-tailed: the variance is checked on log(x) ~ Normal
        x, var = np.log(x), SCALE ** 2
        assert np.all(np.abs(x.mean(0) - LOC) < 5 * np.sqrt(var / n))
        m4 = 3 * var ** 2
    assert np.all(np.abs(x.var(0) - var) < 5 * np.sqrt((m4 - var ** 2) / n))


INVALID_PARAMETERS = [
    ("LogNormal", dict(loc=np.zeros(2), scale=np.array([1.0, -1.0]))),
    ("Gumbel", dict(loc=np.zeros(2), scale=np.array([0.0, 1.0]))),
    ("HalfNormal", dict(scale=np.array([-1.0]))),
    ("LogisticNormal", dict(loc=np.array([0.0, np.nan]), scale=np.ones(2))),
    ("RelaxedBernoulli", dict(temperature=np.array(0.5), probs=np.array([0.3, 1.2]))),
    ("RelaxedOneHotCategorical", dict(temperature=np.array(0.5),
                                      probs=np.array([0.3, -0.2, 0.9]))),
    ("Exponential", dict(rate=np.array([1.0, -1.0]))),
    ("Cauchy", dict(loc=np.zeros(2), scale=np.array([0.0, 1.0]))),
    ("HalfCauchy", dict(scale=np.array([-1.0]))),
    ("Weibull", dict(scale=np.ones(2), concentration=np.array([1.0, 0.0]))),
    ("Pareto", dict(scale=np.ones(2), alpha=np.array([-1.0, 1.0]))),
    ("InverseGamma", dict(concentration=np.array([1.0, -1.0]), rate=np.ones(2))),
    ("Kumaraswamy", dict(concentration1=np.ones(2), concentration0=np.array([0.0, 1.0]))),
]


def check_invalid_parameters_raise_as_torch(ctor, kw):
    with pytest.raises(ValueError) as te:
        getattr(TD, ctor)(**{k: torch.tensor(v) for k, v in kw.items()})
    with pytest.raises(ValueError) as ee:
        getattr(ED, ctor)(**{k: ember.tensor(v) for k, v in kw.items()})
    assert isinstance(ee.value, ember.errors.EmberError)
    assert str(ee.value).split(" of distribution")[0] == str(te.value).split(" of distribution")[0]
    # validate_args=False skips the check (torch still checks the base distribution of the
    # relaxed families; ember passes validate_args down to it)
    getattr(ED, ctor)(**{k: ember.tensor(v) for k, v in kw.items()}, validate_args=False)


OUTSIDE_SUPPORT = [
    ("LogNormal", -np.ones(4)), ("HalfNormal", np.array([-1.0, 1.0, 1.0, 1.0])),
    ("LogisticNormal", np.full(5, 0.3)), ("TanhNormal", np.full(4, 3.5)),
    ("RelaxedBernoulli", np.full(4, 1.5)), ("Exponential", -np.ones(4)),
    ("Pareto", SCALE * 0.9), ("HalfCauchy", np.array([1.0, -1.0, 1.0, 1.0]))]


def check_log_prob_outside_support_raises_as_torch(case, bad):
    e, _ = _dist(case, "e")
    t, _ = _dist(case, "t")
    with pytest.raises(ValueError) as te:
        t.log_prob(torch.tensor(bad))
    with pytest.raises(ValueError) as ee:
        e.log_prob(ember.tensor(bad))
    assert str(ee.value).split(" (")[0] == str(te.value).split(" (")[0]
    assert "to be within the support" in str(ee.value)



KL_CASES = ["LogNormal", "Gumbel", "TanhNormal", "Exponential"]


def check_kl_divergence_matches_torch(case):
    e1, pe = _dist(case, "e", True)
    t1, pt = _dist(case, "t", True)
    e2, t2 = _dist(case, "e", other=True)[0], _dist(case, "t", other=True)[0]
    ke, kt = ED.kl_divergence(e1, e2), TD.kl_divergence(t1, t2)
    np.testing.assert_allclose(ke.detach().numpy(), kt.detach().numpy(), rtol=1e-10)
    ke.sum().backward()
    kt.sum().backward()
    for k in pe:
        np.testing.assert_allclose(pe[k].grad.numpy(), pt[k].grad.numpy(), rtol=1e-8)
    other = ED.TransformedDistribution(ED.Normal(0.0, 1.0), ET.SigmoidTransform())
    with pytest.raises(NotImplementedError, match="equal transforms"):
        ED.kl_divergence(ED.TransformedDistribution(ED.Normal(0.0, 1.0), ET.ExpTransform()),
                         other)
