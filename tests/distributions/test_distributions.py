"""ember.distributions against torch.distributions: log_prob / entropy / mean / variance / cdf
values and their gradients, rsample gradients, sampling moments (fixed seed, 5 sigma),
validate_args errors and kl_divergence."""
import subprocess
import sys

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


@pytest.mark.parametrize("case", list(CASES))
def test_values_and_gradients_match_torch(case):
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


@pytest.mark.parametrize("case", ["Normal", "Uniform", "MultivariateNormal-tril",
                                  "MultivariateNormal"])
def test_rsample_gradient_is_the_reparameterisation(case):
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


@pytest.mark.parametrize("case", ["Beta", "Dirichlet"])
def test_implicit_rsample_gradients_are_unbiased(case):
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


@pytest.mark.parametrize("case", MOMENT_CASES)
def test_sample_moments(case):
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


def test_sampling_is_seeded():
    d = ED.Normal(ember.zeros(3), ember.ones(3))
    ember.manual_seed(7)
    a = d.sample((4,)).numpy()
    ember.manual_seed(7)
    assert np.array_equal(a, d.sample((4,)).numpy())


@pytest.mark.parametrize("ctor,kw", [
    ("Normal", dict(loc=np.zeros(2), scale=np.array([1.0, -1.0]))),
    ("Normal", dict(loc=np.array([0.0, np.nan]), scale=np.ones(2))),
    ("Uniform", dict(low=np.array([0.0, 2.0]), high=np.array([1.0, 1.0]))),
    ("Bernoulli", dict(probs=np.array([0.2, 1.5]))),
    ("Categorical", dict(probs=np.array([0.2, -0.1, 0.9]))),
    ("Gamma", dict(concentration=np.array([1.0, 0.0]), rate=np.ones(2))),
    ("Beta", dict(concentration1=np.array([1.0]), concentration0=np.array([-2.0]))),
    ("Dirichlet", dict(concentration=np.array([1.0, -1.0]))),
    ("MultivariateNormal", dict(loc=np.zeros(2), scale_tril=np.array([[1.0, 0], [0.5, -1]]))),
])
def test_invalid_parameters_raise_as_torch(ctor, kw):
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


@pytest.mark.parametrize("case,bad", [
    ("Normal", np.array([np.nan, 0, 0, 0])), ("Uniform", np.array([0.5, 3.5, 2.2])),
    ("Bernoulli", np.array([0.5, 1.0, 0.0])), ("Gamma", np.array([-1.0, 1.0, 1.0])),
    ("Beta", np.array([0.5, 1.2, 0.5])), ("Dirichlet", np.array([0.5, 0.6, 0.1])),
    ("Categorical-logits", np.array([5, 0, 1]))])
def test_log_prob_outside_support_raises_as_torch(case, bad):
    e, _ = _build("ember", case)
    t, _ = _build("torch", case)
    with pytest.raises(ValueError) as te:
        t.log_prob(torch.tensor(bad))
    with pytest.raises(ValueError) as ee:
        e.log_prob(ember.tensor(bad))
    assert str(ee.value).split(" (")[0] == str(te.value).split(" (")[0]
    assert "to be within the support" in str(ee.value)


def test_shape_and_argument_errors():
    n = ED.Normal(ember.zeros(3), ember.ones(3))
    with pytest.raises(ValueError, match="must be a Tensor"):
        n.log_prob(0.5)
    with pytest.raises(ValueError, match="broadcastable"):
        n.log_prob(ember.zeros(4))
    d = ED.Dirichlet(ember.ones(3))
    with pytest.raises(ValueError, match="right-most size"):
        d.log_prob(ember.ones(2) / 2)
    with pytest.raises(ValueError, match="not both"):
        ED.Bernoulli(probs=ember.tensor(0.5), logits=ember.tensor(0.0))
    with pytest.raises(ValueError, match="one-dimensional"):
        ED.Categorical(probs=ember.tensor(1.0))
    with pytest.raises(ValueError, match="Exactly one"):
        ED.MultivariateNormal(ember.zeros(2))
    with pytest.raises(ValueError, match="reinterpreted_batch_ndims"):
        ED.Independent(n, 2)


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


@pytest.mark.parametrize("case", KL_PAIRS)
def test_kl_divergence_matches_torch(case):
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


def test_kl_special_cases():
    # support of p outside q's: infinite, as torch
    p, q = ED.Uniform(0.0, 2.0), ED.Uniform(0.5, 3.0)
    assert float(ED.kl_divergence(p, q)) == float("inf")
    tp, tq = TD.Uniform(0.0, 2.0), TD.Uniform(0.5, 3.0)
    assert float(TD.kl_divergence(tp, tq)) == float("inf")
    # Uniform || Normal and Independent || Independent
    u = ED.Uniform(ember.tensor([0.0, 1.0]), ember.tensor([1.0, 4.0]))
    nrm = ED.Normal(ember.tensor([0.3, 2.0]), ember.tensor([1.0, 0.5]))
    tu = TD.Uniform(torch.tensor([0.0, 1.0]), torch.tensor([1.0, 4.0]))
    tn = TD.Normal(torch.tensor([0.3, 2.0]), torch.tensor([1.0, 0.5]))
    np.testing.assert_allclose(ED.kl_divergence(u, nrm).numpy(),
                               TD.kl_divergence(tu, tn).numpy(), rtol=1e-6)
    np.testing.assert_allclose(
        float(ED.kl_divergence(ED.Independent(u, 1), ED.Independent(nrm, 1))),
        float(TD.kl_divergence(TD.Independent(tu, 1), TD.Independent(tn, 1))), rtol=1e-6)
    # Bernoulli with a zero probability: infinite where p puts mass q does not
    pe, qe = [0.5, 0.0], [0.0, 0.5]
    b1, b0 = ED.Bernoulli(probs=ember.tensor(pe)), ED.Bernoulli(probs=ember.tensor(qe))
    tb1, tb0 = TD.Bernoulli(probs=torch.tensor(pe)), TD.Bernoulli(probs=torch.tensor(qe))
    np.testing.assert_allclose(ED.kl_divergence(b1, b0).numpy(),
                               TD.kl_divergence(tb1, tb0).numpy(), rtol=1e-6)
    with pytest.raises(NotImplementedError, match="No KL"):
        ED.kl_divergence(ED.Normal(0.0, 1.0), ED.Gamma(1.0, 1.0))

    class MyNormal(ED.Normal):
        pass

    @ED.register_kl(MyNormal, MyNormal)
    def _kl(p, q):
        return ember.tensor(42.0)
    assert float(ED.kl_divergence(MyNormal(0.0, 1.0), MyNormal(0.0, 1.0))) == 42.0
    # a subclass pair without its own entry uses the closest registered one
    assert float(ED.kl_divergence(MyNormal(0.0, 1.0), ED.Normal(0.0, 1.0))) == 0.0


def test_import_ember_does_not_load_distributions():
    code = ("import sys, ember; assert 'ember.distributions' not in sys.modules; "
            "ember.distributions.Normal; assert 'ember.distributions' in sys.modules")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_icdf_enumerate_support_mode_and_default_validation():
    loc, scale, q = np.array([0.0, 1.0]), np.array([1.0, 3.0]), np.array([0.1, 0.8])
    np.testing.assert_allclose(
        ED.Normal(ember.tensor(loc), ember.tensor(scale)).icdf(ember.tensor(q)).numpy(),
        TD.Normal(torch.tensor(loc), torch.tensor(scale)).icdf(torch.tensor(q)).numpy(),
        rtol=1e-10)
    probs = np.array([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]])
    for name in ("Categorical", "Bernoulli"):
        p = probs if name == "Categorical" else probs[:, 0]
        e = getattr(ED, name)(ember.tensor(p)).enumerate_support()
        t = getattr(TD, name)(torch.tensor(p)).enumerate_support()
        assert tuple(e.shape) == tuple(t.shape) and np.array_equal(e.numpy(), t.numpy())
    c = np.array([[0.5, 0.3, 0.9], [2.0, 3.0, 0.5]])  # all < 1 in the first row: one-hot
    np.testing.assert_allclose(ED.Dirichlet(ember.tensor(c)).mode.numpy(),
                               TD.Dirichlet(torch.tensor(c)).mode.numpy())
    np.testing.assert_allclose(ED.Bernoulli(ember.tensor([0.2, 0.5, 0.7])).mode.numpy(),
                               TD.Bernoulli(torch.tensor([0.2, 0.5, 0.7])).mode.numpy())
    np.testing.assert_allclose(
        ED.Categorical(ember.tensor(probs)).perplexity().numpy(),
        TD.Categorical(torch.tensor(probs)).perplexity().numpy(), rtol=1e-12)
    try:
        ED.Distribution.set_default_validate_args(False)
        ED.Normal(0.0, -1.0)  # not checked
    finally:
        ED.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError):
        ED.Normal(0.0, -1.0)
