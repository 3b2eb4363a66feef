"""The helpers shared by the distributions (ember/distributions/utils.py), against
torch.distributions.utils: broadcasting parameters, probs and logits both ways, clamping,
summing the rightmost dimensions, and lazy properties."""
import numpy as np
import pytest

import ember
from ember.distributions import utils as EU

torch = pytest.importorskip("torch")
TU = torch.distributions.utils


def test_broadcast_all_matches_torch():
    e = EU.broadcast_all(ember.zeros(2, 1, dtype=ember.float64), 3,
                         ember.ones(3, dtype=ember.float64))
    t = TU.broadcast_all(torch.zeros(2, 1, dtype=torch.float64), 3,
                         torch.ones(3, dtype=torch.float64))
    for a, b in zip(e, t):
        assert tuple(a.shape) == tuple(b.shape) and a.dtype == ember.float64
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    a, b = EU.broadcast_all(1, 2.5)
    assert a.dtype == ember.get_default_dtype() and float(b) == 2.5
    with pytest.raises(ValueError, match="numbers.Number or ember.Tensor"):
        EU.broadcast_all(ember.zeros(1), [1.0])


def test_broadcast_params_batch_shape():
    assert EU.broadcast_params(0.0, 1.0)[1] == ()
    assert tuple(EU.broadcast_params(ember.zeros(3), 1.0)[1]) == (3,)


@pytest.mark.parametrize("is_binary", [False, True])
def test_probs_and_logits_match_torch(is_binary):
    p = np.array([[0.0, 0.25, 0.75], [1.0, 0.5, 1e-20]])
    got = EU.probs_to_logits(ember.tensor(p), is_binary).numpy()
    want = TU.probs_to_logits(torch.tensor(p), is_binary).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert np.all(np.isfinite(got))   # clamped away from 0 and 1
    lg = np.array([[-3.0, 0.0, 2.0], [5.0, -1.0, 0.5]])
    np.testing.assert_allclose(EU.logits_to_probs(ember.tensor(lg), is_binary).numpy(),
                               TU.logits_to_probs(torch.tensor(lg), is_binary).numpy(),
                               rtol=1e-12)


def test_clamp_probs_uses_the_dtypes_eps():
    for dt, ndt in ((ember.float32, np.float32), (ember.float64, np.float64)):
        c = EU.clamp_probs(ember.tensor([0.0, 0.5, 1.0], dtype=dt)).numpy()
        eps = np.finfo(ndt).eps
        np.testing.assert_array_equal(c, np.array([eps, 0.5, 1 - eps], ndt))


def test_sum_rightmost():
    x = np.arange(24.0).reshape(2, 3, 4)
    assert EU.sum_rightmost(ember.tensor(x), 0).numpy().shape == (2, 3, 4)
    np.testing.assert_array_equal(EU.sum_rightmost(ember.tensor(x), 2).numpy(), x.sum((1, 2)))
    np.testing.assert_array_equal(EU.sum_rightmost(ember.tensor(x), 1).numpy(), x.sum(2))


def test_lazy_property_is_computed_once_with_grad_enabled():
    calls = []

    class D:
        @EU.lazy_property
        def value(self):
            """the doc"""
            calls.append(ember.is_grad_enabled())
            return 3

    d = D()
    with ember.no_grad():
        assert d.value == 3 and d.value == 3
    assert calls == [True] and D.value.__doc__ == "the doc"
