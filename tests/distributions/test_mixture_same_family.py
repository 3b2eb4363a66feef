"""MixtureSameFamily (ember/distributions/mixture_same_family.py) against torch.distributions:
log_prob, cdf, mean and variance values and gradients for scalar and vector components,
sample shapes and moments, expand, support and the constructor errors."""
import numpy as np
import pytest

import ember
import ember.distributions as ED

torch = pytest.importorskip("torch")
TD = torch.distributions
R = np.random.default_rng(3)
PARAMS = {  # case -> mixture logits, component loc, component scale
    "scalar": (R.standard_normal(4), R.standard_normal((3, 4)), R.uniform(0.5, 2, (3, 4))),
    "batched-mixture": (R.standard_normal((3, 4)), R.standard_normal((3, 4)),
                        R.uniform(0.5, 2, (3, 4))),
    "vector": (R.standard_normal(5), R.standard_normal((2, 5, 3)),
               R.uniform(0.5, 2, (2, 5, 3))),
}
VALUES = {"scalar": R.standard_normal((6, 3)), "batched-mixture": R.standard_normal(3),
          "vector": R.standard_normal((4, 2, 3))}


def _build(lib, case, grad=False):
    D = ED if lib == "e" else TD
    mk = ember.tensor if lib == "e" else torch.tensor
    logits, loc, scale = (mk(v, requires_grad=grad) for v in PARAMS[case])
    comp = D.Normal(loc, scale)
    if case == "vector":
        comp = D.Independent(comp, 1)
    return D.MixtureSameFamily(D.Categorical(logits=logits), comp), [logits, loc, scale]


@pytest.mark.parametrize("case", list(PARAMS))
def test_matches_torch(case):
    e, pe = _build("e", case, True)
    t, pt = _build("t", case, True)
    assert tuple(e.batch_shape) == tuple(t.batch_shape)
    assert tuple(e.event_shape) == tuple(t.event_shape)
    assert e.has_rsample is t.has_rsample is False
    v = VALUES[case]
    outs = [(e.log_prob(ember.tensor(v)), t.log_prob(torch.tensor(v))),
            (e.mean, t.mean), (e.variance, t.variance), (e.stddev, t.stddev)]
    if case != "vector":
        outs.append((e.cdf(ember.tensor(v)), t.cdf(torch.tensor(v))))
    for a, b in outs:
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10)
    sum(a.sum() for a, _ in outs).backward()
    sum(b.sum() for _, b in outs).backward()
    for a, b in zip(pe, pt):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-8, atol=1e-12)
    assert repr(e).replace("ember.Size", "torch.Size") == repr(t)


@pytest.mark.parametrize("case", list(PARAMS))
def test_sample_shapes_support_and_expand(case):
    ember.manual_seed(0)
    e, _ = _build("e", case)
    t, _ = _build("t", case)
    s = e.sample((7,))
    assert tuple(s.shape) == (7,) + tuple(t.batch_shape + t.event_shape)
    assert s.dtype == ember.float64
    assert bool(e.support.check(s).all())
    assert e.support.event_dim == t.support.event_dim
    x, y = e.expand((2,) + tuple(e.batch_shape)), t.expand((2,) + tuple(t.batch_shape))
    assert tuple(x.batch_shape) == tuple(y.batch_shape)
    assert tuple(x.sample((3,)).shape) == (3,) + tuple(y.batch_shape + y.event_shape)
    drawn = torch.tensor(x.sample((2,)).numpy())
    np.testing.assert_allclose(x.log_prob(ember.tensor(drawn.numpy())).numpy(),
                               y.log_prob(drawn).numpy(), rtol=1e-10)


def test_sample_broadcasts_a_mixture_with_fewer_batch_dimensions():
    """torch's sample raises there (gather with fewer index dimensions); ember broadcasts."""
    ember.manual_seed(1)
    d = ED.MixtureSameFamily(ED.Categorical(logits=ember.tensor([0.0, -50.0])),
                             ED.Normal(ember.tensor([[0.0, 9.0], [100.0, 9.0], [-5.0, 9.0]]),
                                       ember.tensor(1e-6)))
    s = d.sample((4,))
    assert tuple(s.shape) == (4, 3)
    np.testing.assert_allclose(s.numpy(), np.broadcast_to([0.0, 100.0, -5.0], (4, 3)),
                               atol=1e-4)


def test_sample_moments():
    """Mean and variance of 100k draws within 5 standard errors."""
    ember.manual_seed(5)
    e, _ = _build("e", "scalar")
    n = 100000
    x = e.sample((n,)).numpy()
    mean, var = e.mean.numpy(), e.variance.numpy()
    assert np.all(np.abs(x.mean(0) - mean) < 5 * np.sqrt(var / n))
    m4 = ((x - mean) ** 4).mean(0)
    assert np.all(np.abs(x.var(0) - var) < 5 * np.sqrt((m4 - var ** 2) / n))


def test_log_prob_outside_the_support_raises_as_torch():
    def make(D, mk):
        return D.MixtureSameFamily(D.Categorical(probs=mk([0.5, 0.5])),
                                   D.Exponential(mk([1.0, 2.0])))
    e, t = make(ED, lambda v: ember.tensor(v)), make(TD, lambda v: torch.tensor(v))
    with pytest.raises(ValueError) as te:
        t.log_prob(torch.tensor([-1.0]))
    with pytest.raises(ValueError) as ee:
        e.log_prob(ember.tensor([-1.0]))
    assert isinstance(ee.value, ember.errors.EmberError)
    assert str(ee.value).split(" (")[0] == str(te.value).split(" (")[0]


@pytest.mark.parametrize("mix,comp,match", [
    (lambda D, mk: D.Normal(mk(0.0), mk(1.0)), lambda D, mk: D.Normal(mk([0.0]), mk([1.0])),
     "Mixture distribution needs to be an"),
    (lambda D, mk: D.Categorical(logits=mk([0.0, 1.0])), lambda D, mk: mk([1.0]),
     "Component distribution needs to be an"),
    (lambda D, mk: D.Categorical(logits=mk([0.0, 1.0])),
     lambda D, mk: D.Normal(mk([0.0, 1.0, 2.0]), mk([1.0, 1.0, 1.0])),
     r"`mixture_distribution component` \(2\) does not"),
    (lambda D, mk: D.Categorical(logits=mk(np.zeros((3, 2)))),
     lambda D, mk: D.Normal(mk(np.zeros((4, 2))), mk(np.ones((4, 2)))),
     "is not compatible with"),
])
def test_constructor_errors_match_torch(mix, comp, match):
    with pytest.raises(ValueError, match=match):
        TD.MixtureSameFamily(mix(TD, torch.tensor), comp(TD, torch.tensor))
    with pytest.raises(ValueError, match=match) as ee:
        ED.MixtureSameFamily(mix(ED, ember.tensor), comp(ED, ember.tensor))
    assert isinstance(ee.value, ember.errors.EmberError)
