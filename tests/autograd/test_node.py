"""Graph nodes (ember/autograd/node.py): gradient accumulation into leaves without aliasing,
saved tensors released after backward and checked against in-place changes (naming the op),
and next_functions down to the leaves' AccumulateGrad."""
import numpy as np
import pytest

import ember


def test_shared_gradient_arrays_are_not_aliased():
    a = ember.ones(3, requires_grad=True)
    b = ember.ones(3, requires_grad=True)
    (a + b).sum().backward()
    a.grad.mul_(10)
    assert b.grad.tolist() == [1.0, 1.0, 1.0]


def test_second_backward_through_freed_graph_is_an_error():
    x = ember.tensor([1.0], requires_grad=True)
    y = (x.exp() * 2).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()
    z = (x.exp() * 2).sum()
    z.backward(retain_graph=True)
    z.backward()
    assert x.grad.item() == pytest.approx(2 * 2 * np.e + 2 * np.e)


def test_grad_fn_next_functions():
    a = ember.ones(2, requires_grad=True)
    b = ember.ones(2, requires_grad=True)
    c = a * b + a
    assert c.grad_fn.name() == "AddBackward0"
    mul_fn = c.grad_fn.next_functions[0][0]
    assert mul_fn.name() == "MulBackward0"
    assert mul_fn.next_functions[0][0].variable is a


def test_inplace_on_saved_tensor_is_detected_with_op_name():
    x = ember.ones(3, requires_grad=True)
    y = x * 1
    w = y * y            # mul saves y
    y.add_(1)
    with pytest.raises(RuntimeError, match="MulBackward0.*'mul'.*version"):
        w.sum().backward()
    z2 = x.exp()
    z2.mul_(2)           # modifies exp's saved output
    with pytest.raises(RuntimeError, match="ExpBackward0"):
        z2.sum().backward()
