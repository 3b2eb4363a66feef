"""Cases and checks for the families of one_hot_categorical.py, counts.py, Laplace / StudentT /
ContinuousBernoulli (continuous.py), Chi2 (gamma.py) and LowRankMultivariateNormal
(lowrank_multivariate_normal.py) against torch.distributions, shared by
their test files. A case is ``(family, grad_params, const_params, kwargs, value)``: NumPy
parameters given as leaves with gradients, NumPy parameters given as constant tensors, plain
Python arguments, and a value to score."""
import numpy as np
import pytest

import ember
import ember.distributions as ED

torch = pytest.importorskip("torch")
TD = torch.distributions

R = np.random.default_rng(7)
P24 = R.uniform(0.1, 1.0, (2, 4))
L35 = R.standard_normal((3, 5))
ONE_HOT = np.eye(4)[[[0, 3], [2, 1], [1, 1]]]  # (3, 2, 4)

CASES = {
    "OneHotCategorical": ("OneHotCategorical", dict(probs=P24), {}, {}, ONE_HOT),
    "OneHotCategorical-logits": ("OneHotCategorical", dict(logits=L35), {}, {},
                                 np.eye(5)[[4, 0, 2]]),
    "OneHotCategoricalStraightThrough": ("OneHotCategoricalStraightThrough", dict(probs=P24),
                                         {}, {}, ONE_HOT),
    "Poisson": ("Poisson", dict(rate=np.array([0.5, 3.0, 12.5])), {}, {},
                np.array([[0.0, 2.0, 10.0], [1.0, 5.0, 13.0]])),
    "Binomial": ("Binomial", dict(probs=np.array([0.2, 0.5, 0.9])),
                 dict(total_count=np.array([5.0, 10.0, 10.0])), {},
                 np.array([[0.0, 5.0, 10.0], [3.0, 1.0, 9.0]])),
    "Binomial-homogeneous": ("Binomial", dict(logits=np.array([-1.5, 0.2, 2.0])), {},
                             dict(total_count=8), np.array([0.0, 4.0, 8.0])),
    "Geometric": ("Geometric", dict(probs=np.array([0.1, 0.5, 0.8])), {}, {},
                  np.array([[0.0, 3.0, 1.0], [12.0, 0.0, 2.0]])),
    "Geometric-logits": ("Geometric", dict(logits=np.array([-2.0, 0.0, 1.5])), {}, {},
                         np.array([4.0, 1.0, 0.0])),
    "NegativeBinomial": ("NegativeBinomial", dict(total_count=np.array([0.5, 3.0, 10.0]),
                                                  probs=np.array([0.2, 0.5, 0.7])), {}, {},
                         np.array([[0.0, 2.0, 25.0], [1.0, 7.0, 3.0]])),
    "NegativeBinomial-logits": ("NegativeBinomial", dict(logits=np.array([-1.0, 0.5])),
                                dict(total_count=np.array([2.0, 4.5])), {},
                                np.array([3.0, 0.0])),
    "Multinomial": ("Multinomial", dict(probs=np.array([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]])),
                    {}, dict(total_count=6), np.array([[1.0, 2.0, 3.0], [6.0, 0.0, 0.0]])),
    "Multinomial-logits": ("Multinomial", dict(logits=L35[:2, :4]), {}, dict(total_count=3),
                           np.array([[[0.0, 1.0, 2.0, 0.0], [3.0, 0.0, 0.0, 0.0]]])),
    "Laplace": ("Laplace", dict(loc=R.standard_normal(4), scale=R.uniform(0.5, 2.0, 4)), {},
                {}, R.standard_normal((2, 4))),
    "StudentT": ("StudentT", dict(df=np.array([0.8, 1.5, 3.0, 10.0]),
                                  loc=R.standard_normal(4), scale=R.uniform(0.5, 2.0, 4)),
                 {}, {}, 3 * R.standard_normal((2, 4))),
    "Chi2": ("Chi2", dict(df=np.array([0.5, 2.0, 7.0])), {}, {},
             np.array([[0.3, 2.0, 6.5], [1e-3, 0.5, 12.0]])),
    "ContinuousBernoulli": ("ContinuousBernoulli",
                            dict(probs=np.array([0.1, 0.4995, 0.7, 0.95])), {}, {},
                            np.array([[0.05, 0.5, 0.0, 0.99], [0.3, 1.0, 0.7, 0.2]])),
    "ContinuousBernoulli-logits": ("ContinuousBernoulli", dict(logits=np.array([-2.0, 0.001,
                                                                                 3.0])),
                                   {}, {}, np.array([0.2, 0.6, 0.9])),
    # batch (2, 3) broadcast from all three parameters, event size 4, rank 2
    "LowRankMultivariateNormal": ("LowRankMultivariateNormal",
                                  dict(loc=R.standard_normal((2, 1, 4)),
                                       cov_factor=R.standard_normal((3, 4, 2)),
                                       cov_diag=R.uniform(0.5, 2.0, (2, 3, 4))), {}, {},
                                  R.standard_normal((2, 1, 3, 4))),
    "LowRankMultivariateNormal-unbatched": ("LowRankMultivariateNormal",
                                            dict(loc=R.standard_normal(4),
                                                 cov_factor=R.standard_normal((4, 1)),
                                                 cov_diag=R.uniform(0.5, 2.0, 4)), {}, {},
                                            R.standard_normal((3, 4))),
}
# torch's Multinomial entropy takes lgamma(n + 1) of an int64 tensor, in float32 (ember's is
# exact: see test_counts.py)
LOOSE = {("Multinomial", "entropy"): 1e-6}
NO_TORCH_GRADIENT = {("Chi2", "cdf")}  # torch does not differentiate igamma in its input
CDF_FAMILIES = ("Laplace", "Chi2", "ContinuousBernoulli")
ICDF_FAMILIES = ("Laplace", "ContinuousBernoulli")


def build(case, lib, grad=False, dtype="float64", params=None):
    """The case's distribution in ember (lib='e') or torch (lib='t') and its gradient leaves."""
    family, gp, cp, kw, _ = CASES[case]
    if params is not None:
        gp = params
    mk = ember.tensor if lib == "e" else torch.tensor
    D = ED if lib == "e" else TD
    leaves = {k: mk(np.asarray(v, dtype=dtype), requires_grad=grad) for k, v in gp.items()}
    consts = {k: mk(np.asarray(v, dtype=dtype)) for k, v in cp.items()}
    return getattr(D, family)(**leaves, **consts, **kw), leaves


def _np(t):
    return t.detach().numpy()


def _try(fn):
    try:
        return fn()
    except NotImplementedError:
        return NotImplementedError


def _close(e, t, rtol, what):
    np.testing.assert_allclose(_np(e), _np(t), rtol=rtol, atol=rtol * 1e-2, err_msg=what)


def check_matches_torch(case):
    """Shapes, flags, support, moments, log_prob, entropy, cdf/icdf, enumerate_support and
    the gradients of all of them (the finite entries) equal torch's."""
    e, pe = build(case, "e", True)
    t, pt = build(case, "t", True)
    family = CASES[case][0]
    value = CASES[case][4]
    assert tuple(e.batch_shape) == tuple(t.batch_shape)
    assert tuple(e.event_shape) == tuple(t.event_shape)
    assert (e.has_rsample, e.has_enumerate_support) == (t.has_rsample, t.has_enumerate_support)
    assert type(e.support).__name__.lstrip("_") in type(t.support).__name__
    assert e.support.event_dim == t.support.event_dim
    assert e.support.is_discrete == t.support.is_discrete
    results = {}
    for prop in ("mean", "mode", "variance", "stddev"):
        results[prop] = (_try(lambda: getattr(e, prop)), _try(lambda: getattr(t, prop)))
    results["log_prob"] = (e.log_prob(ember.tensor(value)), t.log_prob(torch.tensor(value)))
    results["entropy"] = (_try(e.entropy), _try(t.entropy))
    if family in CDF_FAMILIES:
        results["cdf"] = (e.cdf(ember.tensor(value)), t.cdf(torch.tensor(value)))
    if family in ICDF_FAMILIES:
        q = np.array([0.01, 0.3, 0.5, 0.95])[:e.batch_shape[-1]]
        results["icdf"] = (e.icdf(ember.tensor(q)), t.icdf(torch.tensor(q)))
    loss_e, loss_t = 0.0, 0.0
    for what, (ev, tv) in results.items():
        if tv is NotImplementedError:
            assert ev is NotImplementedError, what
            continue
        _close(ev, tv, LOOSE.get((family, what), 1e-10), what)
        if (family, what) in NO_TORCH_GRADIENT:
            continue
        finite = np.isfinite(_np(tv))
        loss_e = loss_e + ember.where(ember.tensor(finite), ev, 0.0).sum()
        loss_t = loss_t + torch.where(torch.tensor(finite), tv, 0.0).sum()
    loss_e.backward()
    loss_t.backward()
    for k in pe:
        np.testing.assert_allclose(pe[k].grad.numpy(), pt[k].grad.numpy(), rtol=1e-8,
                                   atol=1e-10, err_msg=k)
    if t.has_enumerate_support and _try(lambda: t.enumerate_support()) is not \
            NotImplementedError:
        for expand in (True, False):
            es, ts = e.enumerate_support(expand), t.enumerate_support(expand)
            assert tuple(es.shape) == tuple(ts.shape)
            assert str(es.dtype).split(".")[-1] == str(ts.dtype).split(".")[-1]
            np.testing.assert_array_equal(es.numpy(), ts.numpy())


def check_float32_matches_torch(case):
    """float32 parameters: log_prob and entropy within 1e-5 of torch's, in float32."""
    e, _ = build(case, "e", dtype="float32")
    t, _ = build(case, "t", dtype="float32")
    value = CASES[case][4].astype(np.float32)
    le, lt = e.log_prob(ember.tensor(value)), t.log_prob(torch.tensor(value))
    assert le.dtype == ember.float32
    _close(le, lt, 1e-5, "log_prob")
    he, ht = _try(e.entropy), _try(t.entropy)
    if ht is not NotImplementedError:
        assert he.dtype == ember.float32
        _close(he, ht, 1e-5, "entropy")


def check_sample_and_expand(case):
    """sample / rsample shapes and dtypes, draws inside the support, no graph; expand."""
    ember.manual_seed(0)
    e, _ = build(case, "e", True)
    t, _ = build(case, "t", True)
    s, ts = e.sample((5, 2)), t.sample((5, 2))
    assert tuple(s.shape) == tuple(ts.shape)
    assert str(s.dtype).split(".")[-1] == str(ts.dtype).split(".")[-1]
    assert not s.requires_grad and bool(e.support.check(s).all())
    if e.has_rsample:
        r = e.rsample((3,))
        assert r.requires_grad and tuple(r.shape) == (3,) + tuple(t.batch_shape + t.event_shape)
    else:
        with pytest.raises(NotImplementedError):
            e.rsample()
    x, y = e.expand((2,) + tuple(e.batch_shape)), t.expand((2,) + tuple(t.batch_shape))
    assert type(x) is type(e) and tuple(x.batch_shape) == tuple(y.batch_shape)
    assert tuple(x.event_shape) == tuple(y.event_shape)
    assert tuple(x.sample().shape) == tuple(y.sample().shape)
    torch.manual_seed(0)
    drawn = y.sample((3,))
    np.testing.assert_allclose(_np(x.log_prob(ember.tensor(drawn.numpy()))),
                               _np(y.log_prob(drawn)), rtol=1e-10)


MOMENT_CASES = {  # case -> parameters with finite fourth moments
    "OneHotCategorical": None, "Poisson": None, "Binomial": None, "Geometric": None,
    "NegativeBinomial": None, "Multinomial": None, "Laplace": None, "Chi2": None,
    "ContinuousBernoulli": None, "LowRankMultivariateNormal": None,
    "StudentT": dict(df=np.array([5.0, 9.0]), loc=np.array([1.0, -2.0]),
                     scale=np.array([0.5, 2.0])),
}


def check_sample_moments(case, n=100000):
    """Mean of ``n`` draws (fixed seed) within 5 standard errors of ``mean``, and the sample
    variance within 5 standard errors of ``variance``."""
    ember.manual_seed(11)
    e, _ = build(case, "e", params=MOMENT_CASES[case])
    x = e.sample((n,)).numpy().astype(np.float64)
    mean, var = _np(e.mean), _np(e.variance)
    assert np.all(np.abs(x.mean(0) - mean) < 5 * np.sqrt(var / n) + 1e-12)
    m4 = ((x - mean) ** 4).mean(0)
    assert np.all(np.abs(x.var(0) - var) < 5 * np.sqrt((m4 - var ** 2) / n) + 25 * var / n
                  + 1e-12)


INVALID_PARAMETERS = [
    ("Poisson", dict(rate=np.array([1.0, -0.5]))),
    ("Binomial", dict(total_count=np.array([2.5, 3.0]), probs=np.array([0.5, 0.5]))),
    ("Binomial", dict(total_count=np.array([2.0, 3.0]), probs=np.array([0.5, 1.5]))),
    ("Geometric", dict(probs=np.array([0.5, 1.5]))),
    ("Geometric", dict(probs=np.array([0.5, 0.0]))),
    ("NegativeBinomial", dict(total_count=np.array([-1.0, 3.0]), probs=np.array([0.5, 0.5]))),
    ("NegativeBinomial", dict(total_count=np.array([1.0, 3.0]), probs=np.array([0.5, 1.0]))),
    ("Laplace", dict(loc=np.zeros(2), scale=np.array([1.0, 0.0]))),
    ("StudentT", dict(df=np.array([1.0, 2.0]), loc=np.zeros(2), scale=np.array([1.0, -1.0]))),
    ("StudentT", dict(df=np.array([1.0, -2.0]))),
    ("Chi2", dict(df=np.array([1.0, -2.0]))),
    ("ContinuousBernoulli", dict(logits=np.array([0.0, np.nan]))),
    ("LowRankMultivariateNormal", dict(loc=np.zeros(2), cov_factor=np.ones((2, 1)),
                                       cov_diag=np.array([1.0, -1.0]))),
    ("LowRankMultivariateNormal", dict(loc=np.zeros(2), cov_factor=np.ones((2, 1)),
                                       cov_diag=np.array([1.0, 0.0]))),
    ("LowRankMultivariateNormal", dict(loc=np.array([0.0, np.nan]), cov_factor=np.ones((2, 1)),
                                       cov_diag=np.ones(2))),
]
# torch validates the inner Categorical with its default, so validate_args=False does not
# skip these checks
INNER_CATEGORICAL = [
    ("OneHotCategorical", dict(probs=np.array([0.2, -0.1, 0.9]))),
    ("OneHotCategoricalStraightThrough", dict(logits=np.array([0.2, np.nan]))),
    ("Multinomial", dict(probs=np.array([0.2, -0.1, 0.9]))),
]


def _raise_both(ctor, kw, **extra):
    with pytest.raises(ValueError) as te:
        getattr(TD, ctor)(**{k: torch.tensor(v) for k, v in kw.items()}, **extra)
    with pytest.raises(ValueError) as ee:
        getattr(ED, ctor)(**{k: ember.tensor(v) for k, v in kw.items()}, **extra)
    assert isinstance(ee.value, ember.errors.EmberError)
    return str(te.value), str(ee.value)


def check_invalid_parameters_raise_as_torch(ctor, kw):
    """An EmberValueError opening with torch's words (naming the argument); none with
    validate_args=False."""
    te, ee = _raise_both(ctor, kw)
    assert ee.split(" of distribution")[0] == te.split(" of distribution")[0]
    assert ee.startswith("Expected parameter ")
    if (ctor, kw) not in INNER_CATEGORICAL:
        getattr(ED, ctor)(**{k: ember.tensor(v) for k, v in kw.items()}, validate_args=False)


OUTSIDE_SUPPORT = [
    ("OneHotCategorical", np.array([1.0, 1.0, 0.0, 0.0])),
    ("OneHotCategorical", np.array([0.5, 0.5, 0.0, 0.0])),
    ("Poisson", np.array([1.0, -1.0, 2.0])), ("Poisson", np.array([1.0, 1.5, 2.0])),
    ("Binomial", np.array([6.0, 1.0, 1.0])), ("Geometric", np.array([1.0, -1.0, 0.5])),
    ("NegativeBinomial", np.array([1.0, 0.5, 2.0])),
    ("Multinomial", np.array([[1.0, 2.0, 4.0], [1.0, 1.0, 1.0]])),
    ("Multinomial", np.array([[1.0, -1.0, 4.0], [1.0, 1.0, 1.0]])),
    ("Laplace", np.array([np.nan, 0, 0, 0])), ("Chi2", np.array([-1.0, 1.0, 1.0])),
    ("ContinuousBernoulli", np.array([0.5, 1.5, 0.2, 0.2])),
    ("LowRankMultivariateNormal", np.array([0.5, np.nan, 0.2, 0.2])),
]


def check_log_prob_outside_support_raises_as_torch(case, bad):
    e, _ = build(case, "e")
    t, _ = build(case, "t")
    with pytest.raises(ValueError) as te:
        t.log_prob(torch.tensor(bad))
    with pytest.raises(ValueError) as ee:
        e.log_prob(ember.tensor(bad))
    assert isinstance(ee.value, ember.errors.EmberError)
    assert str(ee.value).split(" (")[0] == str(te.value).split(" (")[0]
    assert "to be within the support" in str(ee.value)


def cases(entries, families):
    """The entries (a case name, or a tuple starting with one) of those families."""
    return [c for c in entries
            if (c[0] if isinstance(c, tuple) else c).split("-")[0] in families]
