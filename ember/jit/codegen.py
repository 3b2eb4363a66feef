"""Graph -> Python source, and the callables the source runs on.

The generated function takes the graph's formals positionally and returns a tuple. Every node is
one assignment; a value is ``del``-ed right after the statement that last reads it, so
intermediates are freed as early as in the interpreter. The same source runs in two modes that
bind its names differently:

- ``array``: each op name is the op's kernel, called on ndarrays (no Tensor objects, no autograd,
  no dispatch): the fast inference path.
- ``tensor``: each op name goes through ``dispatch`` on Tensors, so autograd records a backward
  graph and an enclosing tracer sees every op (used when grad is needed or while tracing).

This module is the one writer of array-mode source. What differs between the array-mode
programs -- the traced function's fast path, a compiled training step, an inference plan -- is
which **lowering rules** it asks, in order, before writing a node as its kernel call: a rule
answers a ``Statement`` (the source of that node, possibly folding later nodes into it) or
None. ``fastpath.Rule`` specialises common patterns on the recorded dtypes; an inference plan
(``ember.jit.plan``) adds its convolution/linear steps, fused groups and static reshapes, and
passes its sizes as constants. The interpreter (``ember.jit.interpreter``) stays the reference
every generated program is tested against.

With a memory plan (``generate(..., plan=...)``, array mode: ``ember.jit.passes.memory``) the
planned nodes write into an argument dying at their node, or into the buffers of an arena
(globals ``arena_<i>``, allocated once with the compiled function and reused at every call):
GEMMs and ``linear`` through ``fastpath.matmul_into``/``linear_into``, float arithmetic
through ``fastpath.binary_into``, fusion groups through ``FusedGroup.run_arrays_out``.
"""
import functools
import keyword
import math
import re

import numpy as np

from ember.autograd.dispatch import dispatch, dispatch_inplace
from ember.autograd.state import STATE
from ember.jit.ir import ArrayRef, GenRef, SymRef, Value

__all__ = ["generate", "compile_graph", "namespace", "node_callable", "resolve_class",
           "Statement", "SKIP", "Writer"]

_RESERVED = {"sym", "asarray", "inf", "nan", "slice", "ember"}


def _ident(name, taken):
    base = name if not name.isdigit() else f"v{name}"
    base = re.sub(r"\W", "_", base)
    if base[0].isdigit():
        base = "v" + base
    if keyword.iskeyword(base) or base in taken:
        i = 1
        while f"{base}_{i}" in taken:
            i += 1
        base = f"{base}_{i}"
    taken.add(base)
    return base


class Statement:
    """How ``generate`` writes a node in place of its kernel call (array mode): ``rhs``, the
    source of a right-hand side assigned to ``defines`` (a tuple unpacked into them when
    ``unpack``), or ``lines``, statements that assign ``defines`` themselves. ``defines``
    defaults to the node's outputs. A rule that folds later nodes into one statement answers
    ``SKIP`` for them; a value no statement defines is never read or freed."""
    __slots__ = ("rhs", "lines", "defines", "unpack")

    def __init__(self, rhs=None, lines=None, defines=None, unpack=None):
        self.rhs, self.lines, self.defines, self.unpack = rhs, lines, defines, unpack


SKIP = Statement(lines=(), defines=())


class Writer:
    """What a lowering rule writes with: ``ref`` (the source of a node argument: a value's
    name, a literal, a bound global), ``bind`` (a global holding an object: values reach the
    source as names, never as text) and ``temp`` (a fresh local name)."""

    def __init__(self, graph, names, glob, taken, ints, consts):
        self.graph, self.names, self.glob, self.taken = graph, names, glob, taken
        self.ints, self.consts = ints, consts

    def bind(self, x, hint="k"):
        ident = _ident(hint, self.taken)
        self.glob[ident] = ("obj", x)
        return ident

    def temp(self, hint):
        return _ident(hint, self.taken)

    def ref(self, x):
        if isinstance(x, Value):
            if id(x) in self.consts:
                return self.bind(np.asarray(self.consts[id(x)]), "size")
            return self.names[id(x)]
        if isinstance(x, SymRef):
            if id(x.value) in self.consts:
                return repr(int(self.consts[id(x.value)]))
            if id(x.value) in self.ints:
                return self.names[id(x.value)]
            return f"sym({self.names[id(x.value)]})"
        if isinstance(x, GenRef):
            ident = "default_generator" if x.name == "default" else f"gen_{x.name}"
            self.glob[ident] = ("gen", x.name)
            return ident
        if isinstance(x, ArrayRef):   # an ndarray attribute (an index): one in both modes
            ident = _ident(f"const_{x.name}", self.taken)
            self.glob[ident] = ("array_attr", x.name)
            return ident
        if isinstance(x, list):
            return "[" + ", ".join(self.ref(y) for y in x) + "]"
        if isinstance(x, tuple):
            inner = ", ".join(self.ref(y) for y in x)
            return f"({inner},)" if len(x) == 1 else f"({inner})"
        if isinstance(x, slice):
            return f"slice({self.ref(x.start)}, {self.ref(x.stop)}, {self.ref(x.step)})"
        if x is Ellipsis:
            return "..."
        if isinstance(x, float):
            if math.isnan(x):
                return "nan"
            if math.isinf(x):
                return "inf" if x > 0 else "-inf"
            return repr(x)
        if isinstance(x, np.dtype):
            ident = f"dtype_{x.name}"
            self.glob[ident] = ("dtype", x)
            return ident
        if isinstance(x, complex) and not (math.isfinite(x.real) and math.isfinite(x.imag)):
            return f"complex({self.ref(x.real)}, {self.ref(x.imag)})"
        if x is None or isinstance(x, (bool, int, str, complex)):
            return repr(x)
        return self.bind(x, "obj")


def generate(graph, name="forward", specialize=False, plan=None, rules=(), consts=None):
    """(source, info): the Python source of ``graph`` and the names it refers to
    (info['names']: Value -> identifier; info['globals']: identifier -> what it binds).
    Array mode only:
    ``rules``, lowering rules ``rule(node, writer) -> Statement | None`` asked in order for
    each node (the inference plan's steps); ``specialize``: ``fastpath``'s rule after them;
    ``consts``: {id(value): int}, values known when generating (a plan's sizes: no statement,
    literals where read); ``plan``: a ``MemoryPlan`` whose planned values are written into
    arena buffers."""
    from ember.autograd._generated.records import OPS
    from ember.jit import fastpath
    taken = set(_RESERVED) | set(fastpath.__all__)
    consts = consts or {}
    rules = list(rules)
    ints = set()
    if specialize:
        ints = fastpath.int_values(graph)
        rules.append(fastpath.Rule(graph, ints))
    for n in graph.nodes:
        taken.add(n.kind)
    fname = _ident(name, taken)  # a traced `elu` must not shadow the op `elu` it calls
    names = {}
    glob = {}
    for v in graph.values():
        if v.node is not None and v.node.kind == "constant":
            ident = _ident(f"const_{v.node.attrs['name']}", taken)
            glob[ident] = ("array", v.node.attrs["name"])
            names[id(v)] = ident  # constants are globals of the generated code: no statement
        else:
            names[id(v)] = _ident(v.name, taken)
    w = Writer(graph, names, glob, taken, ints, consts)
    ref = w.ref

    # the statements, node by node: (node index, source lines)
    body, defined = [], {id(v) for v in graph.inputs}
    for i, n in enumerate(graph.nodes):
        if n.kind == "constant" or (n.outputs and all(id(o) in consts for o in n.outputs)):
            continue
        rhs = _planned(n, plan, names, glob, taken, ref)
        st = None if rhs is None else Statement(rhs=rhs)
        for rule in rules:
            if st is not None:
                break
            st = rule(n, w)
        if st is None:
            st = Statement(rhs=_call(n, w, OPS))
        outs = n.outputs if st.defines is None else st.defines
        unpack = st.unpack
        if unpack is None:
            unpack = st.defines is None and len(n.outputs) == 1 and (
                n.kind in ("python_function", "fusion_group") or
                (OPS.get(n.kind) is not None and OPS[n.kind].multi))
        if st.rhs is not None:
            lhs = ", ".join(names[id(o)] for o in outs) + ("," if unpack else "")
            lines = [f"{lhs} = {st.rhs}"]
        else:
            lines = list(st.lines)
        defined.update(id(o) for o in outs)
        body.append((i, lines))

    # last use of every value (graph outputs live to the end); a value is freed after it
    outs = {id(o) for o in graph.outputs}
    last = {}
    for i, n in enumerate(graph.nodes):
        for v in n.inputs:
            last[id(v)] = i
    frees = {}
    for v in graph.values():
        if id(v) in outs or id(v) not in defined:
            continue
        if id(v) in last:
            frees.setdefault(last[id(v)], []).append(v)
        elif v.node is not None:
            frees.setdefault(graph.index(v.node), []).append(v)
        else:
            frees.setdefault(-1, []).append(v)

    params = ", ".join(names[id(v)] for v in graph.inputs)
    lines = [f"def {fname}({params}):"]
    _free(lines, frees.pop(-1, None), names)
    at = 0
    for i, n in enumerate(graph.nodes):
        while at < len(body) and body[at][0] == i:
            lines += ["    " + s for s in body[at][1]]
            at += 1
        _free(lines, frees.get(i), names)
    ret = ", ".join(ref(o) for o in graph.outputs)
    lines.append(f"    return ({ret},)" if len(graph.outputs) == 1 else f"    return ({ret})")
    src = "\n".join(lines) + "\n"
    for ident, (what, x) in list(glob.items()):
        if what == "array" and f"{ident}_T" in src:
            glob[f"{ident}_T"] = ("array_T", x)
    info = {"names": names, "globals": glob, "function": fname}
    return src, info


def _call(n, w, OPS):
    """The right-hand side calling node ``n``'s kernel (or its fused group, its Function)."""
    ref = w.ref
    if n.kind == "fusion_group":  # one fused pointwise kernel (ember.jit.fused)
        ident = _ident("fusion_group", w.taken)
        into = n.attrs.get("into")   # outputs written into arguments (ember.compiler.step)
        w.glob[ident] = ("fusion", n.attrs["graph"]) if into is None else \
            ("fusion_into", (n.attrs["graph"], into))
        return f"{ident}({', '.join(ref(a) for a in n.args)})"
    if n.kind == "python_function":
        ident = _ident("fn", w.taken)
        w.glob[ident] = ("function", n.attrs["cls"])
        return f"{ident}({ref(n.args[0])})"
    parts = [ref(a) for a in n.args]
    op = OPS.get(n.kind)
    order = op.const_names if op is not None else tuple(n.attrs)
    parts += [ref(n.attrs[k]) for k in order if k in n.attrs]
    call = f"{n.kind}({', '.join(parts)})"
    if len(n.outputs) == 1 and n.outputs[0].shape == () and n.kind != "size":
        call = f"asarray({call})"  # kernels may return NumPy scalars for 0-d results
    return call


def _arena(plan, v, glob, taken):
    """The identifier of ``v``'s arena buffer ('None' when it is not planned)."""
    b = plan.slot.get(id(v))
    if b is None:
        return "None"
    ident = f"arena_{b}"
    taken.add(ident)
    glob[ident] = ("arena", b)
    return ident


def _planned(n, plan, names, glob, taken, ref):
    """The right-hand side writing ``n``'s outputs into the memory the plan gives them (an
    argument dying here, an arena buffer), or None."""
    if plan is None or not any(id(o) in plan.slot or id(o) in plan.into for o in n.outputs):
        return None
    from ember.jit.fastpath import python_operator

    def buffer(o):
        a = plan.into.get(id(o))
        return ref(a) if a is not None else _arena(plan, o, glob, taken)
    args = ", ".join(ref(a) for a in n.args)
    if n.kind == "fusion_group":
        ident = _ident("fusion_group", taken)
        glob[ident] = ("fusion_out", n.attrs["graph"])
        bufs = [buffer(o) for o in n.outputs]
        outs = f"({bufs[0]},)" if len(bufs) == 1 else f"({', '.join(bufs)})"
        return f"{ident}({outs}, {args})"
    buf = buffer(n.outputs[0])
    if n.kind in ("matmul", "mm"):
        return f"matmul_into({args}, {buf})"
    if n.kind == "linear":
        x, w, b = (list(n.args) + [None] * 3)[:3]
        return f"linear_into({ref(x)}, {ref(w)}, {ref(b)}, {buf})"
    ufunc = {"+": "add", "-": "subtract", "*": "multiply", "/": "divide"}[python_operator(n)]
    glob[f"ufunc_{ufunc}"] = ("obj", getattr(np, ufunc))
    taken.add(f"ufunc_{ufunc}")
    return f"binary_into(ufunc_{ufunc}, {args}, {buf})"


def _free(lines, vals, names):
    if vals:
        lines.append("    del " + ", ".join(names[id(v)] for v in vals))


# ---------------------------------------------------------------------------------- namespaces
def resolve_class(cls):
    """The custom Function class a ``python_function`` node holds (``attrs["cls"]``: the class
    itself, set by the tracer or by ``parse`` from the registry; never imported by name)."""
    from ember.autograd.function import Function
    if not (isinstance(cls, type) and issubclass(cls, Function)):
        raise TypeError(f"python_function node holds {cls!r}, not a custom Function class")
    return cls


def _tensor_sym(t):
    tracer = STATE.tracer
    n = int(t._data)
    if tracer is not None:
        from ember.jit.tracer import SymInt
        return SymInt(n, ("tensor", t))
    return n


def node_callable(kind, mode):
    """The function a node of ``kind`` calls in ``mode`` ('array' or 'tensor')."""
    from ember.autograd._generated.records import OPS
    from ember.kernels import shape as shape_kernels
    if kind == "detach":
        if mode == "array":
            return lambda a: a
        return lambda t: t.detach()
    if kind == "copy_":
        if mode == "array":
            return shape_kernels.copy_inplace
        copy = OPS["copy"]

        def copy_(t, r):
            if t.grad_fn is None and t._requires_grad:
                # eager refuses this write outside no_grad, so it was made under no_grad
                # (embedding's max_norm renormalising its weight)
                from ember.autograd.grad_mode import no_grad
                with no_grad():
                    return dispatch_inplace(copy, (t, r), ())
            return dispatch_inplace(copy, (t, r), ())
        return copy_
    op = OPS[kind]
    if mode == "array":
        return op.kernel
    if op.list_input:
        def run(tensors, *consts):
            return dispatch(op, tensors, consts)
    else:
        n = len(op.tensor_names)

        def run(*args):
            return dispatch(op, args[:n], args[n:])
    run.__name__ = kind
    return run


def _function_callable(cls, mode):
    from ember.autograd.grad_mode import no_grad
    from ember.tensor import Tensor
    if mode == "tensor":
        def call(args):
            out = cls.apply(*args)
            return out if isinstance(out, tuple) else (out,)
        return call

    def call_arrays(args):
        with no_grad():
            out = cls.apply(*[Tensor._make(a) if isinstance(a, np.ndarray) else a for a in args])
        out = out if isinstance(out, tuple) else (out,)
        return tuple(o._data for o in out if isinstance(o, Tensor))
    return call_arrays


def namespace(graph, info, mode):
    """The globals the generated source runs with in ``mode``."""
    from ember.random import Generator, default_generator
    from ember.tensor import Tensor
    from ember.jit import fastpath
    ns = {"asarray": np.asarray if mode == "array" else (lambda t: t), "inf": math.inf,
          "linear_t": fastpath.linear_t, "linear_t_relu": fastpath.linear_t_relu,
          "relu_": fastpath.relu_, "matmul_into": fastpath.matmul_into,
          "linear_into": fastpath.linear_into, "binary_into": fastpath.binary_into,
          "max_pool2d_values": fastpath.max_pool2d_values,
          "nan": math.nan, "default_generator": default_generator,
          "sym": int if mode == "array" else _tensor_sym}
    for n in graph.nodes:
        if n.kind not in ("constant", "python_function", "fusion_group") and n.kind not in ns:
            ns[n.kind] = node_callable(n.kind, mode)
    for ident, (what, x) in info["globals"].items():
        if what == "array":
            a = graph.constants[x]
            ns[ident] = a if mode == "array" else Tensor._make(a)
        elif what == "array_attr":   # the op took an ndarray when traced, not a Tensor
            ns[ident] = graph.constants[x]
        elif what == "array_T":
            ns[ident] = np.ascontiguousarray(graph.constants[x].T)
        elif what == "gen":
            gen = default_generator if x == "default" else graph.generators.get(x)
            if gen is None:
                gen = graph.generators[x] = Generator()
            ns[ident] = gen
        elif what == "fusion":
            from ember.jit.fused import fused_group
            fg = fused_group(x)
            ns[ident] = fg.run_arrays if mode == "array" else fg.run_tensors
        elif what == "fusion_into":
            from ember.jit.fused import fused_group
            fg = fused_group(x[0])
            ns[ident] = functools.partial(fg.run_arrays_into, x[1]) if mode == "array" else \
                fg.run_tensors
        elif what == "fusion_out":
            from ember.jit.fused import fused_group
            ns[ident] = fused_group(x).run_arrays_out
        elif what == "arena":
            ns[ident] = info["arena"][x]
        elif what == "function":
            ns[ident] = _function_callable(resolve_class(x), mode)
        else:
            ns[ident] = x
    return ns


def compile_graph(graph, mode, name="forward", specialize=None, plan=None, arena=None, rules=(),
                  consts=None):
    """(function, source): ``graph`` compiled to a Python function for ``mode`` (array mode
    uses the specialised emitters unless ``specialize=False``; ``rules`` and ``consts``, array
    mode only, as ``generate`` takes them; ``plan``: a ``MemoryPlan`` of ``graph``, array mode
    only: planned values written into an arena kept by the function -- ``arena``, one array
    per buffer of the plan, when given: ``ember.jit.arena``)."""
    if specialize is None:
        specialize = mode == "array"
    if mode != "array":
        plan, rules, consts = None, (), None
    src, info = generate(graph, name, specialize and mode == "array", plan, rules, consts)
    if plan is not None:
        info["arena"] = plan.arena() if arena is None else arena
    ns = namespace(graph, info, mode)
    code = compile(src, f"<ember.jit {name}>", "exec")
    exec(code, ns)  # noqa: S102 - our own generated source
    return ns[info["function"]], src
