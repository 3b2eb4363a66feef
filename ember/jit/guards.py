"""Shape guards: what a trace assumed about its inputs' shapes, checked when they change.

While tracing, sizes read from traced tensors are ``SymInt``s. Used as op arguments they stay
traced (the graph computes them from the input's shape on every call). Turned into a plain
Python value (``float(n)``, ``1 / math.sqrt(n)``, ``n == 1``, a NumPy index array built from a
size inside an op, ...) they are frozen into the graph, and the tracer records a guard: the
value (or the comparison's result) the trace was built with, and the user's line.

``ShapeGuards`` holds a small graph computing every guarded value from the formals (the part of
the trace it needs: usually ``size`` nodes of the inputs). A traced callable calls ``check``
only when its input shapes are not ones it has already checked (one tuple comparison per call,
and none at all for traces without guards); ``check`` runs that graph once for the new shapes,
and when a guarded value differs it warns with ``TracerWarning`` naming each read, the shapes
the trace was made for and the shapes it is called with.
"""
import warnings

import numpy as np

from ember.jit.interpreter import Interpreter
from ember.jit.tracer import CMP, TracerWarning, user_frame

__all__ = ["ShapeGuards", "build_guards"]

_MAX_CHECKED = 256  # input-shape signatures remembered as checked


class ShapeGuards:
    """The shape guards of one trace. ``graph``: formals as the traced graph's, outputs the
    guarded int values; ``checks``: ``(kind, lhs, rhs, expected, how, where, text)`` with
    ``lhs``/``rhs`` an output index (``('out', i)``) or an int; ``state``: the tensors bound to
    the parameter formals at trace time (their shapes only matter)."""

    def __init__(self, name, graph, checks, shapes, state):
        self.name = name
        self.graph = graph
        self.checks = checks
        self.shapes = shapes
        self.state = list(state)
        self.ok = {shapes}

    def describe(self):
        """One line per guard: where the shape was read and what the trace assumed."""
        return [f"{fn}:{line}: `{src}`: {_assumed(c)}" for c in self.checks
                for fn, line, src in (c[5],)]

    def check(self, arrays):
        """``arrays``: the input ndarrays of a call whose shapes are not in ``ok``. Warns
        (TracerWarning) when a guarded value differs from the trace's; remembers the shapes."""
        sig = tuple(a.shape for a in arrays)
        if len(self.ok) >= _MAX_CHECKED:
            self.ok = {self.shapes}
        self.ok.add(sig)
        bad = self.violations(arrays)
        if bad:
            self._warn(bad, sig)

    def violations(self, arrays):
        """[(check, (now, lhs, rhs) or None when it could not be evaluated)] of the guards that
        do not hold for input ndarrays ``arrays``."""
        from ember.random import default_generator
        if self.graph is None:
            return [(c, None) for c in self.checks]
        gens = [default_generator] + list(self.graph.generators.values())
        saved = [gen.get_state() for gen in gens]
        try:
            vals = Interpreter(self.graph, "array").run(*arrays, *[t._data for t in self.state])
        except Exception:  # noqa: BLE001 - the call itself reports the failure
            return [(c, None) for c in self.checks]
        finally:  # the call draws the same random numbers as it would unchecked
            for gen, s in zip(gens, saved):
                gen.set_state(s)
        bad = []
        for c in self.checks:
            now = _evaluate(c, vals)
            if now[0] != c[3]:
                bad.append((c, now))
        return bad

    def check_dynamic_axes(self, arrays, axes, what):
        """Export with ``axes`` ({input index: [axis, ...]}) symbolic: warn (TracerWarning)
        when a frozen value changes with them, probing each axis at another size (inputs
        resized from ``arrays``, the example inputs). ``what`` names the export."""
        probe = []
        for i, a in enumerate(arrays):
            shape = list(a.shape)
            for ax in axes.get(i, ()):
                shape[ax] = shape[ax] + 1
            probe.append(np.resize(a, shape) if a.size else np.zeros(shape, a.dtype))
        bad = [(c, now) for c, now in self.violations(probe) if now is not None]
        if bad:
            self._warn(bad, tuple(p.shape for p in probe), what)

    def forward_to(self, tracer, flat):
        """The traced callable runs inside another trace (``tracer``), which records its ops
        with this trace's frozen values: give that trace the same guards, computed by this
        guard graph run through dispatch (so ``tracer`` records how they follow its inputs)."""
        from ember.jit.tracer import SymInt
        from ember.random import default_generator
        if self.graph is None or not hasattr(tracer, "shape_guard"):
            return
        gens = [default_generator] + list(self.graph.generators.values())
        saved = [gen.get_state() for gen in gens]
        try:
            vals = Interpreter(self.graph, "tensor").run(*flat, *self.state)
        except Exception:  # noqa: BLE001 - the call itself reports the failure
            return
        finally:
            for gen, s in zip(gens, saved):
                gen.set_state(s)

        def side(x):
            if isinstance(x, tuple):
                t = vals[x[1]]
                return SymInt(int(t._data), ("tensor", t))
            return x
        for kind, lhs, rhs, expected, how, where, _ in self.checks:
            tracer.shape_guard(kind, side(lhs), side(rhs), expected, how, where)

    def _warn(self, bad, sig, export=None):
        fn, line, _ = user_frame()
        lines = []
        for c, now in bad:
            cfn, cline, src = c[5]
            if now is None:
                got = "could not be re-checked"
            elif c[0] == "value":
                got = f"now {now[0]}"
            else:
                got = f"now {now[1]} {c[4]} {now[2]} is {now[0]}"
            lines.append(f"  {cfn}:{cline}: `{src}`: {_assumed(c)}; {got}")
        called = f"is called with {_shapes(sig)}" if export is None else \
            f"is exported by {export} with dynamic axes (checked at {_shapes(sig)})"
        msg = (f"the trace of '{self.name}' read tensor shapes into Python values that it froze "
               f"as constants; it was traced for input shapes {_shapes(self.shapes)} and "
               f"{called}, for which these reads differ:\n" + "\n".join(lines) +
               "\nThe results may differ from eager mode: trace again with inputs of these "
               "shapes, or compute these values with tensor ops.")
        warnings.warn_explicit(msg, TracerWarning, fn, line)


def _shapes(sig):
    return ", ".join(str(list(s)) for s in sig)


def _assumed(c):
    kind, _, _, expected, how, _, text = c
    if kind == "value":
        return f"{text} was {expected} (frozen by {how})"
    return f"{text} was {expected}"


def _side(x, vals):
    if isinstance(x, tuple):
        return int(vals[x[1]])
    return x


def _evaluate(c, vals):
    """(result, lhs, rhs) of guard ``c`` for the outputs ``vals`` of the guard graph."""
    kind, lhs, rhs, _, how = c[:5]
    a = _side(lhs, vals)
    if kind == "value":
        return (a, a, None)
    b = _side(rhs, vals)
    return (bool(CMP[how](a, b)), a, b)


def build_guards(name, graph, table, formals, shapes, state):
    """The ``ShapeGuards`` of a finished trace, or None when it has none.

    ``graph``: the traced graph *before* dead-code elimination (so it still holds the nodes
    computing the guarded values); ``table``: ``Tracer.guard_table()``; ``formals``: the names
    of the final traced graph's formals, in order; ``shapes``: the traced input shapes.
    """
    from ember.jit.passes import dce
    if not table:
        return None
    vals = []
    for c in table:
        for x in c[1:3]:
            if not isinstance(x, (int, float, type(None))) and all(x is not v for v in vals):
                vals.append(x)
    checks = []
    for kind, lhs, rhs, expected, how, where, text in table:
        idx = [("out", next(i for i, v in enumerate(vals) if v is x))
               if not isinstance(x, (int, float, type(None))) else x for x in (lhs, rhs)]
        checks.append((kind, idx[0], idx[1], expected, how, where, text))
    try:
        g = graph.copy()
        by_name = {v.name: v for v in g.values()}
        g.outputs = [by_name[v.name] for v in vals]
        for n in g.find_nodes("copy_"):  # no writes: the check must not update state
            n.outputs[0].replace_all_uses_with(n.args[0])  # same shape as the written value
            g.remove(n)
        dce(g)
        keep = [by_name[n] for n in formals]
        kept = {id(v) for v in keep}
        if any(v.uses and id(v) not in kept for v in g.inputs):
            g = None  # needs a formal the trace dropped: cannot be re-run
        else:
            g.inputs = keep
            g.lint()
    except Exception:  # noqa: BLE001 - every new shape is then reported as unchecked
        g = None
    return ShapeGuards(name, g, checks, shapes, state)
