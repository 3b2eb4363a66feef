"""The distribution families of ember.distributions against torch.distributions, shared by the
test file of each module defining them: log_prob / entropy / mean / variance / cdf values and
their gradients, rsample gradients, sampling moments (fixed seed, 5 sigma), validate_args errors
and kl_divergence. ``cases(LIST, families)``: the entries of a case list for those families."""
import numpy as np
import pytest

import ember
import ember.distributions as ED

torch = pytest.importorskip("torch")
TD = torch.distributions

R = np.random.default_rng(0)
SPD = np.array([[2.0, 0.5, 0.1], [0.5, 1.0, 0.2], [0.1, 0.2, 0.7]])
CASES = {
    "Normal": (dict(loc=R.standard_normal(4), scale=R.uniform(0.5, 2, 4)),
               R.standard_normal((2, 4))),
    "Uniform": (dict(low=np.array([0.0, -1.0, 2.0]), high=np.array([1.0, 3.0, 2.5])),
                np.array([0.5, 0.0, 2.2])),
    "Bernoulli": (dict(probs=np.array([0.1, 0.5, 0.9])), np.array([[1.0, 0.0, 1.0]])),
    "Bernoulli-logits": (dict(logits=np.array([-2.0, 0.3, 4.0])), np.array([0.0, 1.0, 1.0])),
    "Categorical": (dict(probs=R.uniform(0.1, 1, (2, 4))), np.array([[0, 3], [2, 1]])),
    "Categorical-logits": (dict(logits=R.standard_normal((3, 5))), np.array([4, 0, 2])),
    "Gamma": (dict(concentration=np.array([0.5, 2.0, 7.0]), rate=np.array([1.0, 0.5, 3.0])),
              np.array([0.3, 2.0, 1.5])),
    "Beta": (dict(concentration1=np.array([0.7, 2.0, 5.0]),
                  concentration0=np.array([1.5, 2.0, 0.8])), np.array([0.2, 0.5, 0.9])),
    "Dirichlet": (dict(concentration=np.array([[0.5, 1.0, 2.0], [3.0, 4.0, 0.9]])),
                  np.array([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]])),
    "MultivariateNormal": (dict(loc=R.standard_normal(3), covariance_matrix=SPD),
                           R.standard_normal((2, 3))),
    "MultivariateNormal-tril": (dict(loc=R.standard_normal((2, 3)),
                                     scale_tril=np.linalg.cholesky(SPD)),
                                R.standard_normal((2, 3))),
    "MultivariateNormal-prec": (dict(loc=R.standard_normal(3),
                                     precision_matrix=np.linalg.inv(SPD)),
                                R.standard_normal(3)),
}
DISCRETE_PARAMS = {"Categorical": ()}


def _build(lib, case, requires_grad=False):
    name = case.split("-")[0]
    params, _ = CASES[case]
    mod = ED if lib == "ember" else TD
    make = ember.tensor if lib == "ember" else torch.tensor
    leaves = {k: make(v, requires_grad=requires_grad) for k, v in params.items()}
    return getattr(mod, name)(**leaves), leaves


def _np(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def _value(lib, case):
    v = CASES[case][1]
    if case.startswith("Categorical"):
        return ember.tensor(v) if lib == "ember" else torch.tensor(v)
    return ember.tensor(v) if lib == "ember" else torch.tensor(v)


def check_values_and_gradients_match_torch(case):
    e, el = _build("ember", case, True)
    t, tl = _build("torch", case, True)
    assert tuple(e.batch_shape) == tuple(t.batch_shape)
    assert tuple(e.event_shape) == tuple(t.event_shape)
    for prop in ("mean", "variance", "stddev", "mode"):
        np.testing.assert_allclose(_np(getattr(e, prop)), _np(getattr(t, prop)), rtol=1e-10,
                                   atol=1e-12, err_msg=prop)
    elp, tlp = e.log_prob(_value("ember", case)), t.log_prob(_value("torch", case))
    np.testing.assert_allclose(_np(elp), _np(tlp), rtol=1e-10, atol=1e-12)
    eh, th = e.entropy(), t.entropy()
    np.testing.assert_allclose(_np(eh), _np(th), rtol=1e-10, atol=1e-12)
    if case in ("Normal", "Uniform", "Gamma"):
        np.testing.assert_allclose(_np(e.cdf(_value("ember", case))),
                                   _np(t.cdf(_value("torch", case))), rtol=1e-9)
    # gradients of log_prob and entropy with respect to every parameter
    (elp.sum() + eh.sum()).backward()
    (tlp.sum() + th.sum()).backward()
    for k in el:
        np.testing.assert_allclose(_np(el[k].grad), _np(tl[k].grad), rtol=1e-8, atol=1e-10,
                                   err_msg=k)


RSAMPLE_CASES = ["Normal", "Uniform", "MultivariateNormal-tril", "MultivariateNormal"]


def check_rsample_gradient_is_the_reparameterisation(case):
    """loss = sum(w * x^2) over rsample draws: the gradient equals torch's autograd through
    the same transform of the same noise (recovered from the draws)."""
    ember.manual_seed(0)
    e, el = _build("ember", case, True)
    x = e.rsample((7,))
    w = np.linspace(0.5, 1.5, int(np.prod(tuple(x.shape)))).reshape(tuple(x.shape))
    (ember.tensor(w) * x * x).sum().backward()
    t, tl = _build("torch", case, True)
    xs = x.detach().numpy()
    p = dict(CASES[case][0])
    if case == "Normal":
        noise = torch.tensor((xs - p["loc"]) / p["scale"])
        tx = tl["loc"] + noise * tl["scale"]
    elif case == "Uniform":
        noise = torch.tensor((xs - p["low"]) / (p["high"] - p["low"]))
        tx = tl["low"] + noise * (tl["high"] - tl["low"])
    else:
        L = t._unbroadcasted_scale_tril.detach().numpy()
        noise = torch.tensor(np.linalg.solve(L, (xs - p["loc"])[..., None])[..., 0])
        tx = t.loc + (t._unbroadcasted_scale_tril @ noise.unsqueeze(-1)).squeeze(-1)
    (torch.tensor(w) * tx * tx).sum().backward()
    for k in el:
        np.testing.assert_allclose(el[k].grad.numpy(), tl[k].grad.numpy(), rtol=1e-8,
                                   atol=1e-10, err_msg=k)


IMPLICIT_CASES = ["Beta", "Dirichlet"]


def check_implicit_rsample_gradients_are_unbiased(case):
    """d/dc E[sum(w * x)] estimated from per-draw gradients equals the exact gradient of
    sum(w * mean) within 5 standard errors."""
    ember.manual_seed(2)
    n = 4000
    params, _ = CASES[case]
    leaves = {k: ember.tensor(np.broadcast_to(v, (n,) + v.shape).copy(), requires_grad=True)
              for k, v in params.items()}
    d = getattr(ED, case)(**leaves)
    x = d.rsample()
    w = np.linspace(0.5, 2.0, x.shape[-1]) if case == "Dirichlet" else 1.0
    (x * ember.tensor(w) if case == "Dirichlet" else x).sum().backward()
    tl = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    tm = getattr(TD, case)(**tl).mean
    (tm * torch.tensor(w) if case == "Dirichlet" else tm).sum().backward()
    for k, leaf in leaves.items():
        g = leaf.grad.numpy()
        est, se = g.mean(0), g.std(0) / np.sqrt(n)
        assert np.all(np.abs(est - tl[k].grad.numpy()) < 5 * se + 1e-12), (k, est,
                                                                            tl[k].grad)


MOMENT_CASES = ["Normal", "Uniform", "Bernoulli", "Gamma", "Beta", "Dirichlet",
                "MultivariateNormal", "Categorical"]


def check_sample_moments(case):
    """Sample mean and variance within 5 standard errors (fixed seed); sample() carries no
    graph; shapes are sample_shape + batch_shape + event_shape."""
    ember.manual_seed(3)
    e, _ = _build("ember", case, True)
    n = 20000
    s = e.sample((n,))
    assert tuple(s.shape) == (n,) + tuple(e.batch_shape) + tuple(e.event_shape)
    assert s.grad_fn is None and not s.requires_grad
    x = s.numpy().astype(np.float64)
    if case == "Categorical":
        probs = e.probs.detach().numpy()
        for k in range(probs.shape[-1]):
            freq = (x == k).mean(0)
            se = np.sqrt(probs[..., k] * (1 - probs[..., k]) / n)
            assert np.all(np.abs(freq - probs[..., k]) < 5 * se), k
        return
    mean, var = e.mean.detach().numpy(), e.variance.detach().numpy()
    assert np.all(np.abs(x.mean(0) - mean) < 5 * np.sqrt(var / n))
    m4 = ((x - mean) ** 4).mean(0)
    # (the second-order term covers a degenerate first order, e.g. Bernoulli(0.5))
    assert np.all(np.abs(x.var(0) - var) < 5 * np.sqrt((m4 - var ** 2) / n) + 25 * var / n)
    if case == "MultivariateNormal":
        cov = np.cov(x.T)
        np.testing.assert_allclose(cov, SPD, atol=5 * 2 * 2.0 / np.sqrt(n))


INVALID_PARAMETERS = [
    ("Normal", dict(loc=np.zeros(2), scale=np.array([1.0, -1.0]))),
    ("Normal", dict(loc=np.array([0.0, np.nan]), scale=np.ones(2))),
    ("Uniform", dict(low=np.array([0.0, 2.0]), high=np.array([1.0, 1.0]))),
    ("Bernoulli", dict(probs=np.array([0.2, 1.5]))),
    ("Categorical", dict(probs=np.array([0.2, -0.1, 0.9]))),
    ("Gamma", dict(concentration=np.array([1.0, 0.0]), rate=np.ones(2))),
    ("Beta", dict(concentration1=np.array([1.0]), concentration0=np.array([-2.0]))),
    ("Dirichlet", dict(concentration=np.array([1.0, -1.0]))),
    ("MultivariateNormal", dict(loc=np.zeros(2), scale_tril=np.array([[1.0, 0], [0.5, -1]]))),
]


def check_invalid_parameters_raise_as_torch(ctor, kw):
    with pytest.raises(ValueError) as te:
        getattr(TD, ctor)(**{k: torch.tensor(v) for k, v in kw.items()})
    with pytest.raises(ValueError) as ee:
        getattr(ED, ctor)(**{k: ember.tensor(v) for k, v in kw.items()})
    assert isinstance(ee.value, ember.errors.EmberError)
    # same opening words as torch ("Expected parameter scale (Tensor of shape (2,)) of ...")
    opening = str(te.value).split(" of distribution")[0]
    assert str(ee.value).split(" of distribution")[0] == opening
    # validate_args=False skips the check
    getattr(ED, ctor)(**{k: ember.tensor(v) for k, v in kw.items()}, validate_args=False)


OUTSIDE_SUPPORT = [
    ("Normal", np.array([np.nan, 0, 0, 0])), ("Uniform", np.array([0.5, 3.5, 2.2])),
    ("Bernoulli", np.array([0.5, 1.0, 0.0])), ("Gamma", np.array([-1.0, 1.0, 1.0])),
    ("Beta", np.array([0.5, 1.2, 0.5])), ("Dirichlet", np.array([0.5, 0.6, 0.1])),
    ("Categorical-logits", np.array([5, 0, 1]))]


def check_log_prob_outside_support_raises_as_torch(case, bad):
    e, _ = _build("ember", case)
    t, _ = _build("torch", case)
    with pytest.raises(ValueError) as te:
        t.log_prob(torch.tensor(bad))
    with pytest.raises(ValueError) as ee:
        e.log_prob(ember.tensor(bad))
    assert str(ee.value).split(" (")[0] == str(te.value).split(" (")[0]
    assert "to be within the support" in str(ee.value)


KL_PAIRS = ["Normal", "Uniform", "Bernoulli", "Categorical", "Gamma", "Beta", "Dirichlet",
            "MultivariateNormal"]


def _other(case):
    """A second distribution of the same family with different parameters."""
    params, _ = CASES[case]
    rng = np.random.default_rng(5)
    out = {}
    for k, v in params.items():
        if k in ("covariance_matrix",):
            out[k] = v + 0.3 * np.eye(3)
        elif k in ("probs",):
            out[k] = np.clip(v * rng.uniform(0.5, 1.5, v.shape), 0.05, 0.95)
        elif k == "low":
            out[k] = v - 0.5
        elif k == "high":
            out[k] = v + 0.5
        elif k == "loc":
            out[k] = v + rng.standard_normal(v.shape)
        else:
            out[k] = v * rng.uniform(0.5, 1.5, v.shape)
    return out


def check_kl_divergence_matches_torch(case):
    e1, l1 = _build("ember", case, True)
    t1, m1 = _build("torch", case, True)
    other = _other(case)
    e2 = getattr(ED, case)(**{k: ember.tensor(v) for k, v in other.items()})
    t2 = getattr(TD, case)(**{k: torch.tensor(v) for k, v in other.items()})
    ek, tk = ED.kl_divergence(e1, e2), TD.kl_divergence(t1, t2)
    np.testing.assert_allclose(ek.detach().numpy(), tk.detach().numpy(), rtol=1e-9,
                               atol=1e-12)
    assert np.all(np.isfinite(ek.detach().numpy()))
    ek.sum().backward()
    tk.sum().backward()
    for k in l1:
        np.testing.assert_allclose(l1[k].grad.numpy(), m1[k].grad.numpy(), rtol=1e-8,
                                   atol=1e-10)
    np.testing.assert_allclose(ED.kl_divergence(e1, e1).detach().numpy(), 0, atol=1e-10)


def cases(entries, families):
    """The entries of ``entries`` (a case name, or a tuple starting with one) whose family (the
    name before any '-') is in ``families``."""
    return [e for e in entries
            if (e[0] if isinstance(e, tuple) else e).split("-")[0] in families]
