"""Special-function and pointwise-math ops declared ``composite`` in derivatives.yaml:
written in other spec ops, as torch's CompositeImplicitAutograd versions are."""
import math

import numpy as np

import ember.autograd._generated as G
from ember.errors import EmberValueError
from ember.kernels.dtypes import float_operands


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
