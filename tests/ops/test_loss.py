"""Loss functions (ember/ops/loss.py) against torch."""
import numpy as np
import pytest

import ember


def test_gaussian_nll_loss_var_shapes_and_clamp_gradient_as_torch():
    torch = pytest.importorskip("torch")
    import ember.nn.functional as F
    rng = np.random.default_rng(5)
    x, t = rng.standard_normal((5, 4)), rng.standard_normal((5, 4))
    for var in (np.abs(rng.standard_normal(5)), np.abs(rng.standard_normal((5, 1))),
                np.full((5, 4), 1e-9)):
        tv = torch.tensor(var, requires_grad=True)
        ref = torch.nn.functional.gaussian_nll_loss(torch.tensor(x), torch.tensor(t), tv,
                                                    full=True, reduction="sum")
        (tg,) = torch.autograd.grad(ref, [tv])
        ev = ember.tensor(var, requires_grad=True)
        got = F.gaussian_nll_loss(ember.tensor(x), ember.tensor(t), ev, full=True,
                                  reduction="sum")
        (eg,) = ember.autograd.grad(got, [ev])
        assert float(got) == pytest.approx(float(ref), rel=1e-12)
        np.testing.assert_allclose(eg.numpy(), tg.numpy(), rtol=1e-9)
    with pytest.raises(ValueError, match="var"):
        F.gaussian_nll_loss(ember.tensor(x), ember.tensor(t), ember.ones(3))


@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div_at_zero_and_negative_targets_as_torch(log_target):
    """kl_div is xlogy(t, t) - t * x: NaN where a probability target is negative (0 was returned),
    0 where it is 0, and the input's gradient -t everywhere, as torch's."""
    import torch
    x = [[-1.0, -2.0, -0.5, -0.1]]
    t = [[-0.5, 0.0, 0.3, 1.2]]
    outs = []
    for lib in (torch, ember):
        a = lib.tensor(x, dtype=lib.float64, requires_grad=True)
        b = lib.tensor(t, dtype=lib.float64, requires_grad=True)
        y = lib.nn.functional.kl_div(a, b, reduction="none", log_target=log_target)
        y.sum().backward()
        outs.append([np.asarray(v.detach().numpy()) for v in (y, a.grad, b.grad)])
    for got, want in zip(outs[1], outs[0]):
        np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True)
