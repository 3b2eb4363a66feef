"""ember/autograd/dispatch.py: what dispatch checks before autograd records an op."""
import numpy as np
import pytest
import torch

import ember
import ember.nn.functional as EF
from ember.errors import EmberRuntimeError


def _loss_calls(lib, F):
    x = lib.tensor(np.random.default_rng(0).random((3, 4)), dtype=lib.float32, requires_grad=True)
    t = lib.tensor([0, 1, 2])
    w = lib.tensor([0.5, 1.0, 2.0, 1.5], requires_grad=True)
    p = lib.tensor(np.random.default_rng(1).random((3, 4)), dtype=lib.float32)
    return {
        "nll_loss": lambda: F.nll_loss(x.log_softmax(1), t, weight=w),
        "cross_entropy": lambda: F.cross_entropy(x, t, weight=w),
        "binary_cross_entropy": lambda: F.binary_cross_entropy(
            x.sigmoid(), p, weight=w.expand(3, 4)),
        "fractional_max_pool2d": lambda: F.fractional_max_pool2d(
            x.reshape(1, 1, 3, 4), 2, output_size=(2, 2),
            _random_samples=lib.rand(1, 1, 2, requires_grad=True)),
    }


@pytest.mark.parametrize("name", ["nll_loss", "cross_entropy", "binary_cross_entropy",
                                  "fractional_max_pool2d"])
def test_an_input_torch_refuses_to_differentiate_is_refused_when_it_requires_grad(name):
    """torch's check_no_requires_grad (spec 'refuses_grad'): a loss weight or pooling samples
    that require grad raise while autograd records (ember used to drop their gradient
    silently); under no_grad, or when they do not require grad, the call runs."""
    with pytest.raises(RuntimeError, match="is not differentiable with respect to argument"):
        _loss_calls(torch, torch.nn.functional)[name]()
    with pytest.raises(EmberRuntimeError, match="is not differentiable with respect to "
                                                "argument '(weight|random_samples)'"):
        _loss_calls(ember, EF)[name]()
    with ember.no_grad():
        _loss_calls(ember, EF)[name]()
