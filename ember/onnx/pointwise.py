"""Pointwise ops in ONNX: one table, and the evaluator of a spec op's pointwise form.

A spec op with a ``pointwise:`` entry (``ember/ops/spec/``) is exported by evaluating its pointwise
form (``ember.autograd._generated.pointwise.FORWARD``, the same steps the fused kernels run) on
ONNX values: every step is a pointwise-engine vocabulary op (``ember/kernels/pointwise/ops.py``),
typed exactly as the engine types it (``expr.infer_typed``: torch promotion per step, float16
computed in float32 and rounded per step), and lowered by its row in ``VOCABULARY``: the
native ONNX op with its attributes where ONNX has one (``leaky_relu`` -> ``LeakyRelu(alpha)``,
``gelu`` -> ``Gelu`` from opset 20), else a short composition of ONNX ops. So an op's math is
written in its spec entry and engine row only; this table says how each engine op is spelled in
ONNX, as ``ops.py`` says it for Numba and NumPy. An engine row written as ``math`` that the
table does not list (``hardshrink``) is its ``math`` evaluated on ONNX values (``_from_math``),
so a new such row exports with no entry here.

``NATIVE`` maps the spec ops that are pointwise but not engine ops (``asin``, ``hardswish``,
...) to their ONNX op.
"""
import math

import numpy as np

from ember.kernels.constants import GELU_TANH_BETA, GELU_TANH_KAPPA, SELU_ALPHA, SELU_SCALE, SQRT1_2
from ember.onnx.context import Dyn, SymbolicError

__all__ = ["VOCABULARY", "NATIVE", "export_pointwise", "pointwise_ops"]

_BOOL = np.dtype(bool)
_F64 = np.dtype(np.float64)


class _E:
    """What a table row builds with: ``g``, the compute dtype ``dt`` of the step and the names of
    its operands that are constants (``consts``)."""

    __slots__ = ("g", "dt", "consts")

    def __init__(self, g, dt, consts=()):
        self.g, self.dt, self.consts = g, dt, frozenset(consts)

    def op(self, op_type, *xs, **attrs):
        return self.g.op(op_type, *xs, **attrs)

    def c(self, v):
        """A constant of the compute dtype."""
        return self.g.const(np.array(v, self.dt))

    @property
    def is_float(self):
        return self.dt.kind == "f"


# ---------------------------------------------------------------------------------- rows
# row(e, params, *operands) -> ONNX name; operands are ONNX names in the compute dtype (None
# for an omitted optional operand). Compare, predicate and logical rows return bool values.
def _native(op_type, **attrs):
    def row(e, p, *xs):
        return e.op(op_type, *xs, **{k: f(p) for k, f in attrs.items()})
    row.__name__ = f"native_{op_type}"
    return row


def _bool_or(op_type, bool_op):
    """``op_type``; on bool operands ``bool_op`` (ONNX arithmetic takes no bool)."""
    def row(e, p, *xs):
        return e.op(bool_op if e.dt == _BOOL else op_type, *xs)
    return row


def _float_or_identity(op_type):
    def row(e, p, x):
        return e.op(op_type, x) if e.is_float else x
    return row


def _trunc(e, p, x):
    if not e.is_float:
        return x
    return e.op("Mul", e.op("Sign", x), e.op("Floor", e.op("Abs", x)))


def _floor_divide(e, p, a, b):
    if e.is_float:
        return e.op("Floor", e.op("Div", a, b))
    return e.op("Div", e.op("Sub", a, e.op("Mod", a, b, fmod=0)), b)


def _remainder(e, p, a, b):
    """Python's modulo (the sign of ``b``): C's exact fmod, moved by ``b`` where the signs differ
    (``a - floor(a / b) * b`` rounds: 20.5 mod 0.001 would be -2e-6, not 0.000999)."""
    if not e.is_float:
        return e.op("Mod", a, b, fmod=0)
    r = e.op("Mod", a, b, fmod=1)
    zero = e.c(0.0)
    differ = e.op("And", e.op("Not", e.op("Equal", r, zero)),
                  e.op("Xor", e.op("Less", r, zero), e.op("Less", b, zero)))
    return e.op("Where", differ, e.op("Add", r, b), r)


def _relu(e, p, x):
    if e.is_float:
        return e.op("Relu", x)
    return x if e.dt == _BOOL else e.op("Max", x, e.c(0))


def _gelu(e, p, x):
    if e.g.opset >= 20:
        return e.op("Gelu", x, approximate=p[0])
    if p[0] == "tanh":
        cube = e.op("Mul", e.op("Mul", x, x), x)
        inner = e.op("Mul", e.c(GELU_TANH_BETA), e.op("Add", x, e.op("Mul", e.c(GELU_TANH_KAPPA), cube)))
        s = e.op("Tanh", inner)
    else:
        s = e.op("Erf", e.op("Mul", x, e.c(SQRT1_2)))
    return e.op("Mul", e.op("Mul", e.c(0.5), x), e.op("Add", e.c(1.0), s))


def _softplus(e, p, x):
    beta, threshold = p
    bx = x if beta == 1 else e.op("Mul", x, e.c(beta))
    soft = e.op("Softplus", bx)
    if beta != 1:
        soft = e.op("Div", soft, e.c(beta))
    return e.op("Where", e.op("Greater", bx, e.c(threshold)), x, soft)


def _clamp(e, p, x, lo, hi):
    """Torch's clamp: a NaN bound gives NaN. Constant bounds (0-d constants) are ``Clip``."""
    if e.is_float and all(b is None or b in e.consts for b in (lo, hi)):
        return e.op("Clip", x, lo, hi)
    if lo is not None:
        below = e.op("Less", x, lo)
        if e.is_float:
            below = e.op("Or", below, e.op("IsNaN", lo))
        x = e.op("Where", below, lo, x)
    if hi is not None:
        above = e.op("Greater", x, hi)
        if e.is_float:
            above = e.op("Or", above, e.op("IsNaN", hi))
        x = e.op("Where", above, hi, x)
    return x


def _hardtanh(e, p, x):
    lo, hi = e.c(p[0]), e.c(p[1])
    return _clamp(_E(e.g, e.dt, (lo, hi)), p, x, lo, hi)


def _lerp(e, p, a, b, w):
    d = e.op("Sub", b, a)
    lo = e.op("Add", a, e.op("Mul", w, d))
    hi = e.op("Sub", b, e.op("Mul", d, e.op("Sub", e.c(1), w)))
    return e.op("Where", e.op("Less", e.op("Abs", w), e.c(0.5)), lo, hi)


def _ordered(op_type):
    """Less/Greater/...: ONNX orders no bools, so they compare as uint8."""
    def row(e, p, a, b):
        if e.dt == _BOOL:
            a, b = e.g.cast(a, np.uint8), e.g.cast(b, np.uint8)
        return e.op(op_type, a, b)
    return row


def _predicate(name):
    def row(e, p, x):
        if not e.is_float:  # integers are never NaN or infinite
            same = e.op("Equal", x, x)
            return same if name == "isfinite" else e.op("Not", same)
        if name == "isfinite":
            return e.op("Not", e.op("Or", e.op("IsNaN", x), e.op("IsInf", x)))
        return e.op("IsNaN" if name == "isnan" else "IsInf", x)
    return row


def _xlog(shift):
    def row(e, p, a, b):
        arg = b if not shift else e.op("Add", b, e.c(1.0))
        prod = e.op("Mul", a, e.op("Log", arg))
        res = e.op("Where", e.op("Equal", a, e.c(0.0)), e.c(0.0), prod)
        return e.op("Where", e.op("IsNaN", b), b, res)
    return row


def _inverse_hyperbolic(name):
    def row(e, p, x):
        if e.dt != _F64:
            return e.op(name.capitalize(), x)
        # onnxruntime implements Acosh/Asinh/Atanh in float32 only: their log forms in float64
        one = e.c(1.0)
        if name == "acosh":
            return e.op("Log", e.op("Add", x, e.op("Sqrt", e.op("Sub", e.op("Mul", x, x), one))))
        if name == "asinh":
            mag = e.op("Log", e.op("Add", e.op("Abs", x), e.op("Sqrt", e.op("Add", e.op("Mul", x, x), one))))
            return e.op("Mul", e.op("Sign", x), mag)
        ratio = e.op("Div", e.op("Add", one, x), e.op("Sub", one, x))
        return e.op("Mul", e.op("Log", ratio), e.c(0.5))
    return row


def _hypot(e, p, a, b):
    """max * sqrt(1 + (min/max)^2): no overflow of a*a; inf when either is infinite."""
    a, b = e.op("Abs", a), e.op("Abs", b)
    hi, lo = e.op("Max", a, b), e.op("Min", a, b)
    safe = e.op("Where", e.op("Equal", hi, e.c(0.0)), e.c(1.0), hi)
    r = e.op("Div", lo, safe)
    out = e.op("Mul", hi, e.op("Sqrt", e.op("Add", e.c(1.0), e.op("Mul", r, r))))
    inf = e.op("Or", e.op("IsInf", a), e.op("IsInf", b))
    return e.op("Where", inf, e.c(math.inf), out)


def _copysign(e, p, a, b):
    """|a| with b's sign; -0.0 counts as negative (1 / -0.0 < 0). ONNX cannot read the sign bit
    of a NaN, so a NaN ``b`` counts as positive."""
    zero = e.c(0.0)
    neg = e.op("Or", e.op("Less", b, zero),
               e.op("And", e.op("Equal", b, zero), e.op("Less", e.op("Reciprocal", b), zero)))
    mag = e.op("Abs", a)
    return e.op("Where", neg, e.op("Neg", mag), mag)


VOCABULARY = {
    "add": _bool_or("Add", "Or"),
    "sub": _native("Sub"),
    "mul": _bool_or("Mul", "And"),
    "div": _native("Div"),
    "floor_divide": _floor_divide,
    "remainder": _remainder,
    "pow": _native("Pow"),
    "maximum": _bool_or("Max", "Or"),
    "minimum": _bool_or("Min", "And"),
    "neg": _native("Neg"),
    "abs": lambda e, p, x: x if e.dt == _BOOL else e.op("Abs", x),
    "sign": lambda e, p, x: x if e.dt == _BOOL else e.op("Sign", x),
    "reciprocal": _native("Reciprocal"),
    "exp": _native("Exp"),
    "exp2": lambda e, p, x: e.op("Pow", e.c(2.0), x),
    "expm1": lambda e, p, x: e.op("Sub", e.op("Exp", x), e.c(1.0)),
    "log": _native("Log"),
    "log2": lambda e, p, x: e.op("Div", e.op("Log", x), e.c(math.log(2.0))),
    "log1p": lambda e, p, x: e.op("Log", e.op("Add", x, e.c(1.0))),
    "sqrt": _native("Sqrt"),
    "rsqrt": lambda e, p, x: e.op("Reciprocal", e.op("Sqrt", x)),
    "sin": _native("Sin"),
    "cos": _native("Cos"),
    "tan": _native("Tan"),
    "tanh": _native("Tanh"),
    "erf": _native("Erf"),
    "sigmoid": _native("Sigmoid"),
    "silu": lambda e, p, x: e.op("Mul", x, e.op("Sigmoid", x)),
    "relu": _relu,
    "leaky_relu": _native("LeakyRelu", alpha=lambda p: float(p[0])),
    "elu": _native("Elu", alpha=lambda p: float(p[0])),
    "selu": _native("Selu", alpha=lambda p: SELU_ALPHA, gamma=lambda p: SELU_SCALE),
    "gelu": _gelu,
    "softplus": _softplus,
    "hardtanh": _hardtanh,
    "clamp": _clamp,
    "where": _native("Where"),
    "lerp": _lerp,
    "floor": _float_or_identity("Floor"),
    "ceil": _float_or_identity("Ceil"),
    "trunc": _trunc,
    "round": _float_or_identity("Round"),   # half to even, as NumPy's rint and torch
    "eq": _native("Equal"),
    "ne": lambda e, p, a, b: e.op("Not", e.op("Equal", a, b)),
    "lt": _ordered("Less"),
    "le": _ordered("LessOrEqual"),
    "gt": _ordered("Greater"),
    "ge": _ordered("GreaterOrEqual"),
    "logical_and": _native("And"),
    "logical_or": _native("Or"),
    "logical_xor": _native("Xor"),
    "logical_not": _native("Not"),
    "isnan": _predicate("isnan"),
    "isinf": _predicate("isinf"),
    "isfinite": _predicate("isfinite"),
    "cast": lambda e, p, x: x,   # the step's result dtype is the cast's (see _evaluate)
    "xlogy": _xlog(False),
    "special_xlog1py": _xlog(True),
    "erfc": lambda e, p, x: e.op("Sub", e.c(1.0), e.op("Erf", x)),
    "acosh": _inverse_hyperbolic("acosh"),
    "asinh": _inverse_hyperbolic("asinh"),
    "atanh": _inverse_hyperbolic("atanh"),
    "hypot": _hypot,
    "copysign": _copysign,
}

# pointwise spec ops outside the engine's vocabulary that ONNX has as one op: (op, attributes)
NATIVE = {
    "asin": ("Asin", {}), "acos": ("Acos", {}), "atan": ("Atan", {}), "sinh": ("Sinh", {}),
    "cosh": ("Cosh", {}), "softsign": ("Softsign", {}), "hardswish": ("HardSwish", {}),
    "hardsigmoid": ("HardSigmoid", {"alpha": 1.0 / 6, "beta": 0.5}),
    "contiguous": ("Identity", {}), "clone": ("Identity", {}), "positive": ("Identity", {}),
}


# ------------------------------------------------------------------- rows derived from ``math``
class _Value:
    """An ONNX value inside an engine row's ``math``: Python's operators emit ONNX ops."""

    __slots__ = ("e", "name")

    def __init__(self, e, name):
        self.e, self.name = e, name

    def __bool__(self):
        raise TypeError("pointwise: an ONNX value has no truth value (an op's math branches on a "
                        "value: use m.where)")

    __hash__ = object.__hash__


def _name(e, x):
    return x.name if isinstance(x, _Value) else e.c(x)


def _value_op(op_type, reverse=False, negate=False):
    def op(self, other):
        a, b = self.name, _name(self.e, other)
        out = self.e.op(op_type, *((b, a) if reverse else (a, b)))
        return _Value(self.e, self.e.op("Not", out) if negate else out)
    return op


for _dunder, _op_type in (("add", "Add"), ("sub", "Sub"), ("mul", "Mul"), ("truediv", "Div"),
                          ("lt", "Less"), ("le", "LessOrEqual"), ("gt", "Greater"),
                          ("ge", "GreaterOrEqual"), ("eq", "Equal"), ("and", "And"), ("or", "Or")):
    setattr(_Value, f"__{_dunder}__", _value_op(_op_type))
    if _dunder in ("add", "sub", "mul", "truediv"):
        setattr(_Value, f"__r{_dunder}__", _value_op(_op_type, reverse=True))
_Value.__ne__ = _value_op("Equal", negate=True)
_Value.__neg__ = lambda self: _Value(self.e, self.e.op("Neg", self.name))
del _dunder, _op_type


class _Math:
    """``math``'s namespace on ONNX values (as ``NumbaMath`` / ``NumpyMath`` of the engine):
    ``m.c`` a constant of the step's compute dtype, ``m.where``, and each vocabulary op's row."""

    def __init__(self, e):
        self.e = e
        self.is_float, self.is_bool = e.is_float, e.dt == _BOOL

    def c(self, value):
        return _Value(self.e, self.e.c(value))

    def where(self, cond, a, b):
        return _Value(self.e, self.e.op("Where", cond.name, _name(self.e, a), _name(self.e, b)))

    def __getattr__(self, name):   # exp, log1p, sqrt, erf, abs, ...: the vocabulary op's row
        row = VOCABULARY.get(name)
        if row is None:
            raise AttributeError(f"pointwise: the engine op '{name}' has no ONNX form")
        return lambda a: _Value(self.e, row(self.e, (), a.name))


def _from_math(math_fn):
    """The ONNX row of an engine row written as ``math`` that ``VOCABULARY`` does not spell:
    its ``math`` evaluated on ONNX values (``hardshrink``)."""
    def row(e, p, *xs):
        out = math_fn(_Math(e), p, *(None if x is None else _Value(e, x) for x in xs))
        return out.name if isinstance(out, _Value) else e.c(out)
    return row


# ---------------------------------------------------------------------------------- evaluator
def pointwise_ops():
    """The spec ops exported by their pointwise form: {name: FORWARD function}."""
    from ember.autograd._generated.pointwise import FORWARD
    return FORWARD


_KEYABLE = (bool, int, float, str, type(None), np.dtype)
_INT64_SCALAR = None   # (int64, SCALAR): a traced size's type, set on first use
_PLANS = {}            # lowering key -> _Plan, or ("none",) / ("const", value) (see _lowering)
_MAX_PLANS = 4096


def _operand_type(v):
    from ember.kernels.pointwise.promotion import TENSOR, ZERO_DIM
    return np.dtype(v.dtype), (ZERO_DIM if v.shape == () else TENSOR)


def export_pointwise(g, node, *args, **consts):
    """The ONNX value of spec op ``node.kind`` on ``args`` (ONNX names, traced sizes as ``Dyn``,
    Python scalars, None), evaluating its pointwise form step by step.

    Returns None when the form does not cover these constants (``round(decimals=2)``); raises
    SymbolicError when a step's types are not the engine's or a step has no row.

    The typed form depends only on the op, its operands' types, the constants and the result
    dtype, so it is built once per such key (``_lowering``) and replayed on the names of each
    node (all of a network's float32 ``relu`` nodes share one)."""
    from ember.jit.ir import Value
    global _INT64_SCALAR
    op = node.kind
    out_dt = np.dtype(node.outputs[0].dtype)
    if op == "to" and consts.get("dtype") is None:
        consts["dtype"] = out_dt   # to(device) / to(other): the dtype the trace recorded
    names, typed, operands = [], [], []
    keyable = True
    for i, a in enumerate(args):
        if isinstance(a, str):
            names.append(a)
            if isinstance(node.args[i], Value):
                typed.append(_operand_type(node.args[i]))
            else:
                from ember.kernels.pointwise.promotion import SCALAR
                typed.append((g.dtype(a), SCALAR))
            operands.append(f"a{len(names) - 1}")
        elif isinstance(a, Dyn):
            names.append(a.name)
            if _INT64_SCALAR is None:
                from ember.kernels.pointwise.promotion import SCALAR
                _INT64_SCALAR = (np.dtype(np.int64), SCALAR)
            typed.append(_INT64_SCALAR)
            operands.append(f"a{len(names) - 1}")
        else:
            if isinstance(a, np.generic):
                a = a.item()
            keyable = keyable and isinstance(a, _KEYABLE)
            operands.append(a)
    key = None
    if keyable and all(isinstance(v, _KEYABLE) for v in consts.values()):
        # constants by type and repr: 1, 1.0 and True differ, and so do 0.0 and -0.0
        key = (op, out_dt, tuple(typed),
               tuple(o if isinstance(o, str) else (type(o), repr(o)) for o in operands),
               tuple(sorted((k, type(v), repr(v)) for k, v in consts.items())))
        lowering = _PLANS.get(key)
    if key is None or lowering is None:
        lowering = _lowering(op, out_dt, typed, operands, consts)
        if key is not None:
            if len(_PLANS) >= _MAX_PLANS:
                _PLANS.clear()
            _PLANS[key] = lowering
    if type(lowering) is tuple:
        return None if lowering[0] == "none" else g.const(np.array(lowering[1], out_dt))
    return lowering.emit(g, names, out_dt)


def _lowering(op, out_dt, typed, operands, consts):
    """What ``export_pointwise`` emits for op ``op`` on operands of types ``typed`` (inputs
    ``a0, a1, ...``; constants in ``operands``): a ``_Plan``, ``("none",)`` when the form does
    not cover these constants, or ``("const", value)`` when the form folds to a constant."""
    from ember.kernels.pointwise.expr import Builder, Sym, infer_typed
    b = Builder(tuple(f"a{i}" for i in range(len(typed))))
    try:
        out = pointwise_ops()[op](*(b.value(o) for o in operands), **consts)
    except (TypeError, ValueError) as e:
        raise SymbolicError(f"its pointwise form does not take these arguments: {e}") from None
    if out is None:
        return ("none",)
    if not isinstance(out, Sym):   # a constant result (e.g. an op folded on scalars)
        return ("const", out)
    expr = b.expr(out)
    try:
        typing = infer_typed(expr, typed)
    except TypeError as e:
        raise SymbolicError(str(e)) from None
    return _Plan(op, typing)


def _conversions(frm, to):
    from ember.kernels.pointwise.ops import opmath
    steps = []
    if frm != to:
        steps.append(to)
    if opmath(to) != to:
        steps.append(opmath(to))
    return steps


_NAME, _CONST, _ABSENT = 0, 1, 2


class _Plan:
    """A typed pointwise form resolved for emission: per step its engine op (its row is looked
    up in ``VOCABULARY`` at each emission), the casts of each operand (the engine's: to the
    operand's compute dtype, then its opmath), its constants as arrays of their compute dtype,
    and the dtypes it computes in and returns."""

    __slots__ = ("spec_op", "inputs", "steps", "output")

    def __init__(self, spec_op, typing):
        from ember.kernels.pointwise.ops import opmath
        from ember.kernels.pointwise.promotion import SCALAR
        self.spec_op = spec_op
        known = {}   # value name -> (dtype, whether a Python-scalar input)
        self.inputs = []
        for i, (name, dtype, prio) in enumerate(typing.inputs):
            self.inputs.append((name, i, np.dtype(dtype)))
            known[name] = (dtype, prio == SCALAR)
        self.steps = []
        for step in typing.steps:
            operands = []
            for a, dt in zip(step.operands, step.cast_to):
                if a is None:
                    operands.append((_ABSENT, None, ()))
                elif isinstance(a, str):
                    frm, scalar = known[a]
                    casts = [dt, opmath(dt)] if scalar else _conversions(frm, dt)
                    operands.append((_NAME, a, tuple(np.dtype(t) for t in casts)))
                else:
                    operands.append((_CONST, np.array(np.asarray(a).astype(dt), opmath(dt)), ()))
            compute = np.dtype(opmath(step.ct))
            kind = step.op.kind
            made = _BOOL if kind in ("compare", "predicate", "logical") else \
                (compute if kind != "cast" else np.dtype(opmath(step.cast_to[0])))
            result = np.dtype(step.result)
            self.steps.append((step.name, step.op, step.params, tuple(operands), compute, made,
                               result))
            known[step.name] = (result, False)
        self.output = typing.outputs[0][0]

    def emit(self, g, names, out_dt):
        """The ONNX value of the form on the ONNX ``names`` of its inputs, cast to ``out_dt``."""
        values = {}
        for name, i, dtype in self.inputs:
            onnx = names[i]
            if g.dtype(onnx) is None:   # a traced size
                g.set_type(onnx, dtype)
            values[name] = onnx
        for name, op, params, operands, compute, made, result in self.steps:
            row = VOCABULARY.get(op.name)   # looked up here: the table is read at every export
            if row is None and op.math is not None:
                row = _from_math(op.math)
            if row is None:
                raise SymbolicError(f"the pointwise form of '{self.spec_op}' uses the engine op "
                                    f"'{op.name}', which has no ONNX form")
            xs, consts = [], []
            for what, v, casts in operands:
                if what == _NAME:
                    onnx = values[v]
                    for to in casts:
                        onnx = g.cast(onnx, to)
                    xs.append(onnx)
                elif what == _CONST:
                    xs.append(g.const(v))
                    consts.append(xs[-1])
                else:
                    xs.append(None)
            out = row(_E(g, compute, consts), params, *xs)
            if g.dtype(out) is None:
                g.set_type(out, made)
            values[name] = g.cast(out, result)
        result = g.cast(values[self.output], out_dt)
        return g.op("Identity", result) if result in names else result
