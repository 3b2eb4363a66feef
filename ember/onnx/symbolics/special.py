"""Special functions and the pointwise math around them, where ONNX has the op or a
short exact composition; the others (erfinv, lgamma, digamma, i0, ndtri, zeta, ...) have none."""
import math

import numpy as np

from ember.onnx.registry import symbolic
from ember.onnx.symbolics._util import out_dtype, tensor_or_scalar


def _c(g, v, node):
    return g.const(np.array(v, out_dtype(node)))


def _float(g, node, x):
    return tensor_or_scalar(g, x, out_dtype(node))


@symbolic("erfc")
def sym_erfc(g, node, x):
    return g.op("Sub", _c(g, 1.0, node), g.op("Erf", _float(g, node, x)))


@symbolic("deg2rad", "rad2deg")
def sym_deg2rad(g, node, x):
    k = math.pi / 180.0 if node.kind == "deg2rad" else 180.0 / math.pi
    return g.op("Mul", _float(g, node, x), _c(g, k, node))


@symbolic("sinc")
def sym_sinc(g, node, x):
    x = _float(g, node, x)
    px = g.op("Mul", x, _c(g, math.pi, node))
    zero = g.op("Equal", x, _c(g, 0.0, node))
    return g.op("Where", zero, _c(g, 1.0, node), g.op("Div", g.op("Sin", px), px))


@symbolic("xlogy", "special_xlog1py")
def sym_xlogy(g, node, x, y):
    x, y = _float(g, node, x), _float(g, node, y)
    arg = y if node.kind == "xlogy" else g.op("Add", y, _c(g, 1.0, node))
    prod = g.op("Mul", x, g.op("Log", arg))
    res = g.op("Where", g.op("Equal", x, _c(g, 0.0, node)), _c(g, 0.0, node), prod)
    return g.op("Where", g.op("IsNaN", y), y, res)


@symbolic("logit")
def sym_logit(g, node, x, eps=None):
    x = _float(g, node, x)
    if eps is not None:
        x = g.op("Clip", x, _c(g, eps, node), _c(g, 1.0 - eps, node))
    return g.op("Log", g.op("Div", x, g.op("Sub", _c(g, 1.0, node), x)))


@symbolic("logaddexp", "logaddexp2")
def sym_logaddexp(g, node, a, b):
    a, b = _float(g, node, a), _float(g, node, b)
    d = g.op("Neg", g.op("Abs", g.op("Sub", a, b)))
    if node.kind == "logaddexp":
        soft = g.op("Log", g.op("Add", _c(g, 1.0, node), g.op("Exp", d)))
    else:
        p = g.op("Pow", _c(g, 2.0, node), d)
        soft = g.op("Div", g.op("Log", g.op("Add", _c(g, 1.0, node), p)), _c(g, math.log(2.0), node))
    res = g.op("Add", g.op("Max", a, b), soft)
    same_inf = g.op("And", g.op("IsInf", a), g.op("Equal", a, b))
    return g.op("Where", same_inf, a, res)


@symbolic("hypot")
def sym_hypot(g, node, a, b):
    a, b = _float(g, node, a), _float(g, node, b)
    return g.op("Sqrt", g.op("Add", g.op("Mul", a, a), g.op("Mul", b, b)))


@symbolic("fmod")
def sym_fmod(g, node, a, b):
    dt = out_dtype(node)
    return g.op("Mod", tensor_or_scalar(g, a, dt), tensor_or_scalar(g, b, dt), fmod=1)


@symbolic("positive")
def sym_positive(g, node, x):
    return g.op("Identity", x)


@symbolic("heaviside")
def sym_heaviside(g, node, x, values):
    dt = out_dtype(node)
    x, values = tensor_or_scalar(g, x, dt), tensor_or_scalar(g, values, dt)
    step = g.cast(g.op("Greater", x, g.const(np.array(0, dt))), dt)
    return g.op("Where", g.op("Equal", x, g.const(np.array(0, dt))), values, step)


@symbolic("acosh", "asinh", "atanh")
def sym_inverse_hyperbolic(g, node, x):
    x = _float(g, node, x)
    if out_dtype(node) != np.float64:
        return g.op(node.kind.capitalize(), x)
    # onnxruntime implements Acosh/Asinh/Atanh in float32 only: their log forms in float64
    one = _c(g, 1.0, node)
    if node.kind == "acosh":
        return g.op("Log", g.op("Add", x, g.op("Sqrt", g.op("Sub", g.op("Mul", x, x), one))))
    if node.kind == "asinh":
        ax = g.op("Abs", x)
        mag = g.op("Log", g.op("Add", ax, g.op("Sqrt", g.op("Add", g.op("Mul", x, x), one))))
        return g.op("Mul", g.op("Sign", x), mag)
    ratio = g.op("Div", g.op("Add", one, x), g.op("Sub", one, x))
    return g.op("Mul", g.op("Log", ratio), _c(g, 0.5, node))


@symbolic("isposinf", "isneginf")
def sym_isposinf(g, node, x):
    if g.dtype(x).kind != "f":
        x = g.cast(x, np.float32)  # integers are never infinite
    pos = node.kind == "isposinf"
    return g.op("IsInf", x, detect_positive=int(pos), detect_negative=int(not pos))
