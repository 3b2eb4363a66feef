"""Reverse-mode differentiation of pointwise expressions, in the expression vocabulary itself.

``derive(expr, typing, grads, needs, rules)`` returns the backward ``Expr`` of ``expr``: its inputs are
the forward inputs followed by one incoming gradient ``g<j>`` per output ``j`` with ``grads[j]``
true; its outputs are the gradients of the inputs with ``needs[i]`` true, in order, each cast to
its input's dtype. The forward steps the gradient formulas read are recomputed inside the backward
kernel (nothing but the inputs is stored), and steps no gradient needs are dropped.

``rules`` maps a vocabulary op to its derivative rule, ``rule(grad, *operands, *params,
result=...)`` on symbolic values (``expr.Sym``; constants stay Python values), returning one
contribution per operand: a Sym, ``ZERO`` (the gradient exists and is all zeros: ``sign``,
``floor``, ...) or None (no gradient). ember's rules are the derivative formulas of
``ember/ops/spec/`` evaluated on symbolic values (``ember.autograd._generated.pointwise.RULES``,
generated). ``cast`` needs no rule: its gradient is cast back to the operand's dtype. Only floating values carry gradients, so comparisons, logical ops
and predicates are never differentiated. A float16 step's rule runs on float32 casts of its
operands and its gradient, and its contributions are rounded once to float16, as eager
autograd's float16 backward formulas compute.
"""
import numpy as np

from .expr import Builder, Expr, Sym, infer_types
from .ops import OPS

F16 = np.dtype(np.float16)

__all__ = ["derive", "ZERO", "Backward"]


class _Zero:
    def __repr__(self):
        return "ZERO"


ZERO = _Zero()


class Backward:
    """A derived backward expression: ``expr``, and per forward input ``kinds[i]`` one of
    'grad' (an output of ``expr``), 'zero' (all zeros) or None (no gradient: unneeded, not
    floating, or not reached)."""

    def __init__(self, expr, kinds):
        self.expr = expr
        self.kinds = tuple(kinds)


def derive(expr, typing, grads, needs, rules):
    """The backward of ``expr`` typed by ``typing`` (see the module docstring). Returns a
    ``Backward``; its ``expr`` is None when no needed input gets a nonzero gradient. Raises
    KeyError naming a floating-point step whose op has no rule."""
    dtypes = typing.values
    b = Builder(expr.inputs, "d", expr.steps, dedupe=True)
    steps = b.steps

    def emit(op, *args):
        return b.emit(op, *args).name

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
            rule = rules.get(op)
            if rule is None:
                raise KeyError(f"pointwise derive: no derivative rule for {op!r} (step {name})")
            if dtypes[name] == F16:   # the op's derivative in float32, rounded once (eager's)
                up = [emit("cast", a, "float32") if differentiable(a) else a for a in x]
                contribs = rule(b.value(emit("cast", g, "float32")), *(b.value(a) for a in up),
                                *p, result=b.value(emit("cast", name, "float32")))
                contribs = [emit("cast", c.name, "float16") if isinstance(c, Sym) else c
                            for c in contribs]
            else:
                contribs = [c.name if isinstance(c, Sym) else c for c in
                            rule(b.value(g), *(b.value(a) for a in x), *p, result=b.value(name))]
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
                a = b.bind("cast", a, dtypes[name].name).name  # a distinct output step
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
