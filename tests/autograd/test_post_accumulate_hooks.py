"""Tensor.register_post_accumulate_grad_hook and engine.queue_callback (used by DDP)."""
import numpy as np
import pytest

import ember
from ember.autograd.engine import queue_callback


def test_post_accumulate_hook_sees_the_accumulated_grad():
    w = ember.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    h = w.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.tolist()))
    (w * 3).sum().backward()
    (w * 2).sum().backward()
    assert seen == [[3.0, 3.0], [5.0, 5.0]]
    h.remove()
    (w * 2).sum().backward()
    assert len(seen) == 2


def test_post_accumulate_hook_only_on_leaves():
    w = ember.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        (w * 2).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(RuntimeError, match="leaf"):
        ember.tensor([1.0]).register_post_accumulate_grad_hook(lambda t: None)


def test_queue_callback_runs_once_after_backward():
    a = ember.tensor([1.0, 2.0], requires_grad=True)
    b = ember.tensor([3.0], requires_grad=True)
    order = []

    def hook(t):
        order.append(("hook", t.shape[0]))
        if len(order) == 1:
            queue_callback(lambda: order.append(("done", a.grad is not None and
                                                 b.grad is not None)))
    a.register_post_accumulate_grad_hook(hook)
    b.register_post_accumulate_grad_hook(hook)
    ((a * 2).sum() + (b * a[0]).sum()).backward()
    assert order[-1] == ("done", True) and len(order) == 3
    np.testing.assert_allclose(a.grad.numpy(), [5.0, 2.0])
    with pytest.raises(RuntimeError, match="during a backward"):
        queue_callback(lambda: None)
