"""The tracer: records every op that goes through ember's dispatch into a ``Graph``.

It is installed in ``ember.autograd.state.STATE.tracer`` (thread-local) for the duration of one
run of the traced function. Traces nest: an inner tracer records into its own graph and forwards
every event to the enclosing one, so the outer trace sees the inner call's ops.

Shapes read while tracing (``x.shape[0]``, ``x.size(1)``, ``x.numel()``) come back as
``SymInt``: an ``int`` that remembers where it came from. When one reaches an op's arguments the
tracer records a ``size`` node (and ``add``/``sub``/``mul``/``div``/``remainder``/``neg`` nodes
for int arithmetic on sizes), so the op follows the input's shape when the trace runs on another
size. When Python code makes a plain value of one instead (``float``, ``int``, true division, a
comparison, ``len(x)``, or an op building a NumPy constant from sizes: ``shape_read``), the
tracer records a shape guard; ``ember.jit.guards`` re-checks them when the trace is called with
other input shapes and warns where a frozen value differs.
"""
import linecache
import operator
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
_NUMPY_DIR = os.path.dirname(os.path.abspath(np.__file__))


def user_frame():
    """(filename, lineno, source line) of the innermost frame outside ember itself and the
    NumPy that ember calls."""
    f = sys._getframe(1)
    while f is not None:
        fn = os.path.abspath(f.f_code.co_filename)
        if not fn.startswith(_EMBER_DIR + os.sep) and not fn.startswith(_NUMPY_DIR + os.sep):
            return fn, f.f_lineno, linecache.getline(fn, f.f_lineno).strip()
        f = f.f_back
    return "<unknown>", 0, ""


# ---------------------------------------------------------------------------------- SymInt
_KERNELS_DIR = os.path.join(_EMBER_DIR, "kernels") + os.sep
_plain = int.__int__  # a SymInt's value as a plain int, recording nothing


def _num(x):
    return _plain(x) if isinstance(x, SymInt) else x


def _note(kind, a, b, result, how):
    """Python code turned SymInt ``a`` (with ``b``) into a plain value: the active tracer
    records a shape guard. Conversions made by a kernel while it computes an op's example
    result are not recorded (the op itself is, with its SymInt arguments traced)."""
    tracer = STATE.tracer
    if tracer is None or not hasattr(tracer, "shape_guard"):
        return
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename == _HERE:
        f = f.f_back
    if f is not None and f.f_code.co_filename.startswith(_KERNELS_DIR):
        return
    if kind == "value" and f is not None and \
            os.path.abspath(f.f_code.co_filename).startswith(_EMBER_DIR + os.sep):
        while f.f_code.co_name.startswith("<") and f.f_back is not None:
            f = f.f_back  # the function around a comprehension
        how = f"{how} in {f.f_globals.get('__name__', '?')}.{f.f_code.co_name}"
    tracer.shape_guard(kind, a, b, result, how)


_HERE = _note.__code__.co_filename


class SymInt(int):
    """An int read from a traced tensor's shape. ``expr`` says how it was computed:
    ``('size', tensor, dim)`` or ``(op_name, a, b)`` / ``('neg', a)`` over SymInts and ints.
    Integer arithmetic (+, -, *, //, %, unary -, floor/ceil/round) stays traced. Anything that
    makes a plain Python value of it (``float()``, ``int()``, true division, ``**``, arithmetic
    with a float, math functions, bit operations) or branches on it (comparisons, ``bool``)
    records a *shape guard* in the active tracer: the traced callable checks, when it is called
    with inputs of other shapes, that every guarded value (or comparison result) is unchanged,
    and warns (``TracerWarning`` naming the line) when one is not. Operations the int type does
    in C without asking (``range(n)``, ``np.arange(n)``, ``2.0 * n``, ``1.0 / n``) are not seen."""

    def __new__(cls, n, expr):
        s = int.__new__(cls, n)
        s.expr = expr
        return s

    def _bin(self, other, name, fn, reverse=False):
        if isinstance(other, bool) or not isinstance(other, int):
            if isinstance(other, float):
                _note("value", self, None, _plain(self), f"arithmetic with the float {other!r}")
                return fn(other, _plain(self)) if reverse else fn(_plain(self), other)
            return NotImplemented
        a, b = (other, self) if reverse else (self, other)
        return SymInt(fn(_num(a), _num(b)), (name, a, b))

    def __add__(self, o):
        return self._bin(o, "add", _add)

    def __radd__(self, o):
        return self._bin(o, "add", _add, True)

    def __sub__(self, o):
        return self._bin(o, "sub", _sub)

    def __rsub__(self, o):
        return self._bin(o, "sub", _sub, True)

    def __mul__(self, o):
        return self._bin(o, "mul", _mul)

    def __rmul__(self, o):
        return self._bin(o, "mul", _mul, True)

    def __floordiv__(self, o):
        return self._bin(o, "floordiv", _floordiv)

    def __rfloordiv__(self, o):
        return self._bin(o, "floordiv", _floordiv, True)

    def __mod__(self, o):
        return self._bin(o, "remainder", _mod)

    def __rmod__(self, o):
        return self._bin(o, "remainder", _mod, True)

    def __neg__(self):
        return SymInt(-_plain(self), ("neg", self))

    def __pos__(self):
        return self

    def __floor__(self):
        return self

    __ceil__ = __trunc__ = __floor__

    def __round__(self, ndigits=None):
        if ndigits is None:
            return self
        return self._frozen(f"round(n, {ndigits})", round(_plain(self), ndigits))

    # ---- conversions and branches: recorded as shape guards -----------------------------
    def _frozen(self, how, result):
        _note("value", self, None, _plain(self), how)
        return result

    def __float__(self):
        return self._frozen("float()", float(_plain(self)))

    def __int__(self):
        return self._frozen("int()", _plain(self))

    def __complex__(self):
        return self._frozen("complex()", complex(_plain(self)))

    def __truediv__(self, o):
        if isinstance(o, (int, float)) and not isinstance(o, bool):
            if isinstance(o, SymInt):
                o._frozen("true division", None)
            return self._frozen("true division", _plain(self) / _num(o))
        return NotImplemented

    def __rtruediv__(self, o):
        if isinstance(o, (int, float)) and not isinstance(o, bool):
            return self._frozen("true division", _num(o) / _plain(self))
        return NotImplemented

    def __pow__(self, o, mod=None):
        if isinstance(o, SymInt):
            o._frozen("**", None)
        return self._frozen("**", pow(_plain(self), _num(o), mod))

    def __rpow__(self, o, mod=None):
        return self._frozen("**", pow(_num(o), _plain(self), mod))

    def __abs__(self):
        return self._frozen("abs()", abs(_plain(self)))

    def __invert__(self):
        return self._frozen("~", ~_plain(self))

    def _bits(self, o, how, fn, reverse=False):
        if isinstance(o, bool) or not isinstance(o, int):
            return NotImplemented
        if isinstance(o, SymInt):
            o._frozen(how, None)
        a, b = (_num(o), _plain(self)) if reverse else (_plain(self), _num(o))
        return self._frozen(how, fn(a, b))

    def __and__(self, o):
        return self._bits(o, "&", int.__and__)

    def __rand__(self, o):
        return self._bits(o, "&", int.__and__, True)

    def __or__(self, o):
        return self._bits(o, "|", int.__or__)

    def __ror__(self, o):
        return self._bits(o, "|", int.__or__, True)

    def __xor__(self, o):
        return self._bits(o, "^", int.__xor__)

    def __rxor__(self, o):
        return self._bits(o, "^", int.__xor__, True)

    def __lshift__(self, o):
        return self._bits(o, "<<", int.__lshift__)

    def __rlshift__(self, o):
        return self._bits(o, "<<", int.__lshift__, True)

    def __rshift__(self, o):
        return self._bits(o, ">>", int.__rshift__)

    def __rrshift__(self, o):
        return self._bits(o, ">>", int.__rshift__, True)

    def __divmod__(self, o):
        return (self // o, self % o)

    def __rdivmod__(self, o):
        return (o // self, o % self)

    def _cmp(self, o, name, fn):
        if isinstance(o, bool) or not isinstance(o, (int, float)):
            return NotImplemented
        r = fn(_plain(self), _num(o))
        _note("cmp", self, o, r, name)
        return r

    def __eq__(self, o):
        return self._cmp(o, "==", _eq)

    def __ne__(self, o):
        return self._cmp(o, "!=", _ne)

    def __lt__(self, o):
        return self._cmp(o, "<", _lt)

    def __le__(self, o):
        return self._cmp(o, "<=", _le)

    def __gt__(self, o):
        return self._cmp(o, ">", _gt)

    def __ge__(self, o):
        return self._cmp(o, ">=", _ge)

    def __bool__(self):
        r = _plain(self) != 0
        _note("cmp", self, 0, r, "!=")
        return r

    def __repr__(self):
        return int.__repr__(self)

    __str__ = __repr__
    __hash__ = int.__hash__


_add, _sub, _mul = operator.add, operator.sub, operator.mul
_floordiv, _mod = operator.floordiv, operator.mod
_eq, _ne, _lt, _le, _gt, _ge = operator.eq, operator.ne, operator.lt, operator.le, \
    operator.gt, operator.ge
_COUNTED = ("split", "chunk", "unbind")  # ops whose number of outputs follows a size
CMP = {"==": _eq, "!=": _ne, "<": _lt, "<=": _le, ">": _gt, ">=": _ge}


# ---------------------------------------------------------------------------------- Tracer
class Tracer:
    """Builds a Graph from dispatch events. ``state``: {id(tensor): (tensor, name, role)} for
    module parameters and buffers, which become formal parameters when first read."""

    jit_trace = True   # ember.jit.trace records (torch.jit.is_tracing); ember.compile's: False

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
        self.guards = []       # (kind, a, b, result, how, (file, line, source)): shape guards

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
                    f"a tensor from trace '{other.name}' ({what} there, {ov.ref} : "
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
                args = [o if o is not None else _num(a) for o, a in zip(ops, expr[1:])]
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
            return _plain(c) if v is None else SymRef(v)
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
        if isinstance(c, self._Tensor):
            # a tensor where the op takes a value it reads in Python (linalg.pinv's atol):
            # stored as its array (what the kernel reads); a traced one's values are frozen
            v = self.known(c)
            if v is not None and v.role not in ("param", "buffer") and \
                    not (v.node is not None and v.node.kind == "constant"):
                self.warn("a traced tensor passed as a value the op reads in Python",
                          "tensor_value")
            return self._array_ref(c._data)
        if isinstance(c, np.ndarray):
            for t, v in self.env.values():
                if isinstance(t, self._Tensor) and t._data is c and v.role != "param" and \
                        v.role != "buffer" and not (v.node is not None and v.node.kind == "constant"):
                    self.warn("a traced tensor used as an index", "index")
                    break
            return self._array_ref(c)
        if isinstance(c, type) and issubclass(c, np.generic):
            return np.dtype(c)
        if hasattr(c, "standard_normal") and hasattr(c, "manual_seed"):
            return self._gen(c)
        return c  # dtypes and other plain values

    def _array_ref(self, c):
        name = f"c{len(self.graph.constants)}"
        while name in self.graph.constants:
            name += "_"
        self.graph.constants[name] = c
        return ArrayRef(name)

    def _arg(self, t):
        if isinstance(t, self._Tensor):
            return self.value_of(t)
        if isinstance(t, SymInt):
            v = self.sym_value(t)
            return _plain(t) if v is None else SymRef(v)
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
        if op.name in _COUNTED:
            self._guard_count(op.name, tensors[0], dict(zip(names, consts)), len(outputs))
        if self.parent is not None:
            self.parent.record(op, tensors, consts, outputs)

    def _guard_count(self, name, t, c, count):
        """The number of outputs of ``split``/``chunk``/``unbind`` is fixed in the graph: guard
        it (it follows the size of the split dimension)."""
        nd = t._data.ndim
        d = c.get("dim", 0) % max(nd, 1)
        n = SymInt(t._data.shape[d], ("size", t, d))
        if name == "unbind":
            k = n
        elif name == "split":  # a list of sizes fixes the count itself
            s = c.get("split_size")
            k = (n + s - 1) // s if isinstance(s, int) and s > 0 else None
        else:  # chunk: pieces of ceil(n / chunks)
            m = c.get("chunks")
            each = (n + m - 1) // m if isinstance(m, int) and m > 0 else None
            k = (n + each - 1) // each if each else None
        if isinstance(k, SymInt):
            self.guards.append(("value", k, None, count, f"the number of outputs of {name}",
                                user_frame()))

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
                self.shape_guard("value", SymInt(n, ("size", tensor, dim)), None, n, "len()")
            return n
        if self.known(tensor) is None and self.parent is None:
            return n
        return SymInt(n, ("size", tensor, dim))

    def numel(self, tensor):
        """``tensor.numel()`` as a SymInt (the product of its traced sizes)."""
        n = 1
        for d in range(tensor._data.ndim):
            n = n * self.size(tensor, d) if d else self.size(tensor, d)
        return n

    # ---- shape guards ------------------------------------------------------------------------
    def shape_guard(self, kind, a, b, result, how, where=None):
        """Python code made a plain value of SymInt ``a`` (``kind='value'``: ``result`` is its
        int) or compared it with ``b`` (``kind='cmp'``: ``how`` is the operator, ``result`` the
        bool). The traced callable re-checks it on inputs of other shapes (``guard_table``).
        ``where``: (file, line, source) of the read (default: the user's current line)."""
        where = where or user_frame()
        self.guards.append((kind, a, b, result, how, where))
        forward = getattr(self.parent, "shape_guard", None)
        if forward is not None:
            forward(kind, a, b, result, how, where)

    def shape_read(self, tensor, dims, op, why):
        """Code inside ``op`` computed a constant from ``tensor``'s sizes ``dims`` (``why``):
        guard them, so a call with other sizes there warns."""
        if self.known(tensor) is None:
            forward = getattr(self.parent, "shape_read", None)
            if forward is not None:
                forward(tensor, dims, op, why)
            return
        nd = tensor._data.ndim
        for d in dims:
            d %= max(nd, 1)
            n = tensor._data.shape[d]
            self.shape_guard("value", SymInt(n, ("size", tensor, d)), None, n, f"{op}: {why}")

    def _sym_text(self, s):
        if not isinstance(s, SymInt):
            return repr(s)
        e = s.expr
        if e[0] == "size":
            v = self.known(e[1])
            return f"{v.ref if v is not None else '%?'}.size({e[2]})"
        if e[0] == "tensor":
            v = self.known(e[1])
            return f"{v.ref if v is not None else '%?'}.item()"
        if e[0] == "neg":
            return f"-{self._sym_text(e[1])}"
        sym = {"add": "+", "sub": "-", "mul": "*", "floordiv": "//", "remainder": "%"}[e[0]]
        return f"({self._sym_text(e[1])} {sym} {self._sym_text(e[2])})"

    def guard_table(self):
        """The shape guards that depend on this trace's inputs, their int Values recorded in the
        graph (as ``size`` and int arithmetic nodes, dead in the graph itself): a list of
        ``(kind, lhs, rhs, expected, how, where, text)`` with ``lhs``/``rhs`` a Value or int;
        one entry per distinct check."""
        out, seen = [], set()
        for kind, a, b, result, how, where in self.guards:
            la = self.sym_value(a) if isinstance(a, SymInt) else None
            lb = self.sym_value(b) if isinstance(b, SymInt) else None
            if la is None and lb is None:
                continue  # the value does not depend on the inputs' shapes
            lhs = la if la is not None else _num(a)
            rhs = lb if lb is not None else _num(b)
            key = (kind, id(lhs) if la is not None else lhs, id(rhs) if lb is not None else rhs,
                   result, how if kind == "cmp" else None)
            if key in seen:
                continue
            seen.add(key)
            text = self._sym_text(a) if kind == "value" else \
                f"{self._sym_text(a)} {how} {self._sym_text(b)}"
            out.append((kind, lhs, rhs, result, how, where, text))
        return out

    def _traced(self, tensor):
        """Whether ``tensor`` is a value of this trace that depends on its formals."""
        v = self.known(tensor)
        return v is not None and not (v.node is not None and v.node.kind == "constant")

    # reads whose value a trace does not keep (a printed tensor): a plain trace records nothing
    # for them; ``ember.compile`` breaks there, so the print runs on every call as in eager
    DISPLAY_READS = ("repr", "format")
    breaks_on_display = False

    def python_value(self, tensor, what):
        if self._traced(tensor) and (self.breaks_on_display or what not in self.DISPLAY_READS):
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

    def untraceable(self, what, cls=EmberRuntimeError):
        """An op no trace can record (``resize_``, ``view(dtype)``) was called: raises
        ``cls(what)``; ``ember.compile``'s tracer records a graph break instead and the op runs
        (the function then runs eagerly for those inputs)."""
        raise cls(what)

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
