"""The JIT's intermediate representation: a let-binding (SSA) list of nodes under a lambda.

A ``Graph`` has formal parameters (``graph.inputs``: the traced function's tensor inputs, then the
parameters and buffers it reads, named by their state-dict keys), an ordered list of ``Node``s
each binding one or more fresh ``Value``s, and a return tuple (``graph.outputs``).

A ``Node`` has ``kind`` (the op's name in the op spec, or one of the few JIT kinds in
``SPECIAL_KINDS``), ``args`` (the op's tensor slots, in spec order: a ``Value``, a Python scalar
where the op accepts one, ``None`` for an absent optional tensor, or a list of those for a
``Tensor[]`` slot), ``attrs`` (the op's constant arguments by spec name, as Python values) and
``outputs``. Constants may hold three kinds of reference: ``SymRef`` (a traced shape value used as
an int), ``GenRef`` (a random generator) and ``ArrayRef`` (an array held in ``graph.constants``).

A ``fusion_group`` node (made by ``passes.fuse``) holds a pointwise subgraph in
``node.attrs["graph"]``; it prints as a call of ``fusion_group_<i>`` (numbered in graph order) and
the subgraphs follow the outer graph as ``with fusion_group_<i> = graph(...)`` blocks.

Text form (``str(graph)``; ``parse`` reads it back into an equal graph)::

    graph(%x : f32[2, 8],
          %fc.weight : f32[4, 8] = param,
          %fc.bias : f32[4] = param):
      %1 : f32[2, 4] = linear(%x, %fc.weight, %fc.bias)
      %2 : i64[] = size(%x, dim=0)
      %3 : f32[2, 4] = reshape(%1, shape=(int(%2), -1))
      return (%3)

A formal whose name starts with a digit (a ``Sequential``'s ``0.weight``) prints as
``%self.0.weight`` (``Value.ref``), never as ``%0.weight`` beside a value ``%0``; its name is
still ``0.weight`` (the state-dict key, as ONNX export names the initializer).
"""
import ast
import math
import re

import numpy as np

__all__ = ["Graph", "Node", "Value", "SymRef", "GenRef", "ArrayRef", "GraphVisitor", "parse",
           "SPECIAL_KINDS", "LintError"]

# Kinds that are not spec ops: a constant from graph.constants, Tensor.detach, an in-place write of
# arg 1 into arg 0 (the spec's copy_), and a custom autograd Function (``attrs["cls"]`` holds the
# class itself; it prints as ``function('<registered name>')``, see ``function_label``).
SPECIAL_KINDS = ("constant", "detach", "copy_", "python_function", "fusion_group")
_GROUP = re.compile(r"fusion_group_(\d+)")

_DTYPE_SHORT = {"float32": "f32", "float64": "f64", "float16": "f16", "int64": "i64",
                "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "b8",
                "complex64": "c64", "complex128": "c128"}
_DTYPE_LONG = {v: k for k, v in _DTYPE_SHORT.items()}


class LintError(AssertionError):
    """A graph invariant does not hold."""


# ---------------------------------------------------------------------------------- references
class SymRef:
    """A traced shape value (a 0-d int64 ``Value``) used where the op takes a Python int."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return f"int({self.value.ref})"


class GenRef:
    """A random generator: ``'default'`` (ember's default generator) or a name in
    ``graph.generators``. Each run draws fresh numbers from it."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __eq__(self, other):
        return isinstance(other, GenRef) and other.name == self.name

    def __hash__(self):
        return hash(("gen", self.name))

    def __repr__(self):
        return "default_generator" if self.name == "default" else f"generator({self.name!r})"


class ArrayRef:
    """An ndarray constant argument held in ``graph.constants[name]``."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __eq__(self, other):
        return isinstance(other, ArrayRef) and other.name == self.name

    def __hash__(self):
        return hash(("array", self.name))

    def __repr__(self):
        return f"array({self.name!r})"


# ---------------------------------------------------------------------------------- values
class Value:
    """A named, typed result: a formal parameter (``node is None``) or a node's output."""

    __slots__ = ("name", "dtype", "shape", "node", "index", "uses", "role", "graph")

    def __init__(self, name, dtype, shape, node=None, index=0, role=None):
        self.name = name
        self.dtype = np.dtype(dtype)
        self.shape = tuple(int(s) for s in shape)
        self.node = node
        self.index = index
        self.uses = []      # one entry per use: the using Node
        self.role = role    # formals: 'input' | 'param' | 'buffer'; None for node outputs
        self.graph = None

    @property
    def ref(self):
        """The value as the text form writes it: ``%name``; a formal named by a state-dict key
        that starts with a digit (a ``Sequential``'s ``0.weight``) as ``%self.0.weight``, so
        that no formal reads as a value (``%0``) or something of one."""
        if self.node is None and self.name[:1].isdigit() and not self.name.isdigit():
            return f"%self.{self.name}"
        return f"%{self.name}"

    @property
    def type_str(self):
        short = _DTYPE_SHORT.get(self.dtype.name, self.dtype.name)
        return f"{short}[{', '.join(str(s) for s in self.shape)}]"

    @property
    def users(self):
        """Distinct nodes using this value, in graph order of first use."""
        seen, out = set(), []
        for n in self.uses:
            if id(n) not in seen:
                seen.add(id(n))
                out.append(n)
        return out

    def replace_all_uses_with(self, other):
        """Make every node (and the graph's return) that reads this value read ``other``."""
        for n in list(self.users):
            n.replace_input(self, other)
        g = self.graph
        if g is not None:
            g.outputs = [other if o is self else o for o in g.outputs]

    def __repr__(self):
        return f"{self.ref} : {self.type_str}"


# ---------------------------------------------------------------------------------- nodes
def _walk(x):
    """Values referenced in an argument (Values directly, or inside SymRefs, lists and tuples)."""
    if isinstance(x, Value):
        yield x
    elif isinstance(x, SymRef):
        yield x.value
    elif isinstance(x, (list, tuple)):
        for y in x:
            yield from _walk(y)
    elif isinstance(x, slice):
        for y in (x.start, x.stop, x.step):
            yield from _walk(y)


# what may hold a Value (besides a Value itself): Node.inputs walks only these
_NESTED = (Value, SymRef, list, tuple, slice)


def map_arg(x, leaf):
    """An argument rebuilt with ``leaf(y)`` in place of each item ``y`` that is not a list,
    tuple or slice (Values, SymRefs, constants: ``leaf`` returns what stands there)."""
    if isinstance(x, list):
        return [map_arg(y, leaf) for y in x]
    if isinstance(x, tuple):
        return tuple(map_arg(y, leaf) for y in x)
    if isinstance(x, slice):
        return slice(map_arg(x.start, leaf), map_arg(x.stop, leaf), map_arg(x.step, leaf))
    return leaf(x)


def _subst(x, old, new):
    def leaf(y):
        if y is old:
            return new
        if isinstance(y, SymRef) and y.value is old:
            return SymRef(new)
        return y
    return map_arg(x, leaf)


class Node:
    """One let-binding: ``outputs = kind(args..., **attrs)``."""

    __slots__ = ("kind", "args", "attrs", "outputs", "graph", "source")

    def __init__(self, kind, args=(), attrs=None):
        self.kind = kind
        self.args = list(args)
        self.attrs = dict(attrs or {})
        self.outputs = []
        self.graph = None
        self.source = None  # "file:line" of the user's code that made it, when traced

    @property
    def inputs(self):
        """The Values this node reads (tensor slots first, then traced ints in constants)."""
        out = []
        for a in self.args:
            if isinstance(a, Value):
                out.append(a)
            elif isinstance(a, _NESTED):
                out.extend(_walk(a))
        for a in self.attrs.values():
            if isinstance(a, _NESTED):
                out.extend(_walk(a))
        return out

    @property
    def output(self):
        if len(self.outputs) != 1:
            raise ValueError(f"{self.kind} has {len(self.outputs)} outputs")
        return self.outputs[0]

    @property
    def op(self):
        """The spec ``Op`` record for this node's kind (None for JIT-only kinds)."""
        from ember.autograd._generated.records import OPS
        return OPS.get(self.kind)

    def arg(self, name):
        """A tensor slot or constant argument by its spec name."""
        if name in self.attrs:
            return self.attrs[name]
        op = self.op
        if op is not None and not op.list_input and name in op.tensor_names:
            i = op.tensor_names.index(name)
            return self.args[i] if i < len(self.args) else None
        raise KeyError(f"{self.kind} has no argument {name!r}")

    def set_arg(self, name, value):
        """Replace a tensor slot or constant argument by its spec name (keeps uses consistent)."""
        for v in self.inputs:
            v.uses.remove(self)
        if name in self.attrs:
            self.attrs[name] = value
        else:
            self.args[self.op.tensor_names.index(name)] = value
        for v in self.inputs:
            v.uses.append(self)

    def replace_input(self, old, new):
        for v in self.inputs:
            if v is old:
                old.uses.remove(self)
                new.uses.append(self)
        self.args = [_subst(a, old, new) for a in self.args]
        self.attrs = {k: _subst(a, old, new) for k, a in self.attrs.items()}

    def is_pure(self):
        """No side effect and no randomness: safe to remove when unused, merge and fold."""
        if self.kind in ("copy_", "python_function"):
            return False
        op = self.op
        return not (op is not None and op.random)

    def __repr__(self):
        return _fmt_node(self)


# ---------------------------------------------------------------------------------- graph
class Graph:
    """A lambda over ``inputs`` returning ``outputs``, with the ordered let-bound ``nodes``."""

    def __init__(self):
        self.inputs = []
        self.nodes = []
        self.outputs = []
        self.constants = {}   # name -> ndarray (constant nodes and ArrayRefs)
        self.generators = {}  # name -> ember.Generator (GenRef other than 'default')
        self._next = 1
        self._names = set()

    # ---- construction ----------------------------------------------------------------------
    def _fresh(self, name=None):
        if name is None:
            while str(self._next) in self._names:
                self._next += 1
            name = str(self._next)
            self._next += 1
        elif name in self._names:
            base, i = name, 1
            while f"{base}_{i}" in self._names:
                i += 1
            name = f"{base}_{i}"
        self._names.add(name)
        return name

    def add_input(self, name, dtype, shape, role="input"):
        """Append a formal parameter (role 'input', 'param' or 'buffer'); characters the text
        form's names do not allow (a state key such as ``onnx::w/1``) become ``_``."""
        v = Value(self._fresh(re.sub(r"[^A-Za-z0-9_.]", "_", name)), dtype, shape, role=role)
        v.graph = self
        self.inputs.append(v)
        return v

    def create_node(self, kind, args=(), attrs=None, out_types=(), names=None):
        """A new node (not yet inserted) with outputs of ``out_types`` [(dtype, shape), ...]."""
        n = Node(kind, args, attrs)
        for i, (dt, sh) in enumerate(out_types):
            v = Value(self._fresh(names[i] if names else None), dt, sh, node=n, index=i)
            v.graph = self
            n.outputs.append(v)
        return n

    def insert(self, node, index=None, before=None, after=None):
        """Insert ``node`` at ``index``, before/after another node, or at the end."""
        if before is not None:
            index = self.index(before)
        elif after is not None:
            index = self.index(after) + 1
        if index is None:
            self.nodes.append(node)
        else:
            self.nodes.insert(index, node)
        node.graph = self
        for v in node.inputs:
            v.uses.append(node)
        return node

    def add_node(self, kind, args=(), attrs=None, out_types=(), **where):
        """Create and insert a node; returns it."""
        return self.insert(self.create_node(kind, args, attrs, out_types), **where)

    def add_constant(self, array, name=None, **where):
        """Store ``array`` in ``graph.constants`` and insert a ``constant`` node; returns its Value."""
        array = np.asarray(array)
        if name is None:
            i = len(self.constants)
            while f"c{i}" in self.constants:
                i += 1
            name = f"c{i}"
        self.constants[name] = array
        return self.add_node("constant", (), {"name": name}, [(array.dtype, array.shape)],
                             **where).output

    def remove(self, node):
        """Remove a node whose outputs are unused."""
        for o in node.outputs:
            if o.uses or o in self.outputs:
                raise ValueError(f"cannot remove {node.kind}: output %{o.name} is still used")
        for v in node.inputs:
            v.uses.remove(node)
        self.nodes.remove(node)
        for o in node.outputs:
            self._names.discard(o.name)
        node.graph = None

    def remove_nodes(self, nodes):
        """Remove ``nodes`` at once (one pass over the node list): their outputs may be read
        only by each other."""
        ids = {id(n) for n in nodes}
        outs = {id(o) for o in self.outputs}
        for n in nodes:
            for o in n.outputs:
                if id(o) in outs or any(id(u) not in ids for u in o.uses):
                    raise ValueError(f"cannot remove {n.kind}: output %{o.name} is still used")
        for n in nodes:
            for v in n.inputs:
                v.uses.remove(n)
            for o in n.outputs:
                self._names.discard(o.name)
            n.graph = None
        self.nodes[:] = [n for n in self.nodes if id(n) not in ids]

    def index(self, node):
        for i, n in enumerate(self.nodes):
            if n is node:
                return i
        raise ValueError("node is not in this graph")

    def values(self):
        """Every value: formals, then node outputs in order."""
        out = list(self.inputs)
        for n in self.nodes:
            out.extend(n.outputs)
        return out

    def find_nodes(self, kind):
        return [n for n in self.nodes if n.kind == kind]

    def __iter__(self):
        return iter(list(self.nodes))

    def __len__(self):
        return len(self.nodes)

    # ---- whole-graph operations ----------------------------------------------------------
    def copy(self):
        """A deep copy of the structure (constants and generators shared by reference): the
        graph ``parse(str(self))`` reads back (constants normalised as the text form writes
        them: NumPy scalars as Python numbers, scalar types as dtypes; a fusion group keeps its
        subgraph only), built directly instead of through the text."""
        g = Graph()
        g.constants = dict(self.constants)
        g.generators = dict(self.generators)
        vmap = {}
        for v in self.inputs:
            w = Value.__new__(Value)
            w.name, w.dtype, w.shape, w.node, w.index = v.name, v.dtype, v.shape, None, 0
            w.uses, w.role, w.graph = [], v.role, g
            vmap[id(v)] = w
            g.inputs.append(w)

        def leaf(x):
            if isinstance(x, Value):
                try:
                    return vmap[id(x)]
                except KeyError:
                    raise ValueError(f"%{x.name} is used before it is defined") from None
            if isinstance(x, SymRef):
                return SymRef(leaf(x.value))
            return _copy_const(x)
        nodes = g.nodes
        for n in self.nodes:
            m = Node.__new__(Node)
            m.kind, m.graph, m.source = n.kind, g, n.source
            m.args = [map_arg(a, leaf) for a in n.args]
            if n.kind == "fusion_group":
                m.attrs = {"graph": n.attrs["graph"].copy()}
            else:
                m.attrs = {k: map_arg(a, leaf) for k, a in n.attrs.items()}
            outs = []
            for o in n.outputs:
                w = Value.__new__(Value)
                w.name, w.dtype, w.shape, w.node, w.index = o.name, o.dtype, o.shape, m, o.index
                w.uses, w.role, w.graph = [], None, g
                vmap[id(o)] = w
                outs.append(w)
            m.outputs = outs
            nodes.append(m)
            for v in m.inputs:
                v.uses.append(m)
        g.outputs = [leaf(o) for o in self.outputs]
        names = g._names
        for v in g.inputs:
            names.add(v.name)
        for m in nodes:
            for o in m.outputs:
                names.add(o.name)
        for name in names:
            if name.isdigit():
                g._next = max(g._next, int(name) + 1)
        return g

    def lint(self):
        """Check the invariants; raise LintError naming the first violation. Returns self."""
        from ember.autograd._generated.records import OPS
        defined = set()
        names = set()

        def define(v, where):
            if id(v) in defined:
                raise LintError(f"%{v.name} is defined twice ({where})")
            if v.name in names:
                raise LintError(f"name %{v.name} is used by two values ({where})")
            defined.add(id(v))
            names.add(v.name)
            if v.graph is not self:
                raise LintError(f"%{v.name} belongs to another graph")

        for v in self.inputs:
            if v.node is not None or v.role not in ("input", "param", "buffer"):
                raise LintError(f"formal %{v.name} has a producer or a bad role {v.role!r}")
            define(v, "formal")
        counts = {}
        for n in self.nodes:
            if n.graph is not self:
                raise LintError(f"node {n.kind} belongs to another graph")
            if n.kind not in OPS and n.kind not in SPECIAL_KINDS:
                raise LintError(f"unknown node kind {n.kind!r}")
            for v in n.inputs:
                if id(v) not in defined:
                    raise LintError(f"{n.kind} uses %{v.name} before it is defined")
                counts[id(v)] = counts.get(id(v), 0) + 1
            if not n.outputs:
                raise LintError(f"{n.kind} binds no value")
            for i, o in enumerate(n.outputs):
                if o.node is not n or o.index != i:
                    raise LintError(f"%{o.name} does not point back to its producer {n.kind}")
                define(o, n.kind)
            if n.kind == "python_function" and not _is_function_class(n.attrs.get("cls")):
                raise LintError(f"python_function %{n.outputs[0].name} holds no Function class")
            if n.kind == "constant" and n.attrs.get("name") not in self.constants:
                raise LintError(f"constant %{n.output.name} names a missing array")
            if n.kind == "fusion_group":
                sub = n.attrs.get("graph")
                if not isinstance(sub, Graph):
                    raise LintError(f"fusion_group %{n.outputs[0].name} holds no subgraph")
                sub.lint()
                if len(sub.inputs) != len(n.args) or len(sub.outputs) != len(n.outputs):
                    raise LintError(f"fusion_group %{n.outputs[0].name}: arity differs from its "
                                    "subgraph")
        for o in self.outputs:
            if id(o) not in defined:
                raise LintError(f"returned %{o.name} is not defined")
        for v in self.values():
            if len(v.uses) != counts.get(id(v), 0):
                raise LintError(f"%{v.name}: use list ({len(v.uses)}) disagrees with the nodes "
                                f"reading it ({counts.get(id(v), 0)})")
        return self

    def __str__(self):
        lines = []
        formals = [f"{v.ref} : {v.type_str}" + ("" if v.role == "input" else f" = {v.role}")
                   for v in self.inputs]
        lines.append("graph(" + ",\n      ".join(formals) + "):")
        groups = []
        for n in self.nodes:
            if n.kind == "fusion_group":
                groups.append(n.attrs["graph"])
                lines.append("  " + _fmt_node(n, f"fusion_group_{len(groups) - 1}"))
            else:
                lines.append("  " + _fmt_node(n))
        lines.append("  return (" + ", ".join(o.ref for o in self.outputs) + ")")
        for i, sub in enumerate(groups):
            lines.append(f"with fusion_group_{i} = " + str(sub).rstrip("\n"))
        return "\n".join(lines) + "\n"

    __repr__ = __str__

    def __eq__(self, other):
        if not isinstance(other, Graph):
            return NotImplemented
        return _graph_key(self) == _graph_key(other)

    __hash__ = None


class GraphVisitor:
    """Visit nodes in order, dispatching on kind: define ``visit_<kind>(node)``; other nodes go
    to ``generic_visit``. ``visit(graph)`` returns the graph."""

    def visit(self, graph):
        self.graph = graph
        for node in list(graph.nodes):
            if node.graph is graph:
                self.visit_node(node)
        return graph

    def visit_node(self, node):
        return getattr(self, "visit_" + node.kind, self.generic_visit)(node)

    def generic_visit(self, node):
        return None


# ---------------------------------------------------------------------------------- printing
def function_label(cls):
    """The name a custom Function class prints as: its registered name
    (``ember.jit.register_function``), else ``module.QualName@<id>``, unique in this process and
    read back only by ``Graph.copy`` (a saved file must use registered names)."""
    from ember.autograd.function import function_name
    name = function_name(cls)
    return name if name is not None else f"{cls.__module__}.{cls.__qualname__}@{id(cls):x}"


def _is_function_class(v):
    from ember.autograd.function import Function
    return isinstance(v, type) and issubclass(v, Function)


def fmt_const(v):
    """The text of a constant argument (parsed back by ``parse``)."""
    if isinstance(v, Value):
        return v.ref
    if _is_function_class(v):
        return f"function({function_label(v)!r})"
    if isinstance(v, (SymRef, GenRef, ArrayRef)):
        return repr(v)
    if v is None or isinstance(v, (bool, str)):
        return repr(v)
    if isinstance(v, (int, np.integer)):
        return repr(int(v))
    if isinstance(v, (float, np.floating)):
        v = float(v)
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, tuple):
        inner = ", ".join(fmt_const(x) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    if isinstance(v, list):
        return "[" + ", ".join(fmt_const(x) for x in v) + "]"
    if isinstance(v, slice):
        return f"slice({fmt_const(v.start)}, {fmt_const(v.stop)}, {fmt_const(v.step)})"
    if v is Ellipsis:
        return "..."
    if isinstance(v, np.dtype):
        return v.name
    if isinstance(v, type) and issubclass(v, np.generic):
        return np.dtype(v).name
    from ember import _dtype
    if isinstance(v, _dtype.dtype):
        return f"ember.{v.name}"
    if isinstance(v, complex):
        return repr(v)
    raise TypeError(f"cannot write constant {v!r} ({type(v).__name__}) in the IR text")


def _copy_const(v):
    """A constant argument as ``parse(fmt_const(v))`` gives it back (``Graph.copy``)."""
    if v is None or type(v) in (bool, int, float, str, complex) \
            or isinstance(v, (GenRef, ArrayRef, np.dtype)):
        return v
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v)
    if isinstance(v, (complex, np.complexfloating)):
        return complex(v)
    if v is Ellipsis or _is_function_class(v):
        return v
    if isinstance(v, type) and issubclass(v, np.generic):
        return np.dtype(v)
    from ember import _dtype
    if isinstance(v, _dtype.dtype):
        return v
    fmt_const(v)  # raises the text form's TypeError for anything it cannot write
    return v


def _fmt_node(n, label=None):
    outs = ", ".join(f"%{o.name} : {o.type_str}" for o in n.outputs)
    parts = [fmt_const(a) for a in n.args]
    if n.kind == "fusion_group":  # the subgraph prints after the graph (see Graph.__str__)
        return f"{outs} = {label or 'fusion_group'}({', '.join(parts)})"
    parts += [f"{k}={fmt_const(v)}" for k, v in n.attrs.items()]
    return f"{outs} = {n.kind}({', '.join(parts)})"


def _graph_key(g):
    """A canonical structure for equality: names of formals, kinds, args, attrs, types."""
    def key(x):
        if isinstance(x, Value):
            return ("%", x.name)
        if isinstance(x, SymRef):
            return ("int", x.value.name)
        if isinstance(x, (list, tuple)):
            return (type(x).__name__, tuple(key(y) for y in x))
        if isinstance(x, float) and math.isnan(x):
            return ("nan",)
        if isinstance(x, slice):
            return ("slice", key(x.start), key(x.stop), key(x.step))
        if isinstance(x, np.dtype):
            return ("dtype", x.name)
        return (type(x).__name__, x) if not isinstance(x, (GenRef, ArrayRef)) else repr(x)
    return (tuple((v.name, v.type_str, v.role) for v in g.inputs),
            tuple((n.kind, tuple(key(a) for a in n.args),
                   tuple((k, key(v)) for k, v in n.attrs.items()),
                   tuple((o.name, o.type_str) for o in n.outputs)) for n in g.nodes),
            tuple(o.name for o in g.outputs))


# ---------------------------------------------------------------------------------- parsing
_NAME = r"[A-Za-z0-9_.]+"
_VREF = re.compile(r"%(" + _NAME + r")")
_DECL = re.compile(r"%(" + _NAME + r")\s*:\s*(\w+)\[([^\]]*)\](?:\s*=\s*(\w+))?")


def _parse_type(t, dims):
    dt = _DTYPE_LONG.get(t, t)
    shape = tuple(int(s) for s in dims.split(",") if s.strip())
    return np.dtype(dt), shape


class _ConstEval:
    """Evaluate the constant part of a parsed call: literals, tuples, lists, slice(), int(%v),
    dtype names, generator references. No eval()."""

    def __init__(self, values, graph, functions=None):
        self.values = values
        self.graph = graph
        self.functions = functions or {}

    def function(self, name):
        """A custom Function class by name: ``functions`` given to ``parse``, else the registry
        (``ember.jit.register_function``); nothing is imported."""
        from ember.autograd.function import lookup_function
        if not isinstance(name, str):
            raise ValueError(f"function() takes a name string, got {name!r}")
        cls = self.functions.get(name) or lookup_function(name)
        if cls is None:
            raise ValueError(f"unknown custom Function {name!r}: register the class first with "
                             f"ember.jit.register_function(cls, {name!r}) (names are never "
                             f"imported)")
        return cls

    def __call__(self, node):
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Tuple):
            return tuple(self(e) for e in node.elts)
        if isinstance(node, ast.List):
            return [self(e) for e in node.elts]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            v = self(node.operand)
            return -v
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
            a, b = self(node.left), self(node.right)  # a complex literal, as repr writes it
            if not (isinstance(b, complex) and isinstance(a, (int, float))):
                raise ValueError(f"cannot read constant {ast.unparse(node)!r}")
            return complex(a, 0) + b if isinstance(node.op, ast.Add) else complex(a, 0) - b
        if isinstance(node, ast.Name):
            if node.id.startswith("__v_"):
                return self._value(node.id)
            if node.id == "inf":
                return math.inf
            if node.id == "nan":
                return math.nan
            if node.id in ("infj", "nanj"):
                return complex(0, math.inf if node.id == "infj" else math.nan)
            if node.id == "default_generator":
                return GenRef("default")
            return np.dtype(node.id)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id == "ember":
            from ember import _dtype
            dt = getattr(_dtype, node.attr if node.attr != "bool" else "bool_", None)
            if not isinstance(dt, _dtype.dtype):
                raise ValueError(f"unknown dtype 'ember.{node.attr}'")
            return dt
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            f = node.func.id
            args = [self(a) for a in node.args]
            if f == "int":
                return SymRef(args[0])
            if f == "slice":
                return slice(*args)
            if f == "generator":
                return GenRef(args[0])
            if f == "array":
                return ArrayRef(args[0])
            if f == "function":
                return self.function(*args)
        raise ValueError(f"cannot read constant {ast.unparse(node)!r}")

    def _value(self, ident):
        name = self.names[ident]
        try:
            return self.values[name]
        except KeyError:
            raise ValueError(f"%{name} is used before it is defined") from None


def parse(text, constants=None, generators=None, functions=None):
    """Read the text form back into a Graph (``constants``: the arrays constant nodes name).

    ``function('name')`` constants (custom autograd Functions) resolve through ``functions``
    (name -> class) and then the registry of ``ember.jit.register_function``; an unknown name
    is a ValueError. Nothing the text names is ever imported.
    """
    g = Graph()
    g.constants = dict(constants or {})
    g.generators = dict(generators or {})
    values = {}
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    blocks = {}  # fusion_group_<i> -> its subgraph text (the "with" blocks after the graph)
    for j, ln in enumerate(lines):
        if ln.startswith("with "):
            body, lines = lines[j:], lines[:j]
            cur = None
            for b in body:
                m = re.match(r"with (fusion_group_\d+) = (graph\(.*)", b)
                if m:
                    cur = m.group(1)
                    blocks[cur] = [m.group(2)]
                elif cur is None:
                    raise ValueError(f"cannot read {b!r}")
                else:
                    blocks[cur].append(b)
            break
    groups = {}
    header = []
    i = 0
    while True:
        header.append(lines[i])
        if lines[i].rstrip().endswith("):"):
            break
        i += 1
    head = " ".join(header)
    if not head.startswith("graph("):
        raise ValueError("IR text must start with 'graph('")
    for m in _DECL.finditer(head):
        name, t, dims, role = m.groups()
        dt, shape = _parse_type(t, dims)
        # %self.0.weight: the formal 0.weight (Value.ref)
        own = name[5:] if name.startswith("self.") and name[5:6].isdigit() else name
        v = g.add_input(own, dt, shape, role or "input")
        values[name] = v
    ev = _ConstEval(values, g, functions)
    for ln in lines[i + 1:]:
        ln = ln.strip()
        if ln.startswith("return"):
            body = ln[len("return"):].strip().strip("()")
            g.outputs = [values[m.group(1)] for m in _VREF.finditer(body)]
            break
        lhs, rhs = _split_binding(ln)
        decls = [_DECL.fullmatch(d.strip()) for d in _split_top(lhs)]
        if not all(decls):
            raise ValueError(f"cannot read binding {ln!r}")
        names = {}

        def sub(m):
            ident = "__v_" + re.sub(r"\W", "_", m.group(1)) + f"_{len(names)}"
            names[ident] = m.group(1)
            return ident
        call = ast.parse(_VREF.sub(sub, rhs), mode="eval").body
        ev.names = names
        kind = call.func.id
        args = [ev(a) for a in call.args]
        attrs = {kw.arg: ev(kw.value) for kw in call.keywords}
        if _GROUP.fullmatch(kind):
            if kind not in blocks:
                raise ValueError(f"{kind} is called but has no 'with {kind} = graph(...)' block")
            if kind in groups:
                raise ValueError(f"{kind} is called twice")
            groups[kind] = True
            attrs = {"graph": parse("\n".join(blocks[kind]))}
            kind = "fusion_group"
        types = [_parse_type(d.group(2), d.group(3)) for d in decls]
        node = g.create_node(kind, args, attrs, types, names=[d.group(1) for d in decls])
        g.insert(node)
        for o in node.outputs:
            values[o.name] = o
    for name in list(g._names):
        if name.isdigit():
            g._next = max(g._next, int(name) + 1)
    return g


def _split_top(s):
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return parts


def _split_binding(ln):
    depth = 0
    for j, ch in enumerate(ln):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "=" and depth == 0 and ln[j + 1] != "=" and ln[j - 1] not in "=!<>":
            return ln[:j], ln[j + 1:].strip()
    raise ValueError(f"cannot read binding {ln!r}")
