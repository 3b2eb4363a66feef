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


def test_a_leaf_gets_a_gradient_of_its_own_dtype_as_torch():
    """A float32 parameter times a float64 tensor, a bfloat16 leaf times a float32 weight: the
    gradient is cast to the leaf's dtype (for .backward(), autograd.grad and the leaf's hooks),
    as torch's engine casts to the input's dtype."""
    torch = pytest.importorskip("torch")
    for m in (ember, torch):
        for leaf_dt, other_dt in ((m.float32, m.float64), (m.bfloat16, m.float32),
                                  (m.float16, m.float32)):
            x = m.ones(3, dtype=leaf_dt, requires_grad=True)
            w = m.full((3,), 2.0, dtype=other_dt, requires_grad=True)
            seen = []
            x.register_hook(lambda g: seen.append(g.dtype))
            (x * w).sum().backward()
            assert x.grad.dtype == leaf_dt and w.grad.dtype == other_dt and seen == [leaf_dt]
            assert x.grad.tolist() == [2.0, 2.0, 2.0]
            (gx,) = m.autograd.grad((x * w).sum(), x)
            assert gx.dtype == leaf_dt
    p = ember.ones(2, requires_grad=True)
    (gp,) = ember.autograd.grad((p * ember.ones(2, dtype=ember.float64)).sum(), p,
                                create_graph=True)
    assert gp.dtype == ember.float32
