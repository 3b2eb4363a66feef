"""The Distribution base class (ember/distributions/distribution.py) and the package: seeded
sampling, argument and sample-shape validation, icdf, enumerate_support, mode and perplexity
against torch, the default validate_args switch, and that ``import ember`` loads the package
lazily."""
import subprocess
import sys

import numpy as np
import pytest

import ember
import ember.distributions as ED
from tests.distributions.torch_cases import TD, torch


def test_sampling_is_seeded():
    d = ED.Normal(ember.zeros(3), ember.ones(3))
    ember.manual_seed(7)
    a = d.sample((4,)).numpy()
    ember.manual_seed(7)
    assert np.array_equal(a, d.sample((4,)).numpy())


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

