"""Pointwise ops: every spec op with a ``pointwise:`` entry exports by its pointwise form
through the one table of ``ember.onnx.pointwise`` (native ONNX op where there is one, else the
op's formula on ONNX values); ``NATIVE`` ops map to their ONNX op. The functions below are the
pointwise ops the table cannot express because they have no ``pointwise:`` entry (their
kernels are NumPy-only: atan2, bitwise ops, fmod, heaviside, the complex accessors on real
dtypes) or are composites recorded as one node (mish, relu6, addcmul, ...)."""
import math

import numpy as np

from ember.onnx.pointwise import NATIVE, export_pointwise, pointwise_ops
from ember.onnx.registry import symbolic
from ember.onnx.symbolics._util import SymbolicError, in_dtype, out_dtype, promote, tensor_or_scalar


# ---------------------------------------------------------------------------------- the table
def _round_decimals(g, node, x, decimals=0):
    """round(decimals != 0): the spec's pointwise form covers decimals=0 only (None otherwise)."""
    s = _c(g, 10.0 ** decimals, node)
    return g.op("Div", g.op("Round", g.op("Mul", x, s)), s)


# spec ops whose pointwise form is None for some constants, and what exports them then
_OUTSIDE_FORM = {"round": _round_decimals}


def _by_form(name):
    def fn(g, node, *args, **consts):
        out = export_pointwise(g, node, *args, **consts)
        if out is None:
            other = _OUTSIDE_FORM.get(name)
            if other is None:
                raise SymbolicError(f"'{name}' with {consts} has no pointwise form")
            return other(g, node, *args, **consts)
        return out
    fn.__name__ = f"sym_{name}"
    return fn


def _native(op_type, attrs):
    def fn(g, node, x):
        x = g.cast(x, out_dtype(node)) if out_dtype(node).kind == "f" else x
        return g.op(op_type, x, **attrs)
    fn.__name__ = f"sym_{op_type.lower()}"
    return fn


for _name in pointwise_ops():
    symbolic(_name)(_by_form(_name))
for _name, (_op, _attrs) in NATIVE.items():
    symbolic(_name)(_native(_op, _attrs))


# ---------------------------------------------------------------------------------- the others
def _c(g, v, node):
    return g.const(np.array(v, out_dtype(node)))


def _binary_args(g, node, a, b, dtype=None):
    dt = dtype if dtype is not None else promote(node)
    return tensor_or_scalar(g, a, dt), tensor_or_scalar(g, b, dt)


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


@symbolic("log10")
def sym_log10(g, node, x):
    return g.op("Div", g.op("Log", x), _c(g, math.log(10.0), node))


@symbolic("square")
def sym_square(g, node, x):
    return g.op("Mul", x, x)


@symbolic("mish")
def sym_mish(g, node, x):
    return g.op("Mul", x, g.op("Tanh", g.op("Softplus", x)))


@symbolic("logsigmoid")
def sym_logsigmoid(g, node, x):
    return g.op("Neg", g.op("Softplus", g.op("Neg", x)))


@symbolic("relu6")
def sym_relu6(g, node, x):
    return g.op("Clip", x, _c(g, 0.0, node), _c(g, 6.0, node))


@symbolic("addcmul", "addcdiv")
def sym_addc(g, node, x, t1, t2, value=1):
    dt = out_dtype(node)
    x, t1, t2 = (tensor_or_scalar(g, v, dt) for v in (x, t1, t2))
    p = g.op("Mul" if node.kind == "addcmul" else "Div", t1, t2)
    if value != 1:
        p = g.op("Mul", p, _c(g, value, node))
    return g.op("Add", x, p)


@symbolic("fmod")
def sym_fmod(g, node, a, b):
    dt = out_dtype(node)
    return g.op("Mod", tensor_or_scalar(g, a, dt), tensor_or_scalar(g, b, dt), fmod=1)


@symbolic("heaviside")
def sym_heaviside(g, node, x, values):
    dt = out_dtype(node)
    x, values = tensor_or_scalar(g, x, dt), tensor_or_scalar(g, values, dt)
    step = g.cast(g.op("Greater", x, g.const(np.array(0, dt))), dt)
    return g.op("Where", g.op("Equal", x, g.const(np.array(0, dt))), values, step)


@symbolic("isposinf", "isneginf")
def sym_isposinf(g, node, x):
    if g.dtype(x).kind != "f":
        x = g.cast(x, np.float32)  # integers are never infinite
    pos = node.kind == "isposinf"
    return g.op("IsInf", x, detect_positive=int(pos), detect_negative=int(not pos))


# complex accessors on ember's real dtypes (complex values: symbolics/complex.py)
def _identity(g, node, x):
    return g.op("Identity", x)


for _name in ("conj", "resolve_conj", "resolve_neg", "real", "conj_physical"):
    symbolic(_name)(_identity)


@symbolic("angle")
def sym_angle(g, node, x):
    """pi where x < 0, else 0; a NaN input stays NaN."""
    dt, it = out_dtype(node), in_dtype(node)
    neg = g.op("Less", x, g.const(np.zeros((), it)))
    out = g.op("Where", neg, g.const(np.array(np.pi, dt)), g.const(np.zeros((), dt)))
    if np.dtype(it).kind == "f":
        out = g.op("Where", g.op("IsNaN", x), g.cast(x, dt), out)
    return out


@symbolic("nan_to_num")
def sym_nan_to_num(g, node, x, nan=0.0, posinf=None, neginf=None):
    dt = np.dtype(node.args[0].dtype)
    if dt.kind != "f":
        return g.op("Identity", x)
    fi = np.finfo(dt)
    big = g.const(np.array(fi.max if posinf is None else posinf, dt))
    small = g.const(np.array(fi.min if neginf is None else neginf, dt))
    out = g.op("Where", g.op("IsNaN", x), g.const(np.array(nan, dt)), x)
    out = g.op("Where", g.op("IsInf", x, detect_negative=0, detect_positive=1), big, out)
    return g.op("Where", g.op("IsInf", x, detect_negative=1, detect_positive=0), small, out)


@symbolic("isclose")
def sym_isclose(g, node, a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    dt = np.dtype(node.args[0].dtype)
    if dt == np.bool_:
        return g.op("Equal", g.cast(a, np.int64), g.cast(b, np.int64))
    if dt.kind != "f":
        dt = np.dtype(np.float64)
        a, b = g.cast(a, dt), g.cast(b, dt)
    tol = g.op("Add", g.const(np.array(atol, dt)),
               g.op("Mul", g.const(np.array(rtol, dt)), g.op("Abs", b)))
    close = g.op("LessOrEqual", g.op("Abs", g.op("Sub", a, b)), tol)
    out = g.op("Or", g.op("Equal", a, b), close)
    if equal_nan:
        out = g.op("Or", out, g.op("And", g.op("IsNaN", a), g.op("IsNaN", b)))
    return out
