"""Custom autograd Functions (ember/autograd/function.py): forward/backward with saved tensors
and non-tensor arguments, the node's name, needs_input_grad, gradcheck and gradgradcheck."""
import ember
from ember.autograd import Function, gradcheck, gradgradcheck


class Cube(Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.save_for_backward(x)
        ctx.k = k
        return x ** 3 * k

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x ** 2 * ctx.k, None


def test_custom_function():
    x = ember.tensor([1.0, 2.0], requires_grad=True, dtype=ember.float64)
    y = Cube.apply(x, 2.0)
    assert y.grad_fn.name() == "CubeBackward"
    y.sum().backward()
    assert x.grad.tolist() == [6.0, 24.0]
    assert gradcheck(lambda t: Cube.apply(t, 2.0), [x])
    assert gradgradcheck(lambda t: Cube.apply(t, 2.0), [x])


class ComplexGain(Function):
    """A real input to a complex output: z = x * (1 + 2j)."""

    @staticmethod
    def forward(ctx, x):
        return x * (1 + 2j)

    @staticmethod
    def backward(ctx, g):
        return (g * (1 - 2j)).real


def test_complex_outputs_are_differentiable_as_torch():
    x = ember.tensor([1.0, -2.0], requires_grad=True, dtype=ember.float64)
    z = ComplexGain.apply(x)
    assert z.requires_grad and z.grad_fn.name() == "ComplexGainBackward"
    (z.real * 3 + z.imag).sum().backward()   # d/dx = 3 * 1 + 2
    assert x.grad.tolist() == [5.0, 5.0]
    assert gradcheck(ComplexGain.apply, [x])


def test_custom_function_needs_input_grad():
    seen = []

    class F(Function):
        @staticmethod
        def forward(ctx, a, b):
            seen.append(ctx.needs_input_grad)
            return a * b

        @staticmethod
        def backward(ctx, g):
            return g, g

    F.apply(ember.ones(1, requires_grad=True), ember.ones(1))
    assert seen == [(True, False)]


def test_once_differentiable_backward_runs_once_and_refuses_a_second_derivative():
    """As torch's: the first-order gradient is the backward's; a gradient of that gradient
    (create_graph=True, then backward) raises naming once_differentiable."""
    import numpy as np
    import pytest
    torch = pytest.importorskip("torch")
    grads = []
    for m in (torch, ember):
        once = __import__(f"{m.__name__}.autograd.function",
                          fromlist=["once_differentiable"]).once_differentiable

        class Cube(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x ** 3

            @staticmethod
            @once
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                assert not m.is_grad_enabled()
                return g * 3 * x ** 2

        x = m.tensor([0.5, -2.0], dtype=m.float64, requires_grad=True)
        v = m.ones(2, dtype=m.float64, requires_grad=True)   # an incoming gradient with a graph
        (gx,) = m.autograd.grad(Cube.apply(x), x, grad_outputs=v, create_graph=True)
        grads.append(gx.detach().numpy())
        assert gx.requires_grad
        with pytest.raises(RuntimeError, match="once_differentiable"):
            gx.sum().backward()
        (plain,) = m.autograd.grad(Cube.apply(x).sum(), x, create_graph=True)
        assert not plain.requires_grad      # nothing in the backward's arguments needs grad
    np.testing.assert_array_equal(grads[1], grads[0])
