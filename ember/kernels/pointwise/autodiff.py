"""Reverse-mode differentiation of pointwise expressions, in the expression vocabulary itself.

``derive(expr, typing, grads, needs)`` returns the backward ``Expr`` of ``expr``: its inputs are
the forward inputs followed by one incoming gradient ``g<j>`` per output ``j`` with ``grads[j]``
true; its outputs are the gradients of the inputs with ``needs[i]`` true, in order, each cast to
its input's dtype. The forward steps the gradient formulas read are recomputed inside the backward
kernel (nothing but the inputs is stored), and steps no gradient needs are dropped.

The rules (``RULES``) are the formulas of ``ember/autograd/derivatives.yaml`` (and the helpers in
``ember/autograd/formulas.py`` they call) written with vocabulary ops; ``result`` is the step's own
output. Ops whose gradient is zero (``sign``, ``floor``, ``ceil``, ``trunc``, ``round``,
``floor_divide``) give ``ZERO``: the gradient exists and is all zeros. Comparisons, logical ops
and predicates are not differentiable (None). Only floating values carry gradients.
"""
import numpy as np

from .expr import Expr, infer_types
from .ops import OPS

__all__ = ["derive", "RULES", "ZERO", "Backward"]

LN2 = 0.6931471805599453
TWO_OVER_SQRT_PI = 1.1283791670955126
SELU_ALPHA, SELU_SCALE = 1.6732632423543772, 1.0507009873554805


class _Zero:
    def __repr__(self):
        return "ZERO"


ZERO = _Zero()


def _const(x):
    return not isinstance(x, str)


# ---------------------------------------------------------------------------------- rules
# rule(e, x, p, y, g) -> one contribution per operand: a name, ZERO or None.
# e(op, *args) emits a step and returns its name; x the operands, p the parameters, y the result.
def _r_add(e, x, p, y, g):
    return [g, g]


def _r_sub(e, x, p, y, g):
    return [g, e("neg", g)]


def _r_mul(e, x, p, y, g):
    return [e("mul", g, x[1]), e("mul", g, x[0])]


def _r_div(e, x, p, y, g):                  # grad / other ; neg(grad) * self / (other * other)
    return [e("div", g, x[1]), e("div", e("mul", e("neg", g), x[0]), e("mul", x[1], x[1]))]


def _r_zero2(e, x, p, y, g):
    return [ZERO, ZERO]


def _r_remainder(e, x, p, y, g):            # grad ; neg(grad) * div(self, other, 'floor')
    return [g, e("mul", e("neg", g), e("floor_divide", x[0], x[1]))]


def _r_pow(e, x, p, y, g):
    a, b = x
    if _const(b):                           # pow_self_grad with a number exponent
        ga = e("mul", g, 0.0) if b == 0 else e("mul", e("mul", g, b), e("pow", a, b - 1))
    else:
        ga = e("mul", e("mul", g, b), e("pow", a, e("sub", b, 1)))
    if _const(a):                           # pow_exponent_grad with a number base
        gb = e("mul", e("mul", g, y), float(np.log(a)) if a > 0 else 0.0)
    else:
        safe = e("where", e("le", a, 0), 1.0, a)
        r = e("mul", e("mul", g, y), e("log", safe))
        gb = e("where", e("logical_and", e("eq", a, 0), e("ge", b, 0)), 0.0, r)
    return [ga, gb]


def _r_maximum(e, x, p, y, g, flip=False):  # ties share the gradient equally
    a, b = x
    first, second = ("lt", "gt") if flip else ("gt", "lt")
    eq = e("eq", a, b)
    half = e("mul", g, 0.5)
    return [e("where", e(first, a, b), g, e("where", eq, half, 0.0)),
            e("where", e(second, a, b), g, e("where", eq, half, 0.0))]


def _r_minimum(e, x, p, y, g):
    return _r_maximum(e, x, p, y, g, flip=True)


def _r_where(e, x, p, y, g):
    return [None, e("where", x[0], g, 0.0), e("where", x[0], 0.0, g)]


def _r_lerp(e, x, p, y, g):                 # grad * (1 - weight) ; grad * weight ; grad * (end - self)
    a, b, w = x
    one_minus = 1 - w if _const(w) else e("sub", 1, w)
    return [e("mul", g, one_minus), e("mul", g, w), e("mul", g, e("sub", b, a))]


def _r_clamp(e, x, p, y, g):
    a, lo, hi = x
    mask = None
    if lo is not None:
        mask = e("ge", a, lo)
    if hi is not None:
        m2 = e("le", a, hi)
        mask = m2 if mask is None else e("logical_and", mask, m2)
    out = [e("where", mask, g, 0.0), None, None]
    if lo is not None and not _const(lo):   # clamp_bound_grad(grad, self, min, max, True)
        m = e("lt", a, lo)
        if hi is not None:
            m = e("logical_and", m, e("lt", lo, hi))
        out[1] = e("where", m, g, 0.0)
    if hi is not None and not _const(hi):   # clamp_bound_grad(grad, self, max, min, False)
        m = e("gt", a, hi)
        if lo is not None:
            m = e("logical_or", m, e("lt", hi, lo))
        out[2] = e("where", m, g, 0.0)
    return out


def _r_unary(fn):
    def rule(e, x, p, y, g):
        return [fn(e, x[0], p, y, g)]
    return rule


def _gelu(e, a, p, y, g):
    if p[0] == "tanh":
        k = float(np.sqrt(2.0 / np.pi))
        x3 = e("mul", e("mul", a, a), a)
        t = e("tanh", e("mul", e("add", a, e("mul", x3, 0.044715)), k))
        dinner = e("mul", e("add", e("mul", e("mul", a, a), 3 * 0.044715), 1.0), k)
        left = e("mul", e("add", t, 1.0), 0.5)
        right = e("mul", e("mul", e("mul", a, 0.5), e("sub", 1.0, e("mul", t, t))), dinner)
        return e("mul", g, e("add", left, right))
    cdf = e("mul", e("add", e("erf", e("mul", a, float(1 / np.sqrt(2.0)))), 1.0), 0.5)
    pdf = e("mul", e("exp", e("mul", e("mul", a, a), -0.5)), float(1 / np.sqrt(2 * np.pi)))
    return e("mul", g, e("add", cdf, e("mul", a, pdf)))


def _elu(alpha, scale, e, a, g):            # elu_grad(grad, self, alpha, scale)
    neg = e("mul", e("exp", e("minimum", a, 0.0)), alpha * scale)
    return e("mul", g, e("where", e("gt", a, 0), float(scale), neg))


def _silu(e, a, p, y, g):                   # grad * sigmoid(x) * (1 + x * (1 - sigmoid(x)))
    s = e("sigmoid", a)
    return e("mul", e("mul", g, s), e("add", 1, e("mul", a, e("sub", 1, s))))


def _softplus(e, a, p, y, g):
    z = e("mul", a, p[0])
    return e("where", e("gt", z, p[1]), g, e("mul", g, e("sigmoid", z)))


def _none(arity):
    return lambda e, x, p, y, g: [None] * arity


def _zero(arity):
    return lambda e, x, p, y, g: [ZERO] * arity


U = _r_unary
RULES = {
    "add": _r_add, "sub": _r_sub, "mul": _r_mul, "div": _r_div, "floor_divide": _r_zero2,
    "remainder": _r_remainder, "pow": _r_pow, "maximum": _r_maximum, "minimum": _r_minimum,
    "where": _r_where, "lerp": _r_lerp, "clamp": _r_clamp,
    "neg": U(lambda e, a, p, y, g: e("neg", g)),
    "abs": U(lambda e, a, p, y, g: e("mul", g, e("sign", a))),
    "reciprocal": U(lambda e, a, p, y, g: e("mul", e("mul", e("neg", g), y), y)),
    "exp": U(lambda e, a, p, y, g: e("mul", g, y)),
    "exp2": U(lambda e, a, p, y, g: e("mul", e("mul", g, y), LN2)),
    "expm1": U(lambda e, a, p, y, g: e("mul", g, e("add", y, 1))),
    "log": U(lambda e, a, p, y, g: e("div", g, a)),
    "log2": U(lambda e, a, p, y, g: e("div", g, e("mul", a, LN2))),
    "log1p": U(lambda e, a, p, y, g: e("div", g, e("add", a, 1))),
    "sqrt": U(lambda e, a, p, y, g: e("div", g, e("mul", y, 2))),
    "rsqrt": U(lambda e, a, p, y, g: e("mul", e("mul", e("mul", e("mul", g, y), y), y), -0.5)),
    "sin": U(lambda e, a, p, y, g: e("mul", g, e("cos", a))),
    "cos": U(lambda e, a, p, y, g: e("mul", e("neg", g), e("sin", a))),
    "tan": U(lambda e, a, p, y, g: e("mul", g, e("add", e("mul", y, y), 1))),
    "tanh": U(lambda e, a, p, y, g: e("mul", g, e("sub", 1, e("mul", y, y)))),
    "sigmoid": U(lambda e, a, p, y, g: e("mul", e("mul", g, y), e("sub", 1, y))),
    "erf": U(lambda e, a, p, y, g: e("mul", e("mul", g, e("exp", e("neg", e("mul", a, a)))),
                                     TWO_OVER_SQRT_PI)),
    "relu": U(lambda e, a, p, y, g: e("where", e("gt", y, 0), g, 0.0)),
    "leaky_relu": U(lambda e, a, p, y, g: e("where", e("gt", a, 0), g, e("mul", g, p[0]))),
    "elu": U(lambda e, a, p, y, g: _elu(p[0], 1.0, e, a, g)),
    "selu": U(lambda e, a, p, y, g: _elu(SELU_ALPHA, SELU_SCALE, e, a, g)),
    "gelu": U(_gelu), "silu": U(_silu), "softplus": U(_softplus),
    "hardtanh": U(lambda e, a, p, y, g: e("where", e("logical_and", e("gt", a, p[0]),
                                                     e("lt", a, p[1])), g, 0.0)),
    "sign": _zero(1), "floor": _zero(1), "ceil": _zero(1), "trunc": _zero(1), "round": _zero(1),
    "eq": _none(2), "ne": _none(2), "lt": _none(2), "le": _none(2), "gt": _none(2), "ge": _none(2),
    "logical_and": _none(2), "logical_or": _none(2), "logical_xor": _none(2),
    "logical_not": _none(1), "isnan": _none(1), "isinf": _none(1), "isfinite": _none(1),
    # cast: the gradient goes back to the operand's dtype (handled in derive)
}


class Backward:
    """A derived backward expression: ``expr``, and per forward input ``kinds[i]`` one of
    'grad' (an output of ``expr``), 'zero' (all zeros) or None (no gradient: unneeded, not
    floating, or not reached)."""

    def __init__(self, expr, kinds):
        self.expr = expr
        self.kinds = tuple(kinds)


def derive(expr, typing, grads, needs):
    """The backward of ``expr`` typed by ``typing`` (see the module docstring). Returns a
    ``Backward``; its ``expr`` is None when no needed input gets a nonzero gradient."""
    dtypes = typing.values
    steps = list(expr.steps)
    counter = [0]

    def emit(op, *args):
        name = f"d{counter[0]}"
        counter[0] += 1
        steps.append((name, op, args))
        return name

    def differentiable(x):
        return isinstance(x, str) and dtypes[x].kind == "f"

    adj = {}

    def accumulate(x, c):
        if c is None or not differentiable(x):
            return
        prev = adj.get(x)
        if c is ZERO:
            adj.setdefault(x, ZERO)
        elif prev is None or prev is ZERO:
            adj[x] = c
        else:
            adj[x] = emit("add", prev, c)

    g_inputs = []
    for j, (out, present) in enumerate(zip(expr.outputs, grads)):
        if present and dtypes[out].kind == "f":
            g_inputs.append(f"g{j}")
            accumulate(out, f"g{j}")
    for name, op, args in reversed(expr.steps):
        g = adj.get(name)
        if g is None:
            continue
        arity = OPS[op].arity
        x, p = args[:arity], args[arity:]
        if g is ZERO:
            contribs = [ZERO] * arity
        elif op == "cast":
            contribs = [emit("cast", g, dtypes[x[0]].name) if differentiable(x[0]) else None]
        else:
            contribs = RULES[op](emit, x, p, name, g)
        for xi, c in zip(x, contribs):
            accumulate(xi, c)
    kinds, outs = [], []
    for name, need in zip(expr.inputs, needs):
        a = adj.get(name) if need else None
        if a is None:
            kinds.append(None)
        elif a is ZERO:
            kinds.append("zero")
        else:
            kinds.append("grad")
            if a in outs or a in expr.inputs or a in g_inputs:
                a = emit("cast", a, dtypes[name].name)  # a distinct output step
            outs.append(a)
    if not outs:
        return Backward(None, kinds)
    inputs = tuple(expr.inputs) + tuple(g_inputs)
    bwd = _dce(Expr(inputs, tuple(steps), tuple(outs)))
    # gradients go back in their input's dtype
    in_types = [_in_type(dt, pr) for _, dt, pr in typing.inputs] + [typing.values[expr.outputs[int(g[1:])]]
                                                   for g in g_inputs]
    btyping = infer_types(bwd, in_types)
    fixed = list(bwd.steps)
    final = []
    for o, (name, _) in zip(bwd.outputs, ((n, k) for n, k in zip(expr.inputs, kinds) if k == "grad")):
        want = dtypes[name]
        if btyping.values[o] != want:
            c = f"c_{o}"
            fixed.append((c, "cast", (o, want.name)))
            o = c
        final.append(o)
    return Backward(Expr(inputs, tuple(fixed), tuple(final)), kinds)


def _in_type(dt, prio):
    """An ``in_types`` entry with the priority of a typed input (tensor, 0-d, Python scalar)."""
    if prio == 2:
        return dt
    if prio == 1:
        return dt.type(0)
    return {"b": bool, "f": float}.get(dt.kind, int)


def _dce(expr):
    need = set(expr.outputs)
    keep = []
    for step in reversed(expr.steps):
        if step[0] in need:
            keep.append(step)
            need.update(a for a in step[2] if isinstance(a, str))
    return Expr(expr.inputs, tuple(reversed(keep)), expr.outputs)
