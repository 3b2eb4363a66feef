"""AdaptiveLogSoftmaxWithLoss (ember/nn/modules/adaptive.py) against torch with identical
weights: output and loss, their gradients, log_prob and predict (float64), and the errors."""
import numpy as np
import pytest

import ember
import ember.nn as nn

torch = pytest.importorskip("torch")


def _pair(**kw):
    torch.manual_seed(0)
    t = torch.nn.AdaptiveLogSoftmaxWithLoss(16, 10, cutoffs=[3, 6], **kw).double()
    e = nn.AdaptiveLogSoftmaxWithLoss(16, 10, cutoffs=[3, 6], **kw).double()
    assert list(e.state_dict()) == list(t.state_dict())
    e.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})
    return e, t


@pytest.mark.parametrize("kw", [{}, {"div_value": 2.0, "head_bias": True}])
def test_output_loss_and_gradients_match_torch(kw):
    e, t = _pair(**kw)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((7, 16))
    y = np.array([0, 2, 3, 5, 6, 9, 1])
    xe, xt = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    oe, ot = e(xe, ember.tensor(y)), t(xt, torch.tensor(y))
    np.testing.assert_allclose(oe.output.detach().numpy(), ot.output.detach().numpy(),
                               rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(float(oe.loss), float(ot.loss.detach()), rtol=1e-10)
    oe.loss.backward()
    ot.loss.backward()
    np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=1e-9, atol=1e-12)
    pt = dict(t.named_parameters())
    for k, p in e.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), pt[k].grad.numpy(), rtol=1e-9, atol=1e-12,
                                   err_msg=k)


def test_log_prob_and_predict_match_torch():
    e, t = _pair()
    x = np.random.default_rng(1).standard_normal((5, 16))
    lp = e.log_prob(ember.tensor(x)).detach().numpy()
    np.testing.assert_allclose(lp, t.log_prob(torch.tensor(x)).detach().numpy(), rtol=1e-10,
                               atol=1e-12)
    np.testing.assert_allclose(np.exp(lp).sum(1), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(e.predict(ember.tensor(x)).numpy(),
                                  t.predict(torch.tensor(x)).numpy())


def test_bad_cutoffs_and_targets_are_refused():
    with pytest.raises(ValueError):
        nn.AdaptiveLogSoftmaxWithLoss(16, 10, cutoffs=[6, 3])
    e, _ = _pair()
    with pytest.raises((ValueError, RuntimeError, IndexError)):
        e(ember.zeros(2, 16, dtype=ember.float64), ember.tensor([0, 10]))
