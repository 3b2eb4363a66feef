"""ember.distributions.transforms (ember/distributions/transforms.py) against
torch.distributions.transforms on the same inputs: values, inverses, log |det J|, caching,
equality and errors; the cumulative-distribution transform; the docs example."""
import math

import numpy as np
import pytest

import ember
import ember.distributions as ED
from ember.distributions import constraints as EC
from ember.distributions import transforms as ET
from tests.distributions.transformed_cases import LOC, SCALE, TD, TT, X, torch


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
