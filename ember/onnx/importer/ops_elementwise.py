"""Elementwise ONNX ops: arithmetic, comparisons, logic, activations, Cast, Clip, Where."""
import numpy as np

import ember
import ember.nn.functional as F
from ember.onnx.importer._util import alloc_shape, onnx_np_dtype, scalar
from ember.onnx.importer import storage_types as st
from ember.onnx.importer.load import _EMBER_NP
from ember.onnx.importer.registry import importer

_UNARY = {
    "Abs": ember.abs, "Neg": ember.neg, "Exp": ember.exp, "Log": ember.log, "Sqrt": ember.sqrt,
    "Erf": ember.erf, "Floor": ember.floor, "Ceil": ember.ceil, "Reciprocal": ember.reciprocal,
    "Sin": ember.sin, "Cos": ember.cos, "Tan": ember.tan, "Asin": ember.asin,
    "Acos": ember.acos, "Atan": ember.atan, "Sinh": ember.sinh, "Cosh": ember.cosh,
    "Asinh": ember.asinh, "Acosh": ember.acosh, "Atanh": ember.atanh, "Relu": ember.relu,
    "Sigmoid": ember.sigmoid, "Tanh": ember.tanh, "Sign": ember.sign, "Softsign": F.softsign,
    "Softplus": F.softplus, "Round": ember.round, "Mish": F.mish,
}


def _unary(fn):
    return lambda a, x: fn(x)


for _op, _fn in _UNARY.items():
    importer(_op, since=1)(_unary(_fn))


@importer("Not", since=1)
def not_(a, x):
    return ember.logical_not(x)


@importer("IsNaN", since=9)
def isnan(a, x):
    return ember.isnan(x)


@importer("IsInf", since=10, attrs={"detect_negative": 1, "detect_positive": 1})
def isinf(a, x):
    if a["detect_negative"] and a["detect_positive"]:
        return ember.isinf(x)
    if a["detect_positive"]:
        return ember.isposinf(x)
    if a["detect_negative"]:
        return ember.isneginf(x)
    return ember.zeros_like(x).to(ember.bool)


def _int(t):
    return not t.dtype.is_floating_point


@importer("Add", since=7)
def add(a, x, y):
    return ember.add(x, y)


@importer("Sub", since=7)
def sub(a, x, y):
    return ember.sub(x, y)


@importer("Mul", since=7)
def mul(a, x, y):
    return ember.mul(x, y) if x.dtype != ember.bool else ember.logical_and(x, y)


@importer("Div", since=7)
def div(a, x, y):
    if _int(x):
        return ember.div(x, y, rounding_mode="trunc")
    return ember.div(x, y)


@importer("Pow", since=7)
def pow_(a, x, y):
    if x.dtype != y.dtype:
        return ember.pow(x.to(ember.float64), y.to(ember.float64)).to(x.dtype)
    return ember.pow(x, y)


@importer("Mod", since=10, attrs={"fmod": 0})
def mod(a, x, y):
    return ember.fmod(x, y) if a["fmod"] else ember.remainder(x, y)


@importer("Equal", since=7, strings=True)
def equal(a, x, y):
    """Elementwise ==; also of two STRING tensors (NumPy object arrays, see ops_text)."""
    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        return ember.tensor(np.asarray(np.equal(np.asarray(x, dtype=object),
                                                np.asarray(y, dtype=object)), dtype=bool))
    return ember.eq(x, y)


_CMP = {"Less": ember.lt, "Greater": ember.gt, "LessOrEqual": ember.le,
        "GreaterOrEqual": ember.ge, "And": ember.logical_and, "Or": ember.logical_or,
        "Xor": ember.logical_xor, "BitwiseAnd": ember.bitwise_and,
        "BitwiseOr": ember.bitwise_or, "BitwiseXor": ember.bitwise_xor}


def _binary(fn):
    return lambda a, x, y: fn(x, y)


for _op, _fn in _CMP.items():
    importer(_op, since=7)(_binary(_fn))


@importer("BitwiseNot", since=18)
def bitwise_not(a, x):
    return ember.bitwise_not(x)


@importer("BitShift", since=11, attrs={"direction": ""},
          check=lambda a, n: None if a["direction"] in ("LEFT", "RIGHT") else
          ("direction", "must be LEFT or RIGHT"))
def bitshift(a, x, y):
    if a["direction"] == "LEFT":
        return ember.bitwise_left_shift(x, y)
    return ember.bitwise_right_shift(x, y)


def _variadic(fn):
    def run(a, *xs):
        out = xs[0]
        for x in xs[1:]:
            out = fn(out, x)
        return out
    return run


importer("Max", since=8)(_variadic(ember.maximum))
importer("Min", since=8)(_variadic(ember.minimum))
importer("Sum", since=8)(_variadic(ember.add))


@importer("Mean", since=8)
def mean(a, *xs):
    return _variadic(ember.add)(a, *xs) / len(xs)


@importer("Where", since=9)
def where(a, c, x, y):
    return ember.where(c, x, y)


def _check_cast_like(attr, simulated=False):
    def check(a, n):
        d = onnx_np_dtype(a[attr])
        if d is None or d not in _EMBER_NP and not (simulated and st.storable(a[attr])):
            from ember.onnx.importer.load import dtype_name
            return (attr, f"= {dtype_name(a[attr])} has no ember dtype")
        if a.get("round_mode", "up") not in ("up", "down", "nearest"):
            return ("round_mode", "must be 'up', 'down' or 'nearest'")
        return None
    return check


# bfloat16 / float8 / int4 / uint32... targets round or saturate as ONNX says (storage_types)
_check_cast = _check_cast_like("to", simulated=True)


@importer("Cast", since=6, attrs={"to": 0, "saturate": 1, "round_mode": "up"},
          check=_check_cast)
def cast(a, x):
    return st.cast(x, a["to"], a["saturate"], a["round_mode"])


@importer("CastLike", since=15, attrs={"saturate": 1, "round_mode": "up"},
          check=lambda a, n: _check_cast(dict(a, to=1), n))
def castlike(a, x, like):
    to = a["_tin"][1] if len(a.get("_tin", ())) > 1 else 0
    if to:
        return st.cast(x, to, a["saturate"], a["round_mode"])
    return x.to(like.dtype)


def _check_bitcast(a, n):
    from ember.onnx.importer.load import dtype_name
    src, to = (a["_tin"] or [0])[0], a["to"]
    if not src:
        return (None, "the input's element type is unknown (BitCast needs it)")
    for t in (src, to):
        s = st.simulated(t)
        d = st.np_dtype(t)
        if d is None or d == object or not st.storable(t) or s is not None and 0 < s.bits < 8 \
                or s is not None and s.is_float and d.itemsize * 8 != _FLOAT_BITS.get(s.name, 8):
            return ("to" if t == to else None,
                    f"BitCast of {dtype_name(t)} is not supported (a whole-byte numeric type "
                    f"is needed)")
    if st.np_dtype(src).itemsize != st.np_dtype(to).itemsize:
        return ("to", f"{dtype_name(to)} differs in width from the input's "
                      f"{dtype_name(src)}")
    return None


_FLOAT_BITS = {"BFLOAT16": 16}   # other simulated floats are 8 bits, one per byte


@importer("BitCast", since=26, attrs={"to": 0}, check=_check_bitcast)
def bitcast(a, x):
    """The bits of each element read as type ``to`` (same width), through NumPy views of the
    declared types."""
    src, to = a["_tin"][0], a["to"]
    y = st.to_declared(x, src).view(st.np_dtype(to))
    if st.simulated(to):
        return st.widen(y, to, "BitCast")
    return ember.tensor(np.array(y))


@importer("Identity", since=1)
def identity(a, x):
    return x


@importer("Dropout", since=12, attrs={"seed": 0}, max_outputs=2)
def dropout(a, x, ratio=None, training_mode=None):
    if training_mode is not None and bool(scalar(training_mode)):
        r = 0.5 if ratio is None else float(scalar(ratio))
        if r > 0:   # ember's generator (ember.manual_seed), not the ONNX seed attribute
            keep = ember.rand(*x.shape) >= r
            return ember.where(keep, x / (1.0 - r), ember.zeros_like(x)), keep
    return x, ember.ones_like(x).to(ember.bool)


@importer("Dropout", since=7, attrs={"ratio": 0.5}, max_outputs=2)
def dropout7(a, x):
    return x, ember.ones_like(x).to(ember.bool)


@importer("Clip", since=11)
def clip(a, x, lo=None, hi=None):
    if lo is not None:
        x = ember.maximum(x, lo.to(x.dtype))
    if hi is not None:
        x = ember.minimum(x, hi.to(x.dtype))
    return x


@importer("Clip", since=6, attrs={"min": -3.4028234663852886e38, "max": 3.4028234663852886e38})
def clip6(a, x):
    return ember.clamp(x, a["min"], a["max"])


@importer("LeakyRelu", since=6, attrs={"alpha": 0.01})
def leaky_relu(a, x):
    return F.leaky_relu(x, a["alpha"])


@importer("Elu", since=6, attrs={"alpha": 1.0})
def elu(a, x):
    return F.elu(x, a["alpha"])


@importer("Celu", since=12, attrs={"alpha": 1.0})
def celu(a, x):
    return F.celu(x, a["alpha"])


@importer("Selu", since=6, attrs={"alpha": 1.67326319217681884765625,
                                  "gamma": 1.05070102214813232421875})
def selu(a, x):
    return a["gamma"] * ember.where(x > 0, x, a["alpha"] * (ember.exp(x) - 1))


@importer("ThresholdedRelu", since=10, attrs={"alpha": 1.0})
def thresholded_relu(a, x):
    return ember.where(x > a["alpha"], x, ember.zeros_like(x))


@importer("HardSigmoid", since=6, attrs={"alpha": 0.2, "beta": 0.5})
def hard_sigmoid(a, x):
    return ember.clamp(a["alpha"] * x + a["beta"], 0.0, 1.0)


@importer("HardSwish", since=14)
def hard_swish(a, x):
    return x * ember.clamp(x / 6.0 + 0.5, 0.0, 1.0)


@importer("PRelu", since=9)
def prelu(a, x, slope):
    return ember.where(x < 0, x * slope, x)


@importer("Gelu", since=20, attrs={"approximate": "none"},
          check=lambda a, n: None if a["approximate"] in ("none", "tanh") else
          ("approximate", "must be 'none' or 'tanh'"))
def gelu(a, x):
    return F.gelu(x, approximate=a["approximate"])


@importer("Shrink", since=9, attrs={"bias": 0.0, "lambd": 0.5})
def shrink(a, x):
    lam, b = a["lambd"], a["bias"]
    zero = ember.zeros_like(x)
    return ember.where(x < -lam, x + b, ember.where(x > lam, x - b, zero))


@importer("Swish", since=24, attrs={"alpha": 1.0})
def swish(a, x):
    return x * ember.sigmoid(a["alpha"] * x)


@importer("Det", since=11)
def det(a, x):
    return ember.linalg.det(x)


def _window(kind):
    def run(a, size):
        from ember.onnx.importer._util import onnx_np_dtype
        n = int(scalar(size))
        alloc_shape((n,), np.float64, "output")
        denom = n if a["periodic"] else n - 1
        k = np.arange(n, dtype=np.float64)
        w = 2 * np.pi * k / max(denom, 1)
        if kind == "hann":
            v = 0.5 - 0.5 * np.cos(w)
        elif kind == "hamming":
            v = 25 / 46 - (1 - 25 / 46) * np.cos(w)
        else:
            v = 0.42 - 0.5 * np.cos(w) + 0.08 * np.cos(2 * w)
        return ember.tensor(v.astype(onnx_np_dtype(a["output_datatype"])))
    return run


for _op, _k in (("HannWindow", "hann"), ("HammingWindow", "hamming"),
                ("BlackmanWindow", "blackman")):
    importer(_op, since=17, attrs={"output_datatype": 1, "periodic": 1},
             check=_check_cast_like("output_datatype"))(_window(_k))


@importer("SwiGLU", since=28, attrs={"alpha": 1.0})
def swiglu(a, x, y):
    return x * ember.sigmoid(a["alpha"] * x) * y
