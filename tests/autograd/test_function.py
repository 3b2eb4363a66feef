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
