"""nn.utils.stateless.functional_call: torch 1.x's name of torch.func.functional_call, with its
deprecation warning; the same results as torch's."""
import numpy as np
import pytest
import torch

import ember


def _linear(m, rng):
    lin = m.nn.Linear(3, 2).double()
    with m.no_grad():
        lin.weight.copy_(m.from_numpy(rng.standard_normal((2, 3))))
        lin.bias.copy_(m.from_numpy(rng.standard_normal(2)))
    return lin


def test_functional_call_swaps_parameters_for_one_call_and_warns_as_torch():
    outs = []
    for m in (torch, ember):
        rng = np.random.default_rng(0)
        lin = _linear(m, rng)
        w = m.from_numpy(rng.standard_normal((2, 3))).requires_grad_()
        x = m.from_numpy(rng.standard_normal((4, 3)))
        with pytest.warns(FutureWarning, match="torch.func.functional_call"):
            y = m.nn.utils.stateless.functional_call(lin, {"weight": w}, (x,))
        y.sum().backward()
        assert lin.weight.grad is None                    # the module's own weight untouched
        outs.append((y.detach().numpy(), w.grad.numpy(), lin(x).detach().numpy()))
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_functional_call_strict_names_the_missing_key():
    lin = ember.nn.Linear(3, 2)
    with pytest.warns(FutureWarning), pytest.raises(ember.errors.EmberError, match="bias"):
        ember.nn.utils.stateless.functional_call(lin, {"weight": ember.ones(2, 3)},
                                                 (ember.ones(1, 3),), strict=True)
