"""Parameter, Buffer and the uninitialized placeholders (ember/nn/parameter.py) as torch's: a
Parameter is a grad-requiring leaf sharing its source's memory, assigning one or a Buffer to a
Module registers it (a non-persistent buffer stays out of the state_dict), and a placeholder
materializes in place."""
import numpy as np
import pytest

import ember
import ember.nn as nn

torch = pytest.importorskip("torch")


def test_parameter_is_a_leaf_that_requires_grad_and_shares_memory():
    t = ember.zeros(3)
    p = nn.Parameter(t)
    assert isinstance(p, ember.Tensor) and p.requires_grad and p.is_leaf and p.grad_fn is None
    t.add_(1.0)
    np.testing.assert_array_equal(p.detach().numpy(), [1.0, 1.0, 1.0])
    assert not nn.Parameter(ember.zeros(2), requires_grad=False).requires_grad
    assert tuple(nn.Parameter().shape) == tuple(torch.nn.Parameter().shape) == (0,)
    assert repr(p).startswith("Parameter containing:\n") and \
        repr(torch.nn.Parameter(torch.zeros(3))).startswith("Parameter containing:\n")


def test_assignment_registers_parameters_and_buffers_as_torch():
    for lib, mk in ((nn, ember.zeros), (torch.nn, torch.zeros)):
        m = lib.Module()
        m.w = lib.Parameter(mk(2))
        m.stat = lib.Buffer(mk(3))
        m.scratch = lib.Buffer(mk(1), persistent=False)
        assert [k for k, _ in m.named_parameters()] == ["w"]
        assert [k for k, _ in m.named_buffers()] == ["stat", "scratch"]
        assert list(m.state_dict()) == ["w", "stat"]
        assert not m.stat.requires_grad


def test_a_parameter_gets_its_gradient():
    p = nn.Parameter(ember.tensor([1.0, -2.0, 3.0]))
    (p * p).sum().backward()
    np.testing.assert_array_equal(p.grad.numpy(), [2.0, -4.0, 6.0])


def test_uninitialized_parameter_materializes_in_place():
    lin = nn.LazyLinear(4)
    w = lin.weight
    assert isinstance(w, nn.parameter.UninitializedParameter)
    lin(ember.zeros(2, 3))
    assert lin.weight is w and type(w) is nn.Parameter and tuple(w.shape) == (4, 3)
    assert w.requires_grad
