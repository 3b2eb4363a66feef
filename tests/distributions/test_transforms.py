"""ember.distributions.transforms, TransformedDistribution, the distributions built on it and
biject_to / transform_to, against torch.distributions on the same inputs."""
import math

import numpy as np
import pytest

import ember
import ember.distributions as ED
from ember.distributions import constraints as EC
from ember.distributions import transforms as ET

torch = pytest.importorskip("torch")
TD = torch.distributions
TT = torch.distributions.transforms
TC = torch.distributions.constraints

# Pareto's mean at alpha = 1 and Weibull's at concentration 0 divide by zero: inf, as torch,
# but ember's binary kernels still let NumPy warn
pytestmark = pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")
R = np.random.default_rng(0)
X = R.standard_normal((3, 4))
LOC, SCALE = R.standard_normal(4), R.uniform(0.5, 2.0, 4)


def _pair(name, lib):
    """The same transform built in ember (lib='e') or torch (lib='t')."""
    T, mk = (ET, ember.tensor) if lib == "e" else (TT, torch.tensor)
    return {
        "exp": lambda: T.ExpTransform(),
        "sigmoid": lambda: T.SigmoidTransform(),
        "tanh": lambda: T.TanhTransform(),
        "softplus": lambda: T.SoftplusTransform(),
        "affine": lambda: T.AffineTransform(mk(LOC), mk(SCALE * np.array([1, -1, 1, -1]))),
        "affine-scalar": lambda: T.AffineTransform(0.5, -2.0),
        "affine-event": lambda: T.AffineTransform(mk(LOC), mk(SCALE), event_dim=1),
        "power": lambda: T.PowerTransform(mk(np.array([2.0, 0.5, -1.0, 3.0]))),
        "abs": lambda: T.AbsTransform(),
        "stickbreaking": lambda: T.StickBreakingTransform(),
        "softmax": lambda: T.SoftmaxTransform(),
        "compose": lambda: T.ComposeTransform([T.AffineTransform(mk(LOC), mk(SCALE)),
                                               T.TanhTransform(),
                                               T.AffineTransform(1.0, 3.0)]),
        "compose-coupled": lambda: T.ComposeTransform([T.ExpTransform(),
                                                       T.AffineTransform(-1.0, 2.0),
                                                       T.StickBreakingTransform()]),
        "inverse-exp": lambda: T.ExpTransform().inv,
        "independent": lambda: T.IndependentTransform(T.SigmoidTransform(), 1),
        "reshape": lambda: T.ReshapeTransform((4,), (2, 2)),
    }[name]()


NAMES = ["exp", "sigmoid", "tanh", "softplus", "affine", "affine-scalar", "affine-event",
         "power", "abs", "stickbreaking", "softmax", "compose", "compose-coupled",
         "inverse-exp", "independent", "reshape"]
HAS_LADJ = {n for n in NAMES if n not in ("abs", "softmax")}


def _input(name):
    x = X.copy()
    if name in ("power", "inverse-exp"):
        x = np.abs(x) + 0.1
    return x


@pytest.mark.parametrize("name", NAMES)
def test_transform_matches_torch(name):
    e, t = _pair(name, "e"), _pair(name, "t")
    xe = ember.tensor(_input(name), requires_grad=True)
    xt = torch.tensor(_input(name), requires_grad=True)
    ye, yt = e(xe), t(xt)
    np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(e.inv(ye).detach().numpy(), t.inv(yt).detach().numpy(),
                               rtol=1e-10, atol=1e-12)
    assert e.bijective == t.bijective
    assert e.domain.event_dim == t.domain.event_dim
    assert e.codomain.event_dim == t.codomain.event_dim
    fs = e.forward_shape((5, 4))
    assert tuple(fs) == tuple(t.forward_shape(torch.Size((5, 4))))
    assert tuple(e.inverse_shape(fs)) == tuple(t.inverse_shape(torch.Size(tuple(fs)))) == (5, 4)
    assert bool(e.codomain.check(ye.detach()).all())
    loss_e, loss_t = (ye * ye).sum(), (yt * yt).sum()
    if name in HAS_LADJ:
        le, lt = e.log_abs_det_jacobian(xe, ye), t.log_abs_det_jacobian(xt, yt)
        assert tuple(le.shape) == tuple(lt.shape)
        np.testing.assert_allclose(le.detach().numpy(), lt.detach().numpy(), rtol=1e-10,
                                   atol=1e-12)
        loss_e, loss_t = loss_e + le.sum(), loss_t + lt.sum()
    else:
        with pytest.raises(NotImplementedError):
            e.log_abs_det_jacobian(xe, ye)
    loss_e.backward()
    loss_t.backward()
    np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=1e-9, atol=1e-12)
    if e.bijective and e.domain.event_dim == 0 and e.codomain.event_dim == 0:
        s_e, s_t = e.sign, t.sign
        np.testing.assert_array_equal(np.asarray(s_e.numpy() if hasattr(s_e, "numpy") else s_e),
                                      np.asarray(s_t.numpy() if hasattr(s_t, "numpy") else s_t))


@pytest.mark.parametrize("name", ["exp", "sigmoid", "tanh", "softplus", "affine", "power"])
def test_elementwise_log_abs_det_jacobian_is_the_derivative(name):
    """log |dy/dx| equals the log of ember's own autograd derivative."""
    e = _pair(name, "e")
    x = ember.tensor(_input(name) * 0.5 + (0.1 if name == "power" else 0), requires_grad=True)
    y = e(x)
    (g,) = ember.autograd.grad(y.sum(), x)
    np.testing.assert_allclose(e.log_abs_det_jacobian(x, y).detach().numpy(),
                               np.log(np.abs(g.numpy())), rtol=1e-9, atol=1e-10)


def test_stick_breaking_log_abs_det_jacobian_is_the_jacobian_determinant():
    t = ET.StickBreakingTransform()
    x = X[0]
    J = np.zeros((4, 4))
    for i in range(4):  # the first 4 coordinates of y parameterize the 4-simplex
        xi = ember.tensor(x, requires_grad=True)
        (g,) = ember.autograd.grad(t(xi)[i], xi)
        J[i] = g.numpy()
    y = t(ember.tensor(x))
    np.testing.assert_allclose(float(t.log_abs_det_jacobian(ember.tensor(x), y)),
                               np.log(abs(np.linalg.det(J))), rtol=1e-10)


def test_inverse_caching_and_equality():
    e = ET.ExpTransform()
    assert e.inv.inv is e and isinstance(e.inv.inv, ET.ExpTransform)
    assert e == ET.ExpTransform() and e.inv == ET.ExpTransform().inv and e != e.inv
    assert ET.AffineTransform(1.0, 2.0) == ET.AffineTransform(1.0, 2.0)
    assert ET.AffineTransform(1.0, 2.0) != ET.AffineTransform(1.0, 3.0)
    c = ET.ComposeTransform([ET.ExpTransform(), ET.AffineTransform(1.0, 2.0)])
    assert c.inv.inv is c and c.inv.parts[0] == ET.AffineTransform(1.0, 2.0).inv
    x = ember.randn(3)
    cached = ET.SigmoidTransform(cache_size=1)
    y = cached(x)
    assert cached.inv(y) is x and cached(x) is y
    assert ET.SigmoidTransform()(x) is not ET.SigmoidTransform()(x)
    assert ET.SigmoidTransform().with_cache(1)._cache_size == 1
    assert ET.identity_transform(x) is x
    assert float(ET.identity_transform.log_abs_det_jacobian(x, x).abs().sum()) == 0
    assert ED.ExpTransform is ET.ExpTransform and ED.biject_to is ED.constraint_registry.biject_to


def test_transform_errors():
    with pytest.raises(ValueError, match="cache_size must be 0 or 1"):
        ET.ExpTransform(cache_size=2)
    with pytest.raises(ValueError, match="different numbers of elements"):
        ET.ReshapeTransform((4,), (3,))
    with pytest.raises(TypeError, match="list of Transforms"):
        ET.ComposeTransform([ET.ExpTransform(), "exp"])
    with pytest.raises(TypeError, match="loc must be a Tensor or a number"):
        ET.AffineTransform("0", 1.0)
    with pytest.raises(ValueError, match="too few dimensions"):
        ET.StickBreakingTransform().forward_shape(())
    with pytest.raises(ValueError, match="event dims differ"):
        ET.StickBreakingTransform().inv.event_dim + ET.ReshapeTransform((4,), (2, 2)).event_dim
    for bad in ("exp", [ET.ExpTransform(), 3]):
        with pytest.raises(ValueError, match="transforms must be a Transform"):
            ED.TransformedDistribution(ED.Normal(0.0, 1.0), bad)
    with pytest.raises(ValueError, match="needs to have shape with size at least 1"):
        ED.TransformedDistribution(ED.Normal(0.0, 1.0), ET.StickBreakingTransform())
    for lib in (ET, TT):
        with pytest.raises(ValueError):
            lib.ExpTransform(cache_size=2)


# ---- TransformedDistribution and the families built on it ----------------------------------

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


@pytest.mark.parametrize("case", DCASES)
def test_distribution_matches_torch(case):
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


@pytest.mark.parametrize("case", ["LogNormal", "Gumbel", "TanhNormal", "RelaxedBernoulli",
                                  "RelaxedOneHotCategorical", "Exponential", "Weibull",
                                  "Kumaraswamy"])
def test_rsample_gradient_matches_torch(case):
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


@pytest.mark.parametrize("case", ["LogNormal", "Gumbel", "HalfNormal", "Exponential",
                                  "Weibull", "Kumaraswamy"])
def test_sample_moments(case):
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


@pytest.mark.parametrize("ctor,kw", [
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
])
def test_invalid_parameters_raise_as_torch(ctor, kw):
    with pytest.raises(ValueError) as te:
        getattr(TD, ctor)(**{k: torch.tensor(v) for k, v in kw.items()})
    with pytest.raises(ValueError) as ee:
        getattr(ED, ctor)(**{k: ember.tensor(v) for k, v in kw.items()})
    assert isinstance(ee.value, ember.errors.EmberError)
    assert str(ee.value).split(" of distribution")[0] == str(te.value).split(" of distribution")[0]
    # validate_args=False skips the check (torch still checks the base distribution of the
    # relaxed families; ember passes validate_args down to it)
    getattr(ED, ctor)(**{k: ember.tensor(v) for k, v in kw.items()}, validate_args=False)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # atanh(3.5 / 2 ...) is NaN, as torch
@pytest.mark.parametrize("case,bad", [
    ("LogNormal", -np.ones(4)), ("HalfNormal", np.array([-1.0, 1.0, 1.0, 1.0])),
    ("LogisticNormal", np.full(5, 0.3)), ("TanhNormal", np.full(4, 3.5)),
    ("RelaxedBernoulli", np.full(4, 1.5)), ("Exponential", -np.ones(4)),
    ("Pareto", SCALE * 0.9), ("HalfCauchy", np.array([1.0, -1.0, 1.0, 1.0]))])
def test_log_prob_outside_support_raises_as_torch(case, bad):
    e, _ = _dist(case, "e")
    t, _ = _dist(case, "t")
    with pytest.raises(ValueError) as te:
        t.log_prob(torch.tensor(bad))
    with pytest.raises(ValueError) as ee:
        e.log_prob(ember.tensor(bad))
    assert str(ee.value).split(" (")[0] == str(te.value).split(" (")[0]
    assert "to be within the support" in str(ee.value)


# ---- biject_to / transform_to ---------------------------------------------------------------

def _constraints(C, mk):
    return [C.real, C.positive, C.nonnegative, C.greater_than(mk(1.5)), C.greater_than(-2.0),
            C.less_than(3.0), C.interval(-1.0, 2.0), C.unit_interval, C.half_open_interval(0, 4),
            C.simplex, C.independent(C.positive, 1), C.real_vector]


@pytest.mark.parametrize("which", ["biject_to", "transform_to"])
def test_biject_to_and_transform_to_match_torch(which):
    ec = _constraints(EC, ember.tensor)
    tc = _constraints(TC, torch.tensor)
    for c_e, c_t in zip(ec, tc):
        fe, ft = getattr(ED, which)(c_e), getattr(TD, which)(c_t)
        ye, yt = fe(ember.tensor(X)), ft(torch.tensor(X))
        np.testing.assert_allclose(ye.numpy(), yt.numpy(), rtol=1e-12, err_msg=repr(c_e))
        assert bool(c_e.check(ye).all()), c_e
        if fe.bijective:
            np.testing.assert_allclose(fe.inv(ye).numpy(), X, rtol=1e-9, atol=1e-9)
            np.testing.assert_allclose(fe.log_abs_det_jacobian(ember.tensor(X), ye).numpy(),
                                       ft.log_abs_det_jacobian(torch.tensor(X), yt).numpy(),
                                       rtol=1e-10, atol=1e-12)
        assert fe.bijective == ft.bijective
    m = R.standard_normal((2, 3, 3))
    for c_e, c_t in ((EC.lower_cholesky, TC.lower_cholesky),
                     (EC.positive_definite, TC.positive_definite)):
        fe, ft = ED.transform_to(c_e), TD.transform_to(c_t)
        ye, yt = fe(ember.tensor(m)), ft(torch.tensor(m))
        np.testing.assert_allclose(ye.numpy(), yt.numpy(), rtol=1e-12)
        assert bool(c_e.check(ye).all())
        np.testing.assert_allclose(fe.inv(ye).numpy(), ft.inv(yt).numpy(), rtol=1e-9,
                                   atol=1e-12)
    with pytest.raises(NotImplementedError, match="Cannot transform _LowerCholesky"):
        ED.biject_to(EC.lower_cholesky)
    with pytest.raises(TypeError, match="Constraint subclass or instance"):
        ED.biject_to.register(int, lambda c: None)


def test_biject_to_optimizes_a_constrained_parameter():
    """The usual pattern: an unconstrained leaf mapped onto the simplex by biject_to, fitted by
    maximum likelihood, lands on the empirical frequencies."""
    counts = ember.tensor([10.0, 30.0, 60.0])
    u = ember.zeros(2, requires_grad=True)
    opt = ember.optim.Adam([u], lr=0.1)
    f = ED.biject_to(EC.simplex)
    for _ in range(300):
        opt.zero_grad()
        loss = -(counts * f(u).log()).sum()
        loss.backward()
        opt.step()
    np.testing.assert_allclose(f(u).detach().numpy(), [0.1, 0.3, 0.6], atol=2e-3)
    assert math.isclose(float(f(u).sum()), 1.0, rel_tol=1e-6)


@pytest.mark.parametrize("case", ["LogNormal", "Gumbel", "TanhNormal", "Exponential"])
def test_kl_divergence_matches_torch(case):
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


def test_unary_kernels_give_inf_and_nan_silently():
    """log(0), sqrt(-1), exp(1000) are values, as in torch, not NumPy RuntimeWarnings (the
    word language model's causal mask is log(tril(ones)))."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mask = ember.log(ember.tril(ember.ones(3, 3)))
        assert float(mask[0, 1]) == -math.inf and float(mask[1, 0]) == 0
        assert math.isnan(float(ember.sqrt(ember.tensor(-1.0))))
        assert float(ember.exp(ember.tensor(1000.0))) == math.inf


def test_cumulative_distribution_transform_matches_torch():
    e = ET.CumulativeDistributionTransform(ED.Normal(ember.tensor(LOC), ember.tensor(SCALE)))
    t = TT.CumulativeDistributionTransform(TD.Normal(torch.tensor(LOC), torch.tensor(SCALE)))
    ye, yt = e(ember.tensor(X)), t(torch.tensor(X))
    np.testing.assert_allclose(ye.numpy(), yt.numpy(), rtol=1e-12)
    np.testing.assert_allclose(e.inv(ye).numpy(), X, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(e.log_abs_det_jacobian(ember.tensor(X), ye).numpy(),
                               t.log_abs_det_jacobian(torch.tensor(X), yt).numpy(), rtol=1e-12)
    assert e.bijective and e.sign == 1 and type(e.codomain) is type(EC.unit_interval)
    # a uniform pushed through the inverse CDF is the distribution itself
    d = ED.TransformedDistribution(ED.Uniform(ember.zeros(4), ember.ones(4)), e.inv)
    v = ember.tensor(X[:2])
    np.testing.assert_allclose(
        d.log_prob(v).numpy(),
        ED.Normal(ember.tensor(LOC), ember.tensor(SCALE)).log_prob(v).numpy(), rtol=1e-9)


def test_docs_example_runs():
    import os
    import re
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "docs", "distributions.md")) as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
    assert blocks
    for code in blocks:
        ns = {}
        exec(compile(code, "docs/distributions.md", "exec"), ns)
        assert ns["mu"].grad is not None and float(ns["a"].abs().max()) < 2
