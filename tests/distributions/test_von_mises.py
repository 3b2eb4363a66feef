"""VonMises (ember/distributions/von_mises.py) against torch.distributions.VonMises: log_prob,
its gradients (and gradcheck), circular mean, mode and variance, broadcasting and expand,
float32, sampling (support, moments, no rsample) and validate_args."""
import math

import numpy as np
import pytest

import ember
import ember.distributions as ED

torch = pytest.importorskip("torch")

R = np.random.default_rng(3)
LOC = R.uniform(-4, 4, (2, 1))
KAPPA = np.array([0.05, 0.8, 3.7, 3.8, 25.0])   # both sides of the I0 approximation's 3.75
VALUE = R.uniform(-7, 7, (3, 2, 5))


def _pair(lib, dtype="float64"):
    loc = lib.tensor(LOC.astype(dtype), requires_grad=True)
    kappa = lib.tensor(KAPPA.astype(dtype), requires_grad=True)
    return lib.distributions.VonMises(loc, kappa), loc, kappa


@pytest.mark.parametrize("dtype,rtol", [("float64", 1e-12), ("float32", 1e-5)])
def test_log_prob_moments_and_gradients_match_torch(dtype, rtol):
    out = {}
    for name, lib in (("e", ember), ("t", torch)):
        d, loc, kappa = _pair(lib, dtype)
        lp = d.log_prob(lib.tensor(VALUE.astype(dtype)))
        (lp.sum() + d.variance.sum()).backward()
        out[name] = [lp, d.mean, d.mode, d.variance, loc.grad, kappa.grad,
                     tuple(d.batch_shape), tuple(d.event_shape)]
    for a, b in zip(out["e"], out["t"]):
        if isinstance(a, tuple):
            assert a == b
            continue
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=rtol, atol=1e-6
                                   if dtype == "float32" else 1e-13)


def test_log_prob_passes_gradcheck():
    value = ember.tensor(VALUE[0, 0])
    assert ember.autograd.gradcheck(
        lambda loc, k: ED.VonMises(loc, k).log_prob(value),
        (ember.tensor(LOC[:, 0].repeat(3)[:5], requires_grad=True),
         ember.tensor(KAPPA, requires_grad=True)))


def test_sample_support_moments_and_expand():
    ember.manual_seed(0)
    d = ED.VonMises(ember.tensor([0.5, -2.5, 3.0], dtype=ember.float64),
                    ember.tensor([2.0, 10.0, 0.3], dtype=ember.float64))
    s = d.sample((20000,))
    assert tuple(s.shape) == (20000, 3) and s.dtype == ember.float64 and not s.requires_grad
    assert bool(((s >= -math.pi) & (s < math.pi)).all())
    mean_angle = ember.atan2(s.sin().mean(0), s.cos().mean(0))
    resultant = ember.sqrt(s.sin().mean(0) ** 2 + s.cos().mean(0) ** 2)
    np.testing.assert_allclose(mean_angle.numpy()[:2], [0.5, -2.5], atol=0.03)
    np.testing.assert_allclose(1 - resultant.numpy(), d.variance.numpy(), atol=0.02)
    f32 = ED.VonMises(ember.tensor([0.0], dtype=ember.float32), ember.tensor([1e-4],
                                                                            dtype=ember.float32))
    assert f32.sample((4,)).dtype == ember.float32
    x = d.expand((2, 3))
    assert tuple(x.batch_shape) == (2, 3) and tuple(x.sample().shape) == (2, 3)
    assert not d.has_rsample
    with pytest.raises(NotImplementedError):
        d.rsample()


def test_invalid_concentration_raises_as_torch():
    for lib in (ember, torch):
        with pytest.raises(ValueError, match="concentration"):
            lib.distributions.VonMises(lib.tensor([0.0]), lib.tensor([-1.0]), validate_args=True)
