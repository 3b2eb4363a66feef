"""Pointwise kernels (ember.kernels.elementwise, special) against torch: dtypes of floating-only
binary ops with integer operands, integer division by zero, bool operands, float_power."""
import numpy as np
import pytest
import torch

import ember

FLOAT_BINARY = ["atan2", "ldexp", "hypot", "copysign", "fmod", "remainder", "nextafter", "xlogy",
                "logaddexp", "logaddexp2", "float_power", "div", "pow", "fmax", "maximum",
                "igamma", "igammac"]
PAIRS = [("float16", "int64"), ("bfloat16", "int32"), ("int32", "float16"), ("int32", "int64"),
         ("uint8", "bfloat16"), ("float64", "int8"), ("bool", "float16")]


def _outcome(lib, op, a, b, shapes):
    x = lib.tensor(np.array([0.5, 3.0, -2.0])[:int(np.prod(shapes[0]))].reshape(shapes[0]))
    y = lib.tensor(np.array([2.0, -1.0, 3.0])[:int(np.prod(shapes[1]))].reshape(shapes[1]))
    x, y = x.to(getattr(lib, a)), y.to(getattr(lib, b))
    try:
        r = getattr(lib, op)(x, y)
    except RuntimeError:
        return RuntimeError
    return repr(r.dtype).split(".")[-1], r.double().tolist()


@pytest.mark.parametrize("shapes", [((3,), (3,)), ((), (3,)), ((3,), ())])
@pytest.mark.parametrize("a,b", PAIRS)
@pytest.mark.parametrize("op", FLOAT_BINARY)
def test_binary_float_op_with_integer_operand_keeps_torch_dtype(op, a, b, shapes):
    """atan2 / ldexp of float16 or bfloat16 with an integer tensor stay float16 / bfloat16
    (they were float32); hypot, nextafter, logaddexp accept them (they refused any integer)."""
    if op == "ldexp" and "bool" in (a, b):
        pytest.skip("torch refuses pow(2, bool) inside ldexp")
    want = _outcome(torch, op, a, b, shapes)
    got = _outcome(ember, op, a, b, shapes)
    if want is RuntimeError or got is RuntimeError:
        assert got is want
        return
    assert got[0] == want[0]
    np.testing.assert_allclose(got[1], want[1], rtol=1e-2, equal_nan=True)


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "int8"])
@pytest.mark.parametrize("call", [
    lambda m, x, y: x % y, lambda m, x, y: m.remainder(x, y), lambda m, x, y: m.fmod(x, y),
    lambda m, x, y: x // y, lambda m, x, y: m.div(x, y, rounding_mode="trunc"),
    lambda m, x, y: m.div(x, y, rounding_mode="floor"), lambda m, x, y: x % 0,
    lambda m, x, y: m.fmod(x, 0), lambda m, x, y: x // 0])
def test_integer_division_by_zero_raises_as_torch(call, dtype):
    def run(m):
        x = m.tensor([5, 3]).to(getattr(m, dtype))
        y = m.tensor([1, 0]).to(getattr(m, dtype))
        with pytest.raises(RuntimeError, match="ZeroDivisionError") as e:
            call(m, x, y)
        return e
    run(torch)
    assert isinstance(run(ember).value, ember.EmberError)


def test_float_division_by_zero_is_a_value():
    x = ember.tensor([5.0, -3.0, 0.0])
    assert np.isnan(ember.remainder(x, 0.0).numpy()).all()
    assert (x // 0.0).tolist()[:2] == (torch.tensor([5.0, -3.0]) // 0.0).tolist()


@pytest.mark.parametrize("call", [
    lambda m, b, i: b - b, lambda m, b, i: i - b, lambda m, b, i: b - 1,
    lambda m, b, i: i - True, lambda m, b, i: m.rsub(b, i), lambda m, b, i: m.fmod(b, b),
    lambda m, b, i: m.remainder(b, b), lambda m, b, i: m.pow(b, b),
    lambda m, b, i: m.floor_divide(b, b)])
def test_bool_operands_refused_as_torch(call):
    for m in (torch, ember):
        with pytest.raises(RuntimeError):
            call(m, m.tensor([True, False]), m.tensor([1, 2]))


@pytest.mark.parametrize("args", [
    (lambda m: m.tensor([1 + 2j, -0.5j]), lambda m: 2),
    (lambda m: m.tensor([2.0, 3.0]), lambda m: 1j),
    (lambda m: 2, lambda m: m.tensor([1j, 0.5 + 1j])),
    (lambda m: m.tensor([2.0]), lambda m: m.tensor([1j], dtype=m.complex64)),
    (lambda m: m.tensor([2, 3]), lambda m: m.tensor([1.5])),
])
def test_float_power_complex_in_complex128(args):
    """float_power of a complex operand computes in complex128 (the imaginary part was
    dropped)."""
    a, b = args
    want = torch.float_power(a(torch), b(torch))
    got = ember.float_power(a(ember), b(ember))
    assert repr(got.dtype).split(".")[-1] == repr(want.dtype).split(".")[-1]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


def test_float_power_complex_gradient_as_torch():
    x = ember.tensor([1 + 2j, 0.5 - 1j], requires_grad=True)
    ember.float_power(x, 2).abs().sum().backward()
    tx = torch.tensor([1 + 2j, 0.5 - 1j], requires_grad=True)
    torch.float_power(tx, 2).abs().sum().backward()
    assert x.grad.dtype == ember.complex64
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)
