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
