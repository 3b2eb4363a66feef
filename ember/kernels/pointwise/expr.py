"""Pointwise expressions: a let-binding (SSA) list of vocabulary ops over named inputs, and typing."""
from dataclasses import dataclass

import numpy as np

from .ops import OPS, REQUIRED, op_types
from .promotion import SCALAR, typed_operand

_CONST_TYPES = (bool, int, float, type(None))


def _is_const(arg):
    return isinstance(arg, _CONST_TYPES)


@dataclass(frozen=True)
class Expr:
    """An elementwise function of named inputs, as SSA steps ``(name, op, args)``.

    ``args`` lists the op's operands (names of inputs or earlier steps, or Python bool/int/float
    constants, or None where the op allows it) followed by its constant parameters (defaults filled
    in when omitted). ``outputs`` names the values returned, in order.

    Raises ValueError for unknown ops, wrong arity, undefined or rebound names, or a non-constant
    parameter.
    """

    inputs: tuple
    steps: tuple
    outputs: tuple

    def __post_init__(self):
        inputs, outputs = tuple(self.inputs), tuple(self.outputs)
        defined = set()
        for name in inputs:
            if not isinstance(name, str) or name in defined:
                raise ValueError(f"Expr: input names must be distinct strings, got {inputs}")
            defined.add(name)
        steps = []
        for step in self.steps:
            name, op_name, args = step
            op = OPS.get(op_name)
            if op is None:
                raise ValueError(f"Expr: unknown op {op_name!r} in step {step}")
            if not isinstance(name, str) or name in defined:
                raise ValueError(f"Expr: step {step} binds {name!r}, which is already bound or not a string")
            args = tuple(args)
            n_params = len(op.params)
            if not op.arity <= len(args) <= op.arity + n_params:
                raise ValueError(f"Expr: {op_name} takes {op.arity} operands and up to {n_params} "
                                 f"parameters, got {len(args)} in step {step}")
            for pos, arg in enumerate(args[:op.arity]):
                if arg is None and pos not in op.optional:
                    raise ValueError(f"Expr: operand {pos} of {op_name} may not be None (step {step})")
                if not _is_const(arg) and arg not in defined:
                    raise ValueError(f"Expr: step {step} uses {arg!r} before it is bound")
            params = list(args[op.arity:])
            for (p_name, default) in op.params[len(params):]:
                if default is REQUIRED:
                    raise ValueError(f"Expr: {op_name} needs parameter {p_name!r} (step {step})")
                params.append(default)
            for p in params:
                if not isinstance(p, (bool, int, float, str)):
                    raise ValueError(f"Expr: parameter {p!r} of {op_name} must be a constant (step {step})")
            if op.kind == "cast":
                params[0] = np.dtype(params[0]).name
            steps.append((name, op_name, args[:op.arity] + tuple(params)))
            defined.add(name)
        if not outputs:
            raise ValueError("Expr: needs at least one output")
        for name in outputs:
            if name not in defined:
                raise ValueError(f"Expr: output {name!r} is not bound")
        object.__setattr__(self, "inputs", inputs)
        object.__setattr__(self, "steps", tuple(steps))
        object.__setattr__(self, "outputs", outputs)
        object.__setattr__(self, "_key", None)

    @classmethod
    def single(cls, op_name, n_inputs=None, *params):
        """The expression of one op on inputs ``a0, a1, ...`` (``n_inputs`` defaults to its arity)."""
        op = OPS.get(op_name)
        if op is None:
            raise ValueError(f"Expr: unknown op {op_name!r}")
        names = tuple(f"a{i}" for i in range(op.arity if n_inputs is None else n_inputs))
        return cls(names, (("r", op_name, names + tuple(params)),), ("r",))

    def key(self):
        """A string that identifies the expression exactly (constants by type and value)."""
        if self._key is None:
            object.__setattr__(self, "_key", self._make_key())
        return self._key

    def _make_key(self):
        def fmt(arg):
            return f"{type(arg).__name__}:{arg!r}"
        steps = ";".join(f"{n}={o}(" + ",".join(fmt(a) for a in args) + ")" for n, o, args in self.steps)
        return f"in({','.join(self.inputs)}){steps}->({','.join(self.outputs)})"

    def __str__(self):
        lines = [f"pointwise({', '.join(self.inputs)}):"]
        for name, op, args in self.steps:
            arity = OPS[op].arity
            shown = (a if i < arity and isinstance(a, str) else repr(a) for i, a in enumerate(args))
            lines.append(f"  {name} = {op}({', '.join(shown)})")
        lines.append(f"  return {', '.join(self.outputs)}")
        return "\n".join(lines)


@dataclass(frozen=True)
class TypedStep:
    """A step with its types: ``operands`` are names or constants, ``cast_to`` their compute
    dtypes, ``ct`` the op's compute dtype, ``result`` its result dtype, ``params`` its constants."""

    name: str
    op: object
    operands: tuple
    params: tuple
    cast_to: tuple
    ct: object
    result: object


@dataclass(frozen=True)
class Typing:
    """Types of an expression for given inputs: ``values`` maps each name to its dtype."""

    inputs: tuple  # ((name, dtype, priority), ...)
    steps: tuple
    outputs: tuple  # ((name, dtype), ...)
    values: dict


def infer_types(expr, in_types):
    """Type ``expr`` for inputs described by ``in_types`` (see ``promotion.typed_operand``).

    Raises ValueError on a count mismatch and TypeError when an op does not take its operand types.
    """
    return infer_typed(expr, [typed_operand(spec) for spec in in_types])


def infer_typed(expr, typed_inputs):
    """``infer_types`` for inputs given as ``(dtype, priority)`` pairs."""
    if len(typed_inputs) != len(expr.inputs):
        raise ValueError(f"pointwise: expression takes {len(expr.inputs)} inputs, got {len(typed_inputs)}")
    typed = {}
    inputs = []
    for name, (dtype, prio) in zip(expr.inputs, typed_inputs):
        typed[name] = (dtype, prio)
        inputs.append((name, dtype, prio))
    steps = []
    for name, op_name, args in expr.steps:
        op = OPS[op_name]
        operands, params = args[:op.arity], args[op.arity:]
        typed_ops = [None if a is None else (typed[a] if isinstance(a, str) else (typed_operand(a)[0], SCALAR))
                     for a in operands]
        try:
            cast_to, ct, result = op_types(op, typed_ops, params)
        except TypeError as e:
            raise TypeError(f"{e} (step {name} = {op_name}{args}, operand dtypes "
                            f"{[None if t is None else t[0].name for t in typed_ops]})") from None
        prio = max((t[1] for t in typed_ops if t is not None), default=SCALAR)
        typed[name] = (result, prio)
        steps.append(TypedStep(name, op, operands, params, tuple(cast_to), ct, result))
    outputs = tuple((name, typed[name][0]) for name in expr.outputs)
    return Typing(tuple(inputs), tuple(steps), outputs, {k: v[0] for k, v in typed.items()})


# ---------------------------------------------------------------------------------- building
class Sym:
    """A symbolic pointwise value: a name bound in a ``Builder``.

    Operators and one method per vocabulary op emit steps: ``s * t`` emits ``mul``, ``2.0 - s``
    emits ``sub(2.0, s)``, ``s.sigmoid()`` emits ``sigmoid``, ``c.where(a, b)`` emits
    ``where(c, a, b)``. Python numbers mix in as constant operands. ``==`` and ``!=`` keep their
    Python meaning (use ``s.eq(t)``); a Sym has no truth value.
    """

    __slots__ = ("builder", "name")

    def __init__(self, builder, name):
        self.builder = builder
        self.name = name

    def __repr__(self):
        return f"Sym({self.name})"

    def __bool__(self):
        raise TypeError(f"pointwise: the symbolic value {self.name} has no truth value (a formula "
                        "evaluated on symbolic values branches on a tensor)")

    __hash__ = object.__hash__

    def __add__(self, other):
        return self.builder.emit("add", self, other)

    def __radd__(self, other):
        return self.builder.emit("add", other, self)

    def __sub__(self, other):
        return self.builder.emit("sub", self, other)

    def __rsub__(self, other):
        return self.builder.emit("sub", other, self)

    def __mul__(self, other):
        return self.builder.emit("mul", self, other)

    def __rmul__(self, other):
        return self.builder.emit("mul", other, self)

    def __truediv__(self, other):
        return self.builder.emit("div", self, other)

    def __rtruediv__(self, other):
        return self.builder.emit("div", other, self)

    def __pow__(self, other):
        return self.builder.emit("pow", self, other)

    def __rpow__(self, other):
        return self.builder.emit("pow", other, self)

    def __neg__(self):
        return self.builder.emit("neg", self)

    def __lt__(self, other):
        return self.builder.emit("lt", self, other)

    def __le__(self, other):
        return self.builder.emit("le", self, other)

    def __gt__(self, other):
        return self.builder.emit("gt", self, other)

    def __ge__(self, other):
        return self.builder.emit("ge", self, other)


def _sym_method(op_name):
    def method(self, *args):
        return self.builder.emit(op_name, self, *args)
    method.__name__ = op_name
    method.__doc__ = f"Emit ``{op_name}`` with this value as its first operand."
    return method


for _name in OPS:
    setattr(Sym, _name, _sym_method(_name))


class Builder:
    """Builds an ``Expr`` from operations on ``Sym`` values.

    ``inputs`` names the expression's inputs (``builder.inputs`` holds their Syms); ``steps``
    are steps already bound (their names become Syms through ``value``). New steps are named
    ``<prefix><n>``. With ``dedupe`` an op applied to the same arguments twice is emitted once
    (derivative formulas often recompute a value, e.g. ``sigmoid(x)`` in silu's).
    """

    def __init__(self, inputs=(), prefix="t", steps=(), dedupe=False):
        self.names = tuple(inputs)
        self.inputs = tuple(Sym(self, n) for n in self.names)
        self.steps = list(steps)
        self.prefix = prefix
        self.dedupe = dedupe
        self._count = 0
        self._memo = {}
        if dedupe:
            for name, op, args in self.steps:
                self._memo.setdefault(self._key(op, args), name)

    def value(self, name):
        """The Sym of an input or bound step ``name`` (constants pass through)."""
        return Sym(self, name) if isinstance(name, str) else name

    @staticmethod
    def _key(op, args):
        return (op,) + tuple(a if isinstance(a, str) else (type(a).__name__, repr(a)) for a in args)

    def emit(self, op, *args):
        """Bind a step ``op(*args)``; returns its Sym. Arguments are Syms of this builder, Python
        constants or None."""
        names = []
        for a in args:
            if isinstance(a, Sym):
                if a.builder is not self:
                    raise ValueError(f"pointwise: {a.name} belongs to another expression")
                names.append(a.name)
            else:
                names.append(a)
        if op == "cast":
            names[1] = np.dtype(getattr(names[1], "numpy", names[1])).name
        names = tuple(names)
        if not self.dedupe:
            return self.bind(op, *names)
        key = self._key(op, names)
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = self.bind(op, *names).name
        return Sym(self, found)

    def bind(self, op, *args):
        """Bind a new step ``op(*args)`` (names or constants), never reusing an equal one."""
        name = f"{self.prefix}{self._count}"
        self._count += 1
        self.steps.append((name, op, args))
        return Sym(self, name)

    def expr(self, *outputs):
        """The ``Expr`` over ``inputs`` returning ``outputs`` (Syms or bound names)."""
        outs = tuple(o.name if isinstance(o, Sym) else o for o in outputs)
        return Expr(self.names, tuple(self.steps), outs)


def _vocabulary_function(op_name):
    def fn(*args):
        for a in args:
            if isinstance(a, Sym):
                return a.builder.emit(op_name, *args)
        raise TypeError(f"pointwise: {op_name}() needs at least one symbolic operand, got {args!r}")
    fn.__name__ = op_name
    fn.__doc__ = f"Emit ``{op_name}`` (in the builder of the first symbolic operand)."
    return fn


class _Vocabulary:
    """The vocabulary ops as functions on Syms and constants: ``vocabulary.mul(s, 2.0)``."""


vocabulary = _Vocabulary()
for _name in OPS:
    setattr(vocabulary, _name, _vocabulary_function(_name))
del _name
