"""Reverse-mode differentiation of pointwise expressions (``derive``) with ember's spec rules:
the derived backward kernel against torch autograd in float64 (several outputs, broadcasting
left to the caller), only the needed inputs, zero-gradient ops, integer inputs, unused steps
dropped, and a missing rule named."""
import numpy as np
import pytest

from ember.jit import fused
from ember.kernels.pointwise import Expr, compile_pointwise
from ember.kernels.pointwise.autodiff import derive

torch = pytest.importorskip("torch")
rng = np.random.default_rng(61)


def _backward(expr, arrays, grads, needs, gs):
    k = compile_pointwise(expr, arrays)
    bwd = derive(expr, k.typing, grads, needs, fused.RULES)
    if bwd.expr is None:
        return bwd, []
    operands = list(arrays) + list(gs)
    return bwd, compile_pointwise(bwd.expr, operands)(*operands, backend="numpy")


def test_two_outputs_two_inputs_match_torch():
    x, y = rng.standard_normal(7), rng.standard_normal(7)
    expr = Expr(("x", "y"), [("t", "mul", ("x", "y")), ("u", "tanh", ("t",)),
                             ("r", "add", ("u", 1.0)), ("s", "exp", ("x",)),
                             ("q", "mul", ("s", "u"))], ("r", "q"))
    g0, g1 = rng.standard_normal(7), rng.standard_normal(7)
    bwd, (gx, gy) = _backward(expr, [x, y], (True, True), (True, True), [g0, g1])
    assert bwd.kinds == ("grad", "grad")
    tx, ty = torch.tensor(x, requires_grad=True), torch.tensor(y, requires_grad=True)
    u = torch.tanh(tx * ty)
    torch.autograd.backward([u + 1.0, torch.exp(tx) * u], [torch.tensor(g0), torch.tensor(g1)])
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gy, ty.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_only_needed_inputs_and_outputs_with_a_gradient():
    x, y = rng.standard_normal(5), rng.standard_normal(5)
    expr = Expr(("x", "y"), [("a", "sin", ("x",)), ("b", "mul", ("a", "y")),
                             ("c", "exp", ("y",))], ("b", "c"))
    g = rng.standard_normal(5)
    bwd, outs = _backward(expr, [x, y], (True, False), (False, True), [g])
    assert bwd.kinds == (None, "grad") and len(outs) == 1
    np.testing.assert_allclose(outs[0], g * np.sin(x), rtol=1e-14)    # d(sin(x) y)/dy
    assert "exp" not in {s[1] for s in bwd.expr.steps}                 # c gets no gradient


def test_zero_gradient_ops_and_integer_inputs():
    x = rng.standard_normal(4) * 3
    n = np.arange(4)
    expr = Expr(("x", "n"), [("f", "floor", ("x",)), ("r", "add", ("f", "n"))], ("r",))
    bwd, outs = _backward(expr, [x, n], (True,), (True, True), [np.ones(4)])
    assert bwd.kinds == ("zero", None) and bwd.expr is None and outs == []


def test_a_floating_op_without_a_rule_is_named():
    x = rng.standard_normal(3)
    expr = Expr(("x",), [("r", "sin", ("x",))], ("r",))
    k = compile_pointwise(expr, [x])
    with pytest.raises(KeyError, match="sin"):
        derive(expr, k.typing, (True,), (True,), {})
