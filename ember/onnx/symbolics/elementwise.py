"""Pointwise math, comparisons, logic and activations."""
import math

import numpy as np

from ember.kernels.constants import GELU_TANH_BETA, GELU_TANH_KAPPA
from ember.onnx.registry import symbolic
from ember.onnx.symbolics._util import SymbolicError, out_dtype, promote, tensor_or_scalar

_UNARY = {"neg": "Neg", "reciprocal": "Reciprocal", "abs": "Abs", "sign": "Sign", "exp": "Exp",
          "log": "Log", "sqrt": "Sqrt", "sin": "Sin", "cos": "Cos", "tan": "Tan", "asin": "Asin",
          "acos": "Acos", "atan": "Atan", "sinh": "Sinh", "cosh": "Cosh", "tanh": "Tanh",
          "sigmoid": "Sigmoid", "erf": "Erf", "relu": "Relu", "floor": "Floor", "ceil": "Ceil",
          "softsign": "Softsign", "contiguous": "Identity", "clone": "Identity"}


def _unary(onnx_op):
    def fn(g, node, x):
        x = g.cast(x, out_dtype(node)) if out_dtype(node).kind == "f" else x
        return g.op(onnx_op, x)
    fn.__name__ = f"sym_{onnx_op.lower()}"
    return fn


for _k, _v in _UNARY.items():
    symbolic(_k)(_unary(_v))


def _binary_args(g, node, a, b, dtype=None):
    dt = dtype if dtype is not None else promote(node)
    return tensor_or_scalar(g, a, dt), tensor_or_scalar(g, b, dt)


def _arith(onnx_op):
    def fn(g, node, a, b, **kw):
        dt = out_dtype(node)
        return g.op(onnx_op, *_binary_args(g, node, a, b, dt))
    return fn


symbolic("mul")(_arith("Mul"))
symbolic("pow")(_arith("Pow"))
symbolic("maximum")(_arith("Max"))
symbolic("minimum")(_arith("Min"))


@symbolic("add", "sub")
def sym_add_sub(g, node, a, b, alpha=1):
    dt = out_dtype(node)
    a, b = _binary_args(g, node, a, b, dt)
    if alpha != 1:
        b = g.op("Mul", b, g.const(np.array(alpha, dt)))
    return g.op("Add" if node.kind == "add" else "Sub", a, b)


def _floor_div_int(g, a, b):
    r = g.op("Mod", a, b, fmod=0)
    return g.op("Div", g.op("Sub", a, r), b)


@symbolic("div")
def sym_div(g, node, a, b, rounding_mode=None):
    dt = out_dtype(node)
    a, b = _binary_args(g, node, a, b, dt)
    if rounding_mode is None:
        return g.op("Div", a, b)
    if dt.kind in "iu":
        if rounding_mode == "trunc":
            return g.op("Div", a, b)
        return _floor_div_int(g, a, b)
    q = g.op("Div", a, b)
    if rounding_mode == "floor":
        return g.op("Floor", q)
    return _trunc(g, q)


def _trunc(g, x):
    return g.op("Mul", g.op("Sign", x), g.op("Floor", g.op("Abs", x)))


@symbolic("trunc")
def sym_trunc(g, node, x):
    return _trunc(g, x)


@symbolic("frac")
def sym_frac(g, node, x):
    return g.op("Sub", x, _trunc(g, x))


@symbolic("remainder")
def sym_remainder(g, node, a, b):
    dt = out_dtype(node)
    a, b = _binary_args(g, node, a, b, dt)
    if dt.kind in "iu":
        return g.op("Mod", a, b, fmod=0)
    return g.op("Sub", a, g.op("Mul", g.op("Floor", g.op("Div", a, b)), b))


@symbolic("atan2")
def sym_atan2(g, node, y, x):
    dt = out_dtype(node)
    y, x = _binary_args(g, node, y, x, dt)
    zero, pi = g.const(np.array(0, dt)), g.const(np.array(math.pi, dt))
    base = g.op("Atan", g.op("Div", y, x))
    neg_x = g.op("Less", x, zero)
    y_neg = g.op("Less", y, zero)
    adj = g.op("Where", y_neg, g.op("Sub", base, pi), g.op("Add", base, pi))
    res = g.op("Where", neg_x, adj, base)
    x0 = g.op("Equal", x, zero)
    half = g.op("Mul", g.op("Sign", y), g.const(np.array(math.pi / 2, dt)))
    return g.op("Where", x0, half, res)


@symbolic("where")
def sym_where(g, node, cond, a, b):
    dt = out_dtype(node)
    cond = tensor_or_scalar(g, cond, np.bool_)
    return g.op("Where", cond, tensor_or_scalar(g, a, dt), tensor_or_scalar(g, b, dt))


@symbolic("lerp")
def sym_lerp(g, node, a, b, w):
    dt = out_dtype(node)
    a, b, w = (tensor_or_scalar(g, v, dt) for v in (a, b, w))
    return g.op("Add", a, g.op("Mul", w, g.op("Sub", b, a)))


_CMP = {"eq": "Equal", "lt": "Less", "le": "LessOrEqual", "gt": "Greater",
        "ge": "GreaterOrEqual"}


def _cmp(onnx_op):
    def fn(g, node, a, b):
        a, b = _binary_args(g, node, a, b)
        return g.op(onnx_op, a, b)
    return fn


for _k, _v in _CMP.items():
    symbolic(_k)(_cmp(_v))


@symbolic("ne")
def sym_ne(g, node, a, b):
    a, b = _binary_args(g, node, a, b)
    return g.op("Not", g.op("Equal", a, b))


def _logical(onnx_op):
    def fn(g, node, a, b):
        a, b = _binary_args(g, node, a, b, np.dtype(np.bool_))
        return g.op(onnx_op, a, b)
    return fn


symbolic("logical_and")(_logical("And"))
symbolic("logical_or")(_logical("Or"))
symbolic("logical_xor")(_logical("Xor"))


@symbolic("logical_not")
def sym_logical_not(g, node, x):
    return g.op("Not", g.cast(x, np.bool_))


def _bitwise(logical, bitwise):
    def fn(g, node, *args):
        dt = out_dtype(node)
        if dt == np.bool_:
            return g.op(logical, *(tensor_or_scalar(g, a, dt) for a in args))
        if g.opset < 18:
            raise SymbolicError(f"{bitwise} on integers needs opset 18 or later")
        return g.op(bitwise, *(tensor_or_scalar(g, a, dt) for a in args))
    return fn


symbolic("bitwise_and")(_bitwise("And", "BitwiseAnd"))
symbolic("bitwise_or")(_bitwise("Or", "BitwiseOr"))
symbolic("bitwise_xor")(_bitwise("Xor", "BitwiseXor"))
symbolic("bitwise_not")(_bitwise("Not", "BitwiseNot"))


@symbolic("isnan")
def sym_isnan(g, node, x):
    return g.op("IsNaN", x)


@symbolic("isinf")
def sym_isinf(g, node, x):
    return g.op("IsInf", x)


@symbolic("isfinite")
def sym_isfinite(g, node, x):
    return g.op("Not", g.op("Or", g.op("IsNaN", x), g.op("IsInf", x)))


def _c(g, v, node):
    return g.const(np.array(v, out_dtype(node)))


@symbolic("exp2")
def sym_exp2(g, node, x):
    return g.op("Pow", _c(g, 2.0, node), x)


@symbolic("log2", "log10")
def sym_logn(g, node, x):
    base = 2.0 if node.kind == "log2" else 10.0
    return g.op("Div", g.op("Log", x), _c(g, math.log(base), node))


@symbolic("log1p")
def sym_log1p(g, node, x):
    return g.op("Log", g.op("Add", x, _c(g, 1.0, node)))


@symbolic("expm1")
def sym_expm1(g, node, x):
    return g.op("Sub", g.op("Exp", x), _c(g, 1.0, node))


@symbolic("rsqrt")
def sym_rsqrt(g, node, x):
    return g.op("Reciprocal", g.op("Sqrt", x))


@symbolic("square")
def sym_square(g, node, x):
    return g.op("Mul", x, x)


@symbolic("leaky_relu")
def sym_leaky_relu(g, node, x, negative_slope):
    return g.op("LeakyRelu", x, alpha=float(negative_slope))


@symbolic("elu")
def sym_elu(g, node, x, alpha):
    return g.op("Elu", x, alpha=float(alpha))


@symbolic("selu")
def sym_selu(g, node, x):
    return g.op("Selu", x)


def _gelu_decomposed(g, node, x, approximate):
    half, one = _c(g, 0.5, node), _c(g, 1.0, node)
    if approximate == "tanh":
        inner = g.op("Mul", _c(g, GELU_TANH_BETA, node),
                     g.op("Add", x, g.op("Mul", _c(g, GELU_TANH_KAPPA, node),
                                         g.op("Mul", x, g.op("Mul", x, x)))))
        return g.op("Mul", g.op("Mul", half, x), g.op("Add", one, g.op("Tanh", inner)))
    erf = g.op("Erf", g.op("Div", x, _c(g, math.sqrt(2.0), node)))
    return g.op("Mul", g.op("Mul", half, x), g.op("Add", one, erf))


@symbolic("gelu")
def sym_gelu(g, node, x, approximate="none"):
    return _gelu_decomposed(g, node, x, approximate)


@symbolic("gelu", since=20)
def sym_gelu20(g, node, x, approximate="none"):
    return g.op("Gelu", x, approximate=approximate)


@symbolic("silu")
def sym_silu(g, node, x):
    return g.op("Mul", x, g.op("Sigmoid", x))


@symbolic("mish")
def sym_mish(g, node, x):
    return g.op("Mul", x, g.op("Tanh", g.op("Softplus", x)))


@symbolic("softplus")
def sym_softplus(g, node, x, beta=1.0, threshold=20.0):
    bx = x if beta == 1 else g.op("Mul", x, _c(g, beta, node))
    sp = g.op("Softplus", bx)
    if beta != 1:
        sp = g.op("Div", sp, _c(g, beta, node))
    return g.op("Where", g.op("Greater", bx, _c(g, threshold, node)), x, sp)


@symbolic("logsigmoid")
def sym_logsigmoid(g, node, x):
    return g.op("Neg", g.op("Softplus", g.op("Neg", x)))


@symbolic("hardtanh")
def sym_hardtanh(g, node, x, min_val=-1.0, max_val=1.0):
    return g.op("Clip", x, _c(g, min_val, node), _c(g, max_val, node))


@symbolic("relu6")
def sym_relu6(g, node, x):
    return g.op("Clip", x, _c(g, 0.0, node), _c(g, 6.0, node))


@symbolic("hardsigmoid")
def sym_hardsigmoid(g, node, x):
    return g.op("HardSigmoid", x, alpha=1.0 / 6, beta=0.5)


@symbolic("hardswish")
def sym_hardswish(g, node, x):
    return g.op("HardSwish", x)


@symbolic("clamp")
def sym_clamp(g, node, x, min=None, max=None):
    dt = out_dtype(node)
    x = g.cast(x, dt)
    scal = all(v is None or not isinstance(v, str) for v in (min, max))
    if scal:
        return g.op("Clip", x, tensor_or_scalar(g, min, dt), tensor_or_scalar(g, max, dt))
    if min is not None:
        x = g.op("Max", x, tensor_or_scalar(g, min, dt))
    if max is not None:
        x = g.op("Min", x, tensor_or_scalar(g, max, dt))
    return x


@symbolic("round")
def sym_round(g, node, x, decimals=0):
    if decimals == 0:
        return g.op("Round", x)
    s = _c(g, 10.0 ** decimals, node)
    return g.op("Div", g.op("Round", g.op("Mul", x, s)), s)


@symbolic("addcmul", "addcdiv")
def sym_addc(g, node, x, t1, t2, value=1):
    dt = out_dtype(node)
    x, t1, t2 = (tensor_or_scalar(g, v, dt) for v in (x, t1, t2))
    p = g.op("Mul" if node.kind == "addcmul" else "Div", t1, t2)
    if value != 1:
        p = g.op("Mul", p, _c(g, value, node))
    return g.op("Add", x, p)


@symbolic("to")
def sym_to(g, node, x, dtype=None, copy=False):
    out = g.cast(x, out_dtype(node))
    return out if out != x else g.op("Identity", x)
