"""Pointwise ops declared ``composite`` in ember/ops/spec/pointwise.yaml and special.yaml
(``rsub``, ``true_divide``, ``sgn``, ``square``, ``addcmul``, activations such as ``mish``,
``mvlgamma``, ...): written in other spec ops, as torch's CompositeImplicitAutograd versions are;
and torch's pointwise entry points that are not one spec op (``clip``, ``equal``, ``allclose``,
``frexp``, reverse operators, in-place forms of composites)."""
import builtins
import math

import numpy as np

from ember.autograd._generated import functions as G
from ember import return_types as R
from ember.errors import EmberRuntimeError, EmberTypeError, EmberValueError
from ember.errors import public as _public
from ember.kernels.dtypes import float_operands
from ember.tensor import Tensor


def mvlgamma(input, p):
    """log of the multivariate gamma function of dimension ``p``:
    ``p(p-1)/4 log(pi) + sum_{j<p} lgamma(input - j/2)``; every element must exceed (p-1)/2."""
    if not isinstance(p, int) or p < 1:
        raise EmberValueError(f"mvlgamma: p has to be greater than or equal to 1, got {p!r}")
    if input._data.size and not np.all(input._data > (p - 1) / 2):
        raise EmberValueError(f"mvlgamma: all elements must be greater than (p-1)/2 = "
                              f"{(p - 1) / 2} (p={p})")
    out = G.lgamma(input)
    for j in range(1, p):
        out = G.add(out, G.lgamma(G.sub(input, j / 2)))
    return G.add(out, p * (p - 1) / 4 * math.log(math.pi))


def ldexp(input, other):
    """``input * 2**other``, of torch's result type of the two (the default float for
    integers): float16 * 2**int64 is float16, computed in float32."""
    out = float_operands(getattr(input, "_data", input), getattr(other, "_data", other))[2]
    r = G.mul(input, G.exp2(other))
    return r if r._data.dtype == out else G.to(r, out)


def float_power(input, exponent):
    """``pow`` computed in float64, or complex128 when either operand is complex (as torch)."""
    cx = any(x._data.dtype.kind == "c" if hasattr(x, "_data") else isinstance(x, complex)
             for x in (input, exponent))
    dt, py = (np.dtype(np.complex128), complex) if cx else (np.dtype(np.float64), float)

    def wide(x):
        return G.to(x, dt) if hasattr(x, "_data") else py(x)
    return G.pow(wide(input), wide(exponent))


def fix(input):
    """Alias of ``trunc``."""
    return G.trunc(input)


def sgn(input):
    """``sign`` for real tensors, ``x / |x|`` (0 at 0) for complex ones."""
    if input._data.dtype.kind == "c":
        from ember.autograd.formulas import _csgn
        return _csgn(input)
    return G.sign(input)


def true_divide(input, other):
    """Alias of ``div`` (true division)."""
    return G.div(input, other)


def rsub(input, other, alpha=1):
    """``other - alpha * input``."""
    return G.sub(other, input, alpha=alpha)


def isreal(input):
    """True where the element is real: every element of a real tensor, those with a zero
    imaginary part of a complex one."""
    if input.dtype.is_complex:
        return G.eq(G.imag(input), 0)
    return G.ones_like(input, np.dtype(np.bool_))


def clip(input, min=None, max=None):
    """Alias of clamp."""
    return G.clamp(input, min, max)


def _rdiv(self, other):
    """``Tensor.__rdiv__`` (torch's name for ``other / self``)."""
    return G.div(other, self)


def _polygamma_method(self, n):
    """``x.polygamma(n)`` is ``polygamma(n, x)`` (torch's order)."""
    return G.polygamma(n, self)


def _allclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    self._python_value("allclose")
    other._python_value("allclose")
    return builtins.bool(np.allclose(self._data, other._data, rtol, atol, equal_nan))


def equal(input, other):
    """Whether ``input`` and ``other`` have the same shape and the same values (a Python bool;
    the dtypes may differ, NaN is unequal to itself), as ``torch.equal``."""
    if not isinstance(input, Tensor):
        raise EmberTypeError(f"equal(): argument 'input' (position 1) must be Tensor, not "
                             f"{type(input).__name__}")
    return _equal(input, other)


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether ``isclose(input, other, rtol, atol, equal_nan)`` holds everywhere (a Python bool)."""
    return builtins.bool(G.all(G.isclose(input, other, rtol, atol, equal_nan)).item())


def _clamp_min_(self, min):
    return G.clamp_(self, min, None)


def _clamp_max_(self, max):
    return G.clamp_(self, None, max)


def _rfloordiv(self, other):
    return G.div(other, self, rounding_mode="floor")


def _ifloordiv(self, other):
    return G.div_(self, other, rounding_mode="floor")


def _rmod(self, other):
    return G.remainder(other, self)


def _imod(self, other):
    return G.copy_(self, G.remainder(self, other))


def _equal(self, other):
    if not isinstance(other, Tensor):
        raise EmberTypeError(f"equal(): argument 'other' (position 2) must be Tensor, not "
                             f"{type(other).__name__}")
    self._python_value("equal")
    other._python_value("equal")
    return self._data.shape == other._data.shape and builtins.bool(np.array_equal(self._data,
                                                                                  other._data))


def _set_part(part):
    def setter(self, value):
        view = part(self)
        G.copy_(view, value if hasattr(value, "_data") else G.fill(view, value))
    return setter


def invert(self):
    """``~x``: ``bitwise_not`` of an integer or bool tensor; of a floating or complex one
    torch's TypeError (where ``bitwise_not`` raises NotImplementedError)."""
    if self.dtype.is_floating_point or self.dtype.is_complex:
        raise EmberTypeError(f"~ (operator.invert) is only implemented on integer and "
                             f"Boolean-type tensors (self: {self.dtype}{list(self.shape)})")
    return G.bitwise_not(self)


def frexp(input):
    """``(mantissa, exponent)`` with ``input = mantissa * 2**exponent``, |mantissa| in [0.5, 1),
    as ``return_types.frexp``."""
    return R.frexp(*G.frexp(input))


def _inplace(name, fn):
    """``x.name_(...)``: ``fn(x, ...)`` written into ``x`` (for composite ops)."""
    def method(self, *args, **kwargs):
        # on a clone when recording: ``fn`` may save its input, which the write would modify
        src = G.clone(self) if self.requires_grad else self
        out = fn(src, *args, **kwargs)
        if name == "float_power" and self.dtype != out.dtype:
            raise EmberRuntimeError(f"float_power_: the base given to float_power_ has dtype "
                                    f"{self.dtype} but the operation's result requires dtype "
                                    f"{out.dtype}")
        if not np.can_cast(out._data.dtype, self._data.dtype, "same_kind"):
            raise EmberRuntimeError(f"{name}_: result type {out.dtype} can't be cast to the "
                                    f"desired output type {self.dtype}")
        return G.copy_(self, out)
    method.__name__ = name + "_"
    return _public(method, name + "_")


def square(input):
    if input._data.dtype == np.bool_:  # torch: bool squares to int64 (as pow(x, 2))
        input = G.to(input, np.dtype(np.int64))
    return G.mul(input, input)


def _opmath(*xs):
    """``(xs, out)``: the Tensors among ``xs`` cast to the dtype torch computes a one-kernel
    floating op in (their common dtype; float32 for float16/bfloat16), and the dtype to round
    the result to (None when it is the compute dtype, or the common dtype is not floating)."""
    from ember.kernels.dtypes import promote_categories
    from ember.kernels.opmath import F32, is_reduced
    from ember.tensor import Tensor
    ts = [x for x in xs if isinstance(x, Tensor)]
    common = promote_categories([t._data.dtype for t in ts if t._data.ndim],
                                [t._data.dtype for t in ts if not t._data.ndim])
    if common is None or common.kind not in "fV":
        return xs, None
    compute = F32 if is_reduced(common) else common
    return (tuple(G.to(x, compute) if isinstance(x, Tensor) and x._data.dtype != compute else x
                  for x in xs), common if compute != common else None)


def addcmul(input, tensor1, tensor2, value=1):
    """``input + value * tensor1 * tensor2`` (float16/bfloat16 computed in float32 and rounded
    once, as torch's kernel)."""
    (input, tensor1, tensor2), low = _opmath(input, tensor1, tensor2)
    out = G.add(input, G.mul(G.mul(tensor1, tensor2), value))
    return out if low is None else G.to(out, low)


def addcdiv(input, tensor1, tensor2, value=1):
    """``input + value * tensor1 / tensor2`` (float16/bfloat16 computed in float32 and rounded
    once, as torch's kernel)."""
    (input, tensor1, tensor2), low = _opmath(input, tensor1, tensor2)
    out = G.add(input, G.mul(G.div(tensor1, tensor2), value))
    return out if low is None else G.to(out, low)


def clamp_min(input, min):
    return G.clamp(input, min, None)


def clamp_max(input, max):
    return G.clamp(input, None, max)


def floor_divide(input, other):
    return G.div(input, other, rounding_mode="floor")


def relu6(input):
    return G.hardtanh(input, 0.0, 6.0)


def mish(input):
    return G.mul(input, G.tanh(G.softplus(input, 1.0, 20.0)))


def hardsigmoid(input):
    """``clamp(x + 3, 0, 6) / 6``; its gradient is 1/6 strictly inside (-3, 3) and 0 at the ends
    (hardtanh's, as torch's ``hardsigmoid_backward``)."""
    return G.div(G.hardtanh(G.add(input, 3.0), 0.0, 6.0), 6.0)


def hardswish(input):
    """``x * clamp(x + 3, 0, 6) / 6``, rounded as torch's kernel (the product before the
    division); its gradient is 0 for x <= -3 and 1 for x >= 3 (torch's ``hardswish_backward``)."""
    return G.div(G.mul(input, G.hardtanh(G.add(input, 3.0), 0.0, 6.0)), 6.0)


def logsigmoid(input):
    return G.neg(G.softplus(G.neg(input), 1.0, 20.0))


def softsign(input):
    return G.div(input, G.add(G.abs(input), 1.0))


# these raise ember's errors naming them (ember.errors.public)
for _n in ("clip", "equal", "allclose", "square", "addcmul", "addcdiv", "clamp_min",
           "clamp_max", "floor_divide", "relu6", "mish", "hardsigmoid", "hardswish",
           "logsigmoid", "softsign"):
    globals()[_n] = _public(globals()[_n])
del _n
