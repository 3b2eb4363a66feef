"""The tracer: records every op that goes through ember's dispatch into a ``Graph``.

It is installed in ``ember.autograd.state.STATE.tracer`` (thread-local) for the duration of one
run of the traced function. Traces nest: an inner tracer records into its own graph and forwards
every event to the enclosing one, so the outer trace sees the inner call's ops.

Shapes read while tracing (``x.shape[0]``, ``x.size(1)``, ``len(x)``) come back as ``SymInt``:
an ``int`` that remembers where it came from. When one reaches an op's arguments the tracer
records a ``size`` node (and ``add``/``sub``/``mul``/``div``/``remainder``/``neg`` nodes for int
arithmetic on sizes), so the op follows the input's shape when the trace runs on another size.
"""
import linecache
import os
import sys
import warnings
import weakref

import numpy as np

from ember.autograd.state import STATE
from ember.errors import EmberRuntimeError
from ember.jit.ir import ArrayRef, GenRef, Graph, SymRef

__all__ = ["TracerWarning", "TracingError", "SymInt", "Tracer", "active_tracers"]


class TracerWarning(UserWarning):
    """The trace may not generalise to other inputs (a traced value became a Python value)."""


class TracingError(EmberRuntimeError):
    """The traced code did something a trace cannot represent."""


_ACTIVE = weakref.WeakSet()


def active_tracers():
    """Tracers currently recording, in any thread."""
    return list(_ACTIVE)


_EMBER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def user_frame():
    """(filename, lineno, source line) of the innermost frame outside ember itself."""
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if not os.path.abspath(fn).startswith(_EMBER_DIR + os.sep):
            return fn, f.f_lineno, linecache.getline(fn, f.f_lineno).strip()
        f = f.f_back
    return "<unknown>", 0, ""


# ---------------------------------------------------------------------------------- SymInt
class SymInt(int):
    """An int read from a traced tensor's shape. ``expr`` says how it was computed:
    ``('size', tensor, dim)`` or ``(op_name, a, b)`` / ``('neg', a)`` over SymInts and ints.
    Only integer arithmetic (+, -, *, //, %, unary -) stays traced; anything else (comparisons,
    float conversion, true division, math functions) gives a plain, frozen number."""

    def __new__(cls, n, expr):
        s = int.__new__(cls, n)
        s.expr = expr
        return s

    def _bin(self, other, name, fn, reverse=False):
        if isinstance(other, bool) or not isinstance(other, int):
            return NotImplemented
        a, b = (other, self) if reverse else (self, other)
        return SymInt(fn(int(a), int(b)), (name, a, b))

    def __add__(self, o):
        return self._bin(o, "add", int.__add__)

    def __radd__(self, o):
        return self._bin(o, "add", int.__add__, True)

    def __sub__(self, o):
        return self._bin(o, "sub", int.__sub__)

    def __rsub__(self, o):
        return self._bin(o, "sub", int.__sub__, True)

    def __mul__(self, o):
        return self._bin(o, "mul", int.__mul__)

    def __rmul__(self, o):
        return self._bin(o, "mul", int.__mul__, True)

    def __floordiv__(self, o):
        return self._bin(o, "floordiv", int.__floordiv__)

    def __rfloordiv__(self, o):
        return self._bin(o, "floordiv", int.__floordiv__, True)

    def __mod__(self, o):
        return self._bin(o, "remainder", int.__mod__)

    def __rmod__(self, o):
        return self._bin(o, "remainder", int.__mod__, True)

    def __neg__(self):
        return SymInt(-int(self), ("neg", self))

    def __pos__(self):
        return self

    def __repr__(self):
        return int.__repr__(self)

    __str__ = __repr__
    __hash__ = int.__hash__


# ---------------------------------------------------------------------------------- Tracer
class Tracer:
    """Builds a Graph from dispatch events. ``state``: {id(tensor): (tensor, name, role)} for
    module parameters and buffers, which become formal parameters when first read."""

    def __init__(self, name="trace", state=None, parent=None):
        from ember.tensor import Tensor
        self._Tensor = Tensor
        self.name = name
        self.graph = Graph()
        self.env = {}          # id(tensor) -> (tensor, Value)
        self.state = state or {}
        self.parent = parent
        self.extra = []        # (Value, tensor) formals made for captured tensors needing grad
        self.bound = []        # (Value, tensor) params/buffers by state name
        self._sym = {}         # id(SymInt) -> (SymInt, Value)
        self._gens = {}        # id(generator) -> GenRef
        self.random = False
        self.warned = set()

    # ---- lifetime ----------------------------------------------------------------------------
    def __enter__(self):
        self.parent = STATE.tracer
        STATE.tracer = self
        _ACTIVE.add(self)
        return self

    def __exit__(self, *exc):
        STATE.tracer = self.parent
        _ACTIVE.discard(self)
        return False

    # ---- values ------------------------------------------------------------------------------
    def add_input(self, t, name):
        v = self.graph.add_input(name, t._data.dtype, t._data.shape, "input")
        self.env[id(t)] = (t, v)
        return v

    def known(self, t):
        e = self.env.get(id(t))
        return e[1] if e is not None and e[0] is t else None

    def value_of(self, t):
        e = self.env.get(id(t))
        if e is not None and e[0] is t:
            return e[1]
        return self._outside(t)

    def _outside(self, t):
        """A tensor the trace has not seen: module state, a value of another trace (an error),
        a captured tensor that needs grad (a parameter) or a constant."""
        g = self.graph
        st = self.state.get(id(t))
        if st is not None and st[0] is t:
            _, name, role = st
            v = g.add_input(name, t._data.dtype, t._data.shape, role)
            self.bound.append((v, t))
            self.env[id(t)] = (t, v)
            return v
        for other in list(_ACTIVE):
            if other is self:
                continue
            ov = other.known(t)
            if ov is not None and ov.role not in ("param", "buffer"):
                what = "an input" if ov.role == "input" else "a value computed"
                fn, line, src = user_frame()
                raise TracingError(
                    f"a tensor from trace '{other.name}' ({what} there, %{ov.name} : "
                    f"{ov.type_str}) is used in trace '{self.name}' but is not one of its inputs; "
                    f"values cannot cross traces: pass it to the inner traced function as an "
                    f"input ({fn}:{line}: {src})")
        if t._requires_grad:
            v = g.add_input(f"param{len(self.extra)}", t._data.dtype, t._data.shape, "param")
            self.extra.append((v, t))
        else:
            self._check_alias(t._data)
            v = g.add_constant(t._data)
        self.env[id(t)] = (t, v)
        return v

    def _check_alias(self, arr):
        """A new constant whose memory is a traced value's (a tensor made from ``x._data``, or
        a view of it) freezes that value: warn."""
        if arr.size == 0:
            return
        for t, v in list(self.env.values()):
            if isinstance(t, self._Tensor) and v.role not in ("param", "buffer") and \
                    not (v.node is not None and v.node.kind == "constant") and \
                    np.may_share_memory(t._data, arr):
                self.warn("a constant made from the memory of a traced tensor", "alias")
                return

    def _gen(self, gen):
        from ember.random import default_generator
        if gen is default_generator:
            return GenRef("default")
        ref = self._gens.get(id(gen))
        if ref is None:
            ref = GenRef(f"g{len(self._gens)}")
            self._gens[id(gen)] = ref
            self.graph.generators[ref.name] = gen
        return ref

    def sym_value(self, s):
        """The Value (a 0-d int64 node output) computing SymInt ``s``, recording nodes as needed;
        None when ``s`` does not depend on this trace's inputs."""
        e = self._sym.get(id(s))
        if e is not None and e[0] is s:
            return e[1]
        expr = s.expr
        g = self.graph
        i64 = [(np.dtype(np.int64), ())]
        v = None
        if expr[0] == "size":
            t, dim = expr[1], expr[2]
            tv = self.known(t)
            if tv is not None and tv.role not in ("param", "buffer") and \
                    not (tv.node is not None and tv.node.kind == "constant"):
                v = g.add_node("size", [tv], {"dim": dim}, i64).output
        elif expr[0] == "tensor":
            tv = self.known(expr[1])
            if tv is not None:
                v = tv
        else:
            ops = [self.sym_value(a) if isinstance(a, SymInt) else None for a in expr[1:]]
            if any(o is not None for o in ops):
                args = [o if o is not None else int(a) for o, a in zip(ops, expr[1:])]
                name = expr[0]
                if name == "floordiv":
                    v = g.add_node("div", args, {"rounding_mode": "floor"}, i64).output
                elif name in ("add", "sub"):
                    v = g.add_node(name, args, {"alpha": 1}, i64).output
                else:
                    v = g.add_node(name, args, {}, i64).output
        self._sym[id(s)] = (s, v)
        return v

    def lift(self, c):
        """A constant argument as stored in the IR."""
        if isinstance(c, SymInt):
            v = self.sym_value(c)
            return int(c) if v is None else SymRef(v)
        if c is None or isinstance(c, (bool, int, float, str, complex)):
            return c
        if isinstance(c, tuple):
            return tuple(self.lift(x) for x in c)
        if isinstance(c, list):
            return [self.lift(x) for x in c]
        if isinstance(c, slice):
            return slice(self.lift(c.start), self.lift(c.stop), self.lift(c.step))
        if isinstance(c, np.generic):
            return c.item()
        if isinstance(c, np.ndarray):
            for t, v in self.env.values():
                if isinstance(t, self._Tensor) and t._data is c and v.role != "param" and \
                        v.role != "buffer" and not (v.node is not None and v.node.kind == "constant"):
                    self.warn("a traced tensor used as an index", "index")
                    break
            name = f"c{len(self.graph.constants)}"
            while name in self.graph.constants:
                name += "_"
            self.graph.constants[name] = c
            return ArrayRef(name)
        if isinstance(c, type) and issubclass(c, np.generic):
            return np.dtype(c)
        if hasattr(c, "standard_normal") and hasattr(c, "manual_seed"):
            return self._gen(c)
        return c  # dtypes and other plain values

    def _arg(self, t):
        if isinstance(t, self._Tensor):
            return self.value_of(t)
        if isinstance(t, SymInt):
            v = self.sym_value(t)
            return int(t) if v is None else SymRef(v)
        if isinstance(t, np.generic):
            return t.item()
        return t

    # ---- dispatch protocol -----------------------------------------------------------------
    def record(self, op, tensors, consts, outputs):
        if op.list_input:
            args = [[self._arg(t) for t in tensors]]
        else:
            args = [self._arg(t) for t in tensors]
        names = op.const_names
        attrs = {}
        for i, c in enumerate(consts):
            attrs[names[i] if i < len(names) else f"arg{i}"] = self.lift(c)
        if op.random:
            self.random = True
        node = self.graph.add_node(op.name, args, attrs,
                                   [(o._data.dtype, o._data.shape) for o in outputs])
        for o, v in zip(outputs, node.outputs):
            self.env[id(o)] = (o, v)
        if self.parent is not None:
            self.parent.record(op, tensors, consts, outputs)

    def record_inplace(self, target, result):
        tv = self.value_of(target)
        rv = self.value_of(result)
        node = self.graph.add_node("copy_", [tv, rv], {},
                                   [(target._data.dtype, target._data.shape)])
        self.env[id(target)] = (target, node.output)
        if self.parent is not None:
            self.parent.record_inplace(target, result)

    def record_function(self, cls, args, outs):
        """A custom autograd Function: one node calling ``cls.apply`` (its forward's ops, which
        were recorded too, become dead and are removed)."""
        targs = [self._arg(a) if isinstance(a, self._Tensor) else self.lift(a) for a in args]
        tensors = [o for o in outs if isinstance(o, self._Tensor)]
        node = self.graph.add_node(
            "python_function", [targs], {"cls": cls},  # the class itself: keyed by identity
            [(o._data.dtype, o._data.shape) for o in tensors])
        for o, v in zip(tensors, node.outputs):
            self.env[id(o)] = (o, v)
        if self.parent is not None and hasattr(self.parent, "record_function"):
            self.parent.record_function(cls, args, outs)

    def size(self, tensor, dim):
        n = tensor._data.shape[dim]
        if sys._getframe(1).f_code.co_name == "__len__":
            # Python's len() turns any int subclass into a plain int: the length is frozen
            if self.known(tensor) is not None:
                self.warn("len() of a traced tensor (frozen; use x.shape[0] to follow the "
                          "input's size)", "len")
            return n
        if self.known(tensor) is None and self.parent is None:
            return n
        return SymInt(n, ("size", tensor, dim))

    def _traced(self, tensor):
        """Whether ``tensor`` is a value of this trace that depends on its formals."""
        v = self.known(tensor)
        return v is not None and not (v.node is not None and v.node.kind == "constant")

    def python_value(self, tensor, what):
        if self._traced(tensor):
            self.warn(f"converting a tensor to a Python value ({what}())", what)
        if self.parent is not None:
            self.parent.python_value(tensor, what)

    def data_read(self, tensor, op, why):
        """Code inside ``op`` read ``tensor``'s values in Python (``why``) to compute part of
        its result: warn when they come from this trace's inputs, as they are frozen."""
        if self._traced(tensor):
            self.warn(f"{op}: {why} (the values of a traced tensor are read in Python)",
                      f"data:{op}")
        if self.parent is not None:
            self.parent.data_read(tensor, op, why)

    # ---- helpers -----------------------------------------------------------------------------
    def warn(self, what, key):
        fn, line, src = user_frame()
        if (fn, line, key) in self.warned:
            return
        self.warned.add((fn, line, key))
        msg = (f"{what} while tracing '{self.name}' at {fn}:{line}: `{src}`. The trace records "
               f"the value seen now as a constant, so it may not generalise to other inputs "
               f"(data-dependent control flow or values are frozen).")
        warnings.warn_explicit(msg, TracerWarning, fn, line)
