"""ember.autograd.Variable against torch.autograd.Variable (the legacy constructor)."""
import numpy as np
import pytest
import torch

import ember
from ember.autograd import Variable


def test_variable_shares_data_sets_requires_grad_and_backpropagates_like_torch():
    data = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
    t_src, e_src = torch.tensor(data), ember.tensor(data)
    t_var = torch.autograd.Variable(t_src, requires_grad=True)
    e_var = Variable(e_src, requires_grad=True)
    assert e_var.requires_grad == t_var.requires_grad is True
    assert e_src.requires_grad == t_src.requires_grad is False
    assert (e_var is e_src) == (t_var is t_src) is False
    (t_var * t_var).mean().backward()
    (e_var * e_var).mean().backward()
    np.testing.assert_allclose(e_var.grad.numpy(), t_var.grad.numpy())
    with torch.no_grad():
        t_src[0, 0] = 9.0             # the Variable aliases its data's storage
    e_src[0, 0] = 9.0
    assert e_var.detach()[0, 0].item() == t_var.detach()[0, 0].item() == 9.0


def test_variable_detaches_from_the_graph_of_its_data():
    t_leaf = torch.ones(3, requires_grad=True)
    e_leaf = ember.ones(3, requires_grad=True)
    t_var, e_var = torch.autograd.Variable(t_leaf * 2), Variable(e_leaf * 2)
    assert e_var.requires_grad == t_var.requires_grad is False
    assert (e_var.grad_fn is None) == (t_var.grad_fn is None) is True
    np.testing.assert_array_equal(e_var.numpy(), t_var.numpy())


def test_isinstance_variable_holds_for_every_tensor():
    assert isinstance(torch.zeros(2), torch.autograd.Variable)
    assert isinstance(ember.zeros(2), Variable)
    assert isinstance(ember.zeros(2, dtype=ember.int64), Variable)
    assert not isinstance(np.zeros(2), Variable)
    assert not isinstance(np.zeros(2), torch.autograd.Variable)


def test_variable_without_data_is_empty_float():
    t_var, e_var = torch.autograd.Variable(), Variable()
    assert tuple(e_var.shape) == tuple(t_var.shape) == (0,)
    assert str(e_var.dtype).split(".")[-1] == str(t_var.dtype).split(".")[-1] == "float32"


def test_variable_rejects_non_tensor_data_and_volatile_with_requires_grad():
    with pytest.raises(TypeError, match="Variable data has to be a tensor"):
        torch.autograd.Variable([1.0, 2.0])
    with pytest.raises(TypeError, match="Variable data has to be a tensor, but got list"):
        Variable([1.0, 2.0])
    with pytest.warns(UserWarning, match="volatile"):
        e_var = Variable(ember.ones(2), volatile=True)
    assert e_var.requires_grad is False
    with pytest.raises(ValueError, match="volatile and require_grad"):
        with pytest.warns(UserWarning):
            Variable(ember.ones(2), requires_grad=True, volatile=True)
