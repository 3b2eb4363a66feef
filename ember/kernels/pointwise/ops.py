"""The op vocabulary of pointwise expressions.

Each op has a fixed number of operands (arrays, scalars, or None where the op allows it) followed by
constant parameters, a typing kind, a Numba source template and a NumPy evaluation. Both back ends
compute an op in its *compute type* (float16 is computed in float32, as torch does on the CPU) and
round the result to the op's result dtype.

Typing kinds (p = torch promotion of the operands, see ``promotion``):
  same       result p                         add sub mul pow maximum clamp relu floor ...
  float      result p, or float32 when p is bool/int    div exp log sigmoid gelu lerp ...
  compare    result bool, compared in p       eq ne lt le gt ge
  predicate  result bool                      isnan isinf isfinite
  logical    result bool, operands as bool    logical_and logical_or logical_xor logical_not
  where      result promote(a, b), condition as bool
  cast       result the ``dtype`` parameter
"""
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ember.kernels.constants import GELU_TANH_BETA, GELU_TANH_KAPPA, SELU_ALPHA, SELU_SCALE, SQRT1_2

from .promotion import DEFAULT_FLOAT, category, check_dtype, promote_typed

FLOAT32 = np.dtype(np.float32)
BOOL = np.dtype(bool)


@dataclass(frozen=True)
class Op:
    """One vocabulary entry; see the module docstring."""

    name: str
    arity: int
    kind: str
    numba: Callable  # (K, params, *operand sources) -> source of the result in the compute register
    numpy: Callable  # (out, params, *operands in compute type) -> None, writes out; errors ignored
    params: tuple = ()  # ((name, default), ...); default REQUIRED for a required parameter
    # (numeric defaults of activations live in the op spec, ember/ops/spec/, not here)
    bool_ok: bool = True
    optional: tuple = ()  # operand positions that may be None
    cost: str = "cheap"  # per-element work class: cheap (add, compare), mid (div, sqrt), transcendental


REQUIRED = object()


def opmath(dtype):
    """The dtype a value of ``dtype`` is computed in: float32 for float16, else itself."""
    return FLOAT32 if dtype == np.float16 else dtype


def op_types(op, typed_operands, params):
    """Type one step. ``typed_operands`` holds ``(dtype, priority)`` or None (an omitted operand).

    Returns ``(operand compute dtypes, compute dtype, result dtype)``; raises TypeError when the op
    does not take these dtypes.
    """
    present = [t for t in typed_operands if t is not None]
    if op.kind == "where":
        p = promote_typed(present[1:])
        return [BOOL, p, p], p, p
    if op.kind == "logical":
        return [BOOL] * len(typed_operands), BOOL, BOOL
    p = promote_typed(present)
    if op.kind == "cast":
        return [p], p, check_dtype(params[0])
    if p.kind == "b" and not op.bool_ok:
        raise TypeError(f"pointwise: {op.name} does not take bool operands")
    if op.kind == "float" and category(p) < 2:
        p = DEFAULT_FLOAT
    result = BOOL if op.kind in ("compare", "predicate") else p
    return [None if t is None else p for t in typed_operands], p, result


def _ufunc(uf):
    return lambda out, params, *args: uf(*args, out=out, casting="unsafe")


def _np_sigmoid(out, params, a):
    t = np.asarray(np.negative(a))
    np.exp(t, out=t)
    t += 1
    np.reciprocal(t, out=out, casting="unsafe")


def _np_erf(a):
    from ember.kernels.elementwise import erf
    return erf(a)


def _np_gelu(out, params, a):
    if params[0] == "tanh":
        t = np.asarray(a * a)
        t *= a
        t *= a.dtype.type(GELU_TANH_KAPPA)
        t += a
        t *= a.dtype.type(GELU_TANH_BETA)
        np.tanh(t, out=t)
    else:
        t = _np_erf(np.asarray(a * a.dtype.type(SQRT1_2)))
    t += 1
    t *= a
    t *= a.dtype.type(0.5)
    np.copyto(out, t, casting="unsafe")


def _np_softplus(out, params, a):
    beta, threshold = (a.dtype.type(v) for v in params)
    bx = a * beta
    soft = np.log1p(np.exp(bx)) / beta
    np.copyto(out, np.where(bx > threshold, a, soft), casting="unsafe")


def _np_floor_divide(out, params, a, b):
    if np.asarray(a).dtype.kind != "f":
        np.floor_divide(a, b, out=out, casting="unsafe")
        return
    mod = np.fmod(a, b)
    div = (a - mod) / b
    div = np.asarray(div - ((mod != 0) & ((b < 0) != (mod < 0))))
    floor = np.floor(div)
    floor += (div - floor) > 0.5
    zero = np.copysign(np.zeros_like(div), np.asarray(a / b))
    np.copyto(out, np.where(b == 0, a / b, np.where(div == 0, zero, floor)), casting="unsafe")


def _np_sign(out, params, a):
    a = np.asarray(a)
    if a.dtype.kind == "b":
        np.copyto(out, a, casting="unsafe")
        return
    pos = (a > 0).astype(np.int8)
    pos -= a < 0
    np.copyto(out, pos, casting="unsafe")


def _np_clamp(out, params, a, lo, hi):
    t = np.asarray(a)
    if lo is not None:
        t = np.where((t < lo) | (lo != lo), lo, t)
    if hi is not None:
        t = np.where((t > hi) | (hi != hi), hi, t)
    np.copyto(out, t, casting="unsafe")


def _np_lerp(out, params, a, b, w):
    d = b - a
    np.copyto(out, np.where(np.abs(w) < 0.5, a + w * d, b - d * (1 - w)), casting="unsafe")


def _np_predicate(name):
    uf = getattr(np, name)

    def run(out, params, a):
        if np.asarray(a).dtype.kind == "f":
            uf(a, out=out)
        else:
            out[...] = name == "isfinite"
    return run


def _np_float_or_identity(uf):
    def run(out, params, a):
        if np.asarray(a).dtype.kind == "f":
            uf(a, out=out, casting="unsafe")
        else:
            np.copyto(out, a, casting="unsafe")
    return run


def _nb_float_or_identity(fn):
    return lambda K, params, a: f"np.{fn}({a})" if K.is_float else a


def _clamp_src(K, params, a, lo, hi):
    src = a
    if lo is not None:
        src = f"sel(({src} < {lo}) | ({lo} != {lo}), {lo}, {src})"
    if hi is not None:
        src = f"sel(({src} > {hi}) | ({hi} != {hi}), {hi}, {src})"
    return src


def _sign_src(K, params, a):
    if K.is_bool:
        return a
    return f"sel({a} > {K(0)}, {K(1)}, sel({a} < {K(0)}, {K(-1)}, {K(0)}))"


def _predicate_src(name):
    def src(K, params, a):
        if not K.is_float:
            return "True" if name == "isfinite" else "False"
        return f"({a} != {a})" if name == "isnan" else f"np.{name}({a})"
    return src


def _np_unary_float(uf):
    return (lambda out, params, a: uf(a, out=out, casting="unsafe"))


def _nb_bool_aware(arith, boolean):
    return lambda K, params, a, b: (boolean if K.is_bool else arith).format(a=a, b=b)


def _np_xlog(uf):
    """xlogy-style ops: ``a * uf(b)``, 0 where a == 0, nan where b is nan (torch.xlogy)."""
    def run(out, params, a, b):
        with np.errstate(all="ignore"):
            r = np.asarray(a * uf(b))
        np.copyto(out, np.where(b != b, b, np.where(a == 0, 0, r)), casting="unsafe")
    return run


def _np_erfc(out, params, a):
    a = np.asarray(a)
    r = np.asarray(np.frompyfunc(math.erfc, 1, 1)(a.astype(np.float64))).astype(a.dtype)
    np.copyto(out, r, casting="unsafe")


def _nb_xlog(fn):
    return lambda K, p, a, b: f"sel({b} != {b}, {b}, sel({a} == {K(0)}, {K(0)}, {a} * np.{fn}({b})))"


_OPS = [
    Op("add", 2, "same", _nb_bool_aware("{a} + {b}", "({a} | {b})"), _ufunc(np.add)),
    Op("sub", 2, "same", lambda K, p, a, b: f"{a} - {b}", _ufunc(np.subtract), bool_ok=False),
    Op("mul", 2, "same", _nb_bool_aware("{a} * {b}", "({a} & {b})"), _ufunc(np.multiply)),
    Op("div", 2, "float", lambda K, p, a, b: f"{a} / {b}", _ufunc(np.divide), cost="mid"),
    Op("floor_divide", 2, "same", lambda K, p, a, b: f"floordiv_float({a}, {b})" if K.is_float else f"{a} // {b}",
       (_np_floor_divide), bool_ok=False, cost="mid"),
    Op("remainder", 2, "same", lambda K, p, a, b: f"np.remainder({a}, {b})" if K.is_float else f"{a} % {b}",
       _ufunc(np.remainder), bool_ok=False, cost="mid"),
    Op("pow", 2, "same", lambda K, p, a, b: f"{a} ** {b}", _ufunc(np.power), bool_ok=False,
       cost="transcendental"),
    Op("maximum", 2, "same", lambda K, p, a, b: f"sel(({a} > {b}) | ({a} != {a}), {a}, {b})", _ufunc(np.maximum)),
    Op("minimum", 2, "same", lambda K, p, a, b: f"sel(({a} < {b}) | ({a} != {a}), {a}, {b})", _ufunc(np.minimum)),
    Op("neg", 1, "same", lambda K, p, a: f"-{a}", _ufunc(np.negative), bool_ok=False),
    Op("abs", 1, "same", lambda K, p, a: a if K.is_bool else f"abs({a})", _ufunc(np.abs)),
    Op("sign", 1, "same", _sign_src, _np_sign),
    Op("reciprocal", 1, "float", lambda K, p, a: f"{K(1)} / {a}", _ufunc(np.reciprocal), cost="mid"),
    Op("exp", 1, "float", lambda K, p, a: f"{K.fn('exp')}({a})", _np_unary_float(np.exp),
       cost="transcendental"),
    Op("exp2", 1, "float", lambda K, p, a: f"np.exp2({a})", _np_unary_float(np.exp2), cost="transcendental"),
    Op("expm1", 1, "float", lambda K, p, a: f"np.expm1({a})", _np_unary_float(np.expm1),
       cost="transcendental"),
    Op("log", 1, "float", lambda K, p, a: f"np.log({a})", _np_unary_float(np.log), cost="transcendental"),
    Op("log2", 1, "float", lambda K, p, a: f"np.log2({a})", _np_unary_float(np.log2), cost="transcendental"),
    Op("log1p", 1, "float", lambda K, p, a: f"np.log1p({a})", _np_unary_float(np.log1p),
       cost="transcendental"),
    Op("sqrt", 1, "float", lambda K, p, a: f"np.sqrt({a})", _np_unary_float(np.sqrt), cost="mid"),
    Op("rsqrt", 1, "float", lambda K, p, a: f"{K(1)} / np.sqrt({a})",
       (lambda out, p, a: np.divide(1, np.sqrt(a), out=out, casting="unsafe")), cost="mid"),
    Op("sin", 1, "float", lambda K, p, a: f"np.sin({a})", _np_unary_float(np.sin), cost="transcendental"),
    Op("cos", 1, "float", lambda K, p, a: f"np.cos({a})", _np_unary_float(np.cos), cost="transcendental"),
    Op("tan", 1, "float", lambda K, p, a: f"np.tan({a})", _np_unary_float(np.tan), cost="transcendental"),
    Op("tanh", 1, "float", lambda K, p, a: f"{K.fn('tanh')}({a})", _np_unary_float(np.tanh),
       cost="transcendental"),
    Op("erf", 1, "float", lambda K, p, a: f"{K.fn('erf')}({a})",
       lambda out, p, a: np.copyto(out, _np_erf(np.asarray(a)), casting="unsafe"), cost="transcendental"),
    Op("sigmoid", 1, "float", lambda K, p, a: f"{K(1)} / ({K(1)} + {K.fn('exp')}(-{a}))", (_np_sigmoid),
       cost="transcendental"),
    Op("silu", 1, "float", lambda K, p, a: f"{a} / ({K(1)} + {K.fn('exp')}(-{a}))",
       (lambda out, p, a: (_np_sigmoid(out, p, a), np.multiply(out, a, out=out, casting="unsafe"))),
       cost="transcendental"),
    Op("relu", 1, "same", lambda K, p, a: f"sel({a} <= {K(0)}, {K(0)}, {a})" if not K.is_bool else a,
       (lambda out, p, a: np.copyto(out, np.where(a <= 0, np.zeros((), np.asarray(a).dtype), a),
                                             casting="unsafe"))),
    Op("leaky_relu", 1, "float", lambda K, p, a: f"sel({a} > {K(0)}, {a}, {a} * {K(p[0])})",
       (lambda out, p, a: np.copyto(out, np.where(a > 0, a, a * a.dtype.type(p[0])), casting="unsafe")),
       params=(("negative_slope", REQUIRED),)),
    Op("elu", 1, "float", lambda K, p, a: f"sel({a} > {K(0)}, {a}, {K(p[0])} * np.expm1({a}))",
       (lambda out, p, a: np.copyto(out, np.where(a > 0, a, a.dtype.type(p[0]) * np.expm1(a)),
                                             casting="unsafe")),
       params=(("alpha", REQUIRED),), cost="transcendental"),
    Op("selu", 1, "float",
       lambda K, p, a: f"{K(SELU_SCALE)} * sel({a} > {K(0)}, {a}, {K(SELU_ALPHA)} * np.expm1({a}))",
       (lambda out, p, a: np.copyto(
           out, a.dtype.type(SELU_SCALE) * np.where(a > 0, a, a.dtype.type(SELU_ALPHA) * np.expm1(a)),
           casting="unsafe")), cost="transcendental"),
    Op("gelu", 1, "float",
       lambda K, p, a: (f"{K(0.5)} * {a} * ({K(1)} + {K.fn('tanh')}({K(GELU_TANH_BETA)} * "
                        f"({a} + {K(GELU_TANH_KAPPA)} * {a} * {a} * {a})))") if p[0] == "tanh"
       else f"{K(0.5)} * {a} * ({K(1)} + {K.fn('erf')}({a} * {K(SQRT1_2)}))",
       (_np_gelu), params=(("approximate", "none"),), cost="transcendental"),
    Op("softplus", 1, "float",
       lambda K, p, a: f"sel({a} * {K(p[0])} > {K(p[1])}, {a}, np.log1p({K.fn('exp')}({a} * {K(p[0])})) / {K(p[0])})",
       (_np_softplus), params=(("beta", REQUIRED), ("threshold", REQUIRED)), cost="transcendental"),
    Op("hardtanh", 1, "same",
       lambda K, p, a: _clamp_src(K, p, a, K(p[0]), K(p[1])),
       lambda out, p, a: _np_clamp(out, p, a, a.dtype.type(p[0]), a.dtype.type(p[1])),
       params=(("min_val", REQUIRED), ("max_val", REQUIRED)), bool_ok=False),
    Op("clamp", 3, "same", _clamp_src, _np_clamp, optional=(1, 2), bool_ok=False),
    Op("where", 3, "where", lambda K, p, c, a, b: f"sel({c}, {a}, {b})",
       lambda out, p, c, a, b: np.copyto(out, np.where(c, a, b), casting="unsafe")),
    Op("lerp", 3, "float", lambda K, p, a, b, w: f"sel(abs({w}) < {K(0.5)}, {a} + {w} * ({b} - {a}), "
                                                 f"{b} - ({b} - {a}) * ({K(1)} - {w}))",
       (_np_lerp)),
    Op("floor", 1, "same", _nb_float_or_identity("floor"), _np_float_or_identity(np.floor)),
    Op("ceil", 1, "same", _nb_float_or_identity("ceil"), _np_float_or_identity(np.ceil)),
    Op("trunc", 1, "same", _nb_float_or_identity("trunc"), _np_float_or_identity(np.trunc)),
    Op("round", 1, "same", _nb_float_or_identity("rint"), _np_float_or_identity(np.rint)),
    Op("eq", 2, "compare", lambda K, p, a, b: f"({a} == {b})", _ufunc(np.equal)),
    Op("ne", 2, "compare", lambda K, p, a, b: f"({a} != {b})", _ufunc(np.not_equal)),
    Op("lt", 2, "compare", lambda K, p, a, b: f"({a} < {b})", _ufunc(np.less)),
    Op("le", 2, "compare", lambda K, p, a, b: f"({a} <= {b})", _ufunc(np.less_equal)),
    Op("gt", 2, "compare", lambda K, p, a, b: f"({a} > {b})", _ufunc(np.greater)),
    Op("ge", 2, "compare", lambda K, p, a, b: f"({a} >= {b})", _ufunc(np.greater_equal)),
    Op("logical_and", 2, "logical", lambda K, p, a, b: f"({a} & {b})", _ufunc(np.logical_and)),
    Op("logical_or", 2, "logical", lambda K, p, a, b: f"({a} | {b})", _ufunc(np.logical_or)),
    Op("logical_xor", 2, "logical", lambda K, p, a, b: f"({a} != {b})", _ufunc(np.logical_xor)),
    Op("logical_not", 1, "logical", lambda K, p, a: f"(not {a})", _ufunc(np.logical_not)),
    Op("isnan", 1, "predicate", _predicate_src("isnan"), _np_predicate("isnan")),
    Op("isinf", 1, "predicate", _predicate_src("isinf"), _np_predicate("isinf")),
    Op("isfinite", 1, "predicate", _predicate_src("isfinite"), _np_predicate("isfinite")),
    Op("cast", 1, "cast", lambda K, p, a: a, lambda out, p, a: np.copyto(out, a, casting="unsafe"),
       params=(("dtype", REQUIRED),)),
    # special functions
    Op("xlogy", 2, "float", _nb_xlog("log"), _np_xlog(np.log), cost="transcendental"),
    Op("special_xlog1py", 2, "float", _nb_xlog("log1p"), _np_xlog(np.log1p), cost="transcendental"),
    Op("erfc", 1, "float", lambda K, p, a: f"math.erfc({a})", _np_erfc, cost="transcendental"),
    Op("acosh", 1, "float", lambda K, p, a: f"np.arccosh({a})", _np_unary_float(np.arccosh),
       cost="transcendental"),
    Op("asinh", 1, "float", lambda K, p, a: f"np.arcsinh({a})", _np_unary_float(np.arcsinh),
       cost="transcendental"),
    Op("atanh", 1, "float", lambda K, p, a: f"np.arctanh({a})", _np_unary_float(np.arctanh),
       cost="transcendental"),
    Op("hypot", 2, "float", lambda K, p, a, b: f"np.hypot({a}, {b})", _ufunc(np.hypot), cost="mid"),
    Op("copysign", 2, "float", lambda K, p, a, b: f"np.copysign({a}, {b})", _ufunc(np.copysign)),
]

OPS = {op.name: op for op in _OPS}
