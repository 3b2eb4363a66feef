"""Running ``fusion_group`` nodes: a pointwise subgraph as one pointwise-engine kernel.

``group_expr(subgraph)`` translates the subgraph's spec ops into the engine's ``Expr`` vocabulary
(``TRANSLATE``: the pointwise form of every spec op with a ``pointwise:`` entry in
the op spec, generated into ``ember.autograd._generated.pointwise``). ``FusedGroup`` runs it:

* ``run_arrays`` (the array-mode code): from ``MIN_FUSED_SIZE`` elements (and with Numba
  importable) one compiled kernel, one pass over memory, on all threads; below it the subgraph's
  own generated op-by-op code, so small tensors pay no extra per-call overhead.
* ``run_tensors`` (tensor mode): small tensors, or an active tracer, run the subgraph op by op
  through dispatch (autograd and enclosing traces see the ops). Large tensors that need a
  gradient go through ``FusedFunction``: forward is the fused kernel; backward is a second
  fused kernel derived from the forward expression (``pointwise.autodiff.derive`` with ``RULES``:
  the derivative formulas of the op spec evaluated on symbolic values), recomputing the forward intermediates from the saved inputs
  instead of storing them. Gradients of broadcast inputs are summed back to their shapes. Under
  ``create_graph`` the backward is differentiated op by op instead (double backward works).

Kernels are shared between groups with equal expressions and input types (the engine caches
them by expression key in memory and on disk).
"""
import numpy as np

from ember.autograd.function import Function
from ember.autograd.state import STATE
from ember.jit.ir import Value
from ember.autograd._generated import pointwise as _pointwise
from ember.kernels.pointwise import compile_pointwise
from ember.kernels.runtime import compiler as _compiler
from ember.kernels.pointwise import engine as _engine
from ember.kernels.pointwise.autodiff import derive
from ember.kernels.pointwise.expr import Builder, Sym
from ember.kernels.lru import LRUCache
from ember.kernels.shape import sum_to_shape

__all__ = ["NotFusible", "TRANSLATE", "FusedGroup", "FusedGroups", "group_expr", "fused_group",
           "MIN_FUSED_SIZE", "FORCE"]


class NotFusible(Exception):
    """A node (or one of its arguments) has no translation into a pointwise-engine expression."""

_F16 = np.dtype(np.float16)
# Below this many elements (the largest input) a group runs op by op (see the module docstring).
MIN_FUSED_SIZE = _engine.MIN_COMPILED_SIZE
# Tests and benchmarks: None (by size), "kernel" (always the fused kernel) or "unfused".
FORCE = None
# The engine backend the fused kernels use: None (the engine decides by size), "numba", "numpy".
BACKEND = None


# ---------------------------------------------------------------------------------- translation
# spec op -> its pointwise form, f(*operands, **constants) -> Sym (None: not fusible), generated
# from the ``pointwise:`` entries of the op spec; RULES: the derivative rule of each
# vocabulary op, the spec's formulas evaluated on symbolic values
TRANSLATE = _pointwise.FORWARD
RULES = _pointwise.RULES


def use_kernel(arrays):
    """Whether a group over ``arrays`` runs as its fused kernel (``FORCE``, else from
    ``MIN_FUSED_SIZE`` elements of the largest, with Numba importable)."""
    if FORCE is not None:
        return FORCE == "kernel"
    if not _compiler.available():   # (without importing Numba: the engine's kernel call
        return False                # imports it in the background, running NumPy meanwhile)
    size = 0
    for a in arrays:
        if a.size > size:
            size = a.size
    return size >= MIN_FUSED_SIZE


def _operand(x, names):
    if isinstance(x, Value):
        return names[id(x)]
    if x is None or isinstance(x, (bool, int, float)):
        return x
    if isinstance(x, np.generic) and x.ndim == 0:
        return x.item()
    raise NotFusible(f"operand {x!r}")


def translate_nodes(inputs, nodes, outputs):
    """``(Expr, names)``: the expression of pointwise ``nodes`` over the Values ``inputs``,
    returning ``outputs``; ``names`` maps id(Value) to its step name. Raises
    NotFusible when a node is not fusible."""
    names = {id(v): f"a{i}" for i, v in enumerate(inputs)}
    b = Builder(tuple(names.values()))
    for n in nodes:
        tr = TRANSLATE.get(n.kind)
        if tr is None or len(n.outputs) != 1:
            raise NotFusible(n.kind)
        try:
            out = tr(*(b.value(_operand(a, names)) for a in n.args), **n.attrs)
        except TypeError as e:
            raise NotFusible(f"{n.kind}: {e}") from None
        if not isinstance(out, Sym):
            raise NotFusible(f"{n.kind} with {n.attrs}")
        names[id(n.outputs[0])] = out.name
    return b.expr(*(names[id(o)] for o in outputs)), names


def group_expr(sub):
    """The ``Expr`` of a fusion group's subgraph."""
    return translate_nodes(sub.inputs, sub.nodes, sub.outputs)[0]


def value_type(v):
    """The engine's ``in_types`` entry for a graph Value (0-d values rank below arrays)."""
    return v.dtype.type(0) if v.shape == () else v.dtype


# ---------------------------------------------------------------------------------- running

class FusedGroup:
    """The runtime of one fusion group (see the module docstring); ``expr`` its expression."""

    def __init__(self, sub):
        self.graph = sub
        self.expr = group_expr(sub)
        self.n_inputs = len(sub.inputs)
        self._kernels = {}
        self._scalar_kernels = {}
        self._backwards = {}
        self._unfused = {}

    def __repr__(self):
        return f"FusedGroup({len(self.graph.nodes)} ops)\n{self.expr}"

    # ---- forward
    def kernel(self, arrays):
        key = tuple((a.dtype, a.ndim == 0) for a in arrays)
        k = self._kernels.get(key)
        if k is None:
            k = self._kernels[key] = compile_pointwise(self.expr, arrays)
        return k

    def _scalar_kernel(self, arrays):
        """(kernel, mask): the kernel taking the 0-d float32/float64 inputs (``mask``) as
        Python floats, when that types every step of the expression as the 0-d arrays do (the
        engine's scalar operands keep its arrays contiguous: no broadcast walk; an optimizer
        update's hyper-parameters); else (``kernel(arrays)``, None)."""
        key = tuple((a.dtype, a.ndim == 0) for a in arrays)
        got = self._scalar_kernels.get(key)
        if got is None:
            mask = tuple(a.ndim == 0 and a.dtype in (np.float32, np.float64) for a in arrays)
            k = self.kernel(arrays)
            got = (k, None)
            if any(mask) and not all(a.ndim == 0 for a in arrays):
                ks = compile_pointwise(self.expr, [float if m else a
                                                   for a, m in zip(arrays, mask)])
                if _same_typing(k.typing, ks.typing):
                    got = (ks, mask)
            self._scalar_kernels[key] = got
        return got

    def _call(self, arrays, out=None):
        k, mask = self._scalar_kernel(arrays)
        if mask is not None:
            arrays = [float(a) if m else a for a, m in zip(arrays, mask)]
        return k(*arrays, out=out, backend=BACKEND)

    def _use_kernel(self, arrays):
        return use_kernel(arrays)

    def unfused(self, mode):
        """The subgraph's own generated code for ``mode`` ('array' or 'tensor')."""
        fn = self._unfused.get(mode)
        if fn is None:
            from ember.jit.codegen import compile_graph
            fn = self._unfused[mode] = compile_graph(self.graph, mode, "fusion_group")[0]
        return fn

    def run_arrays(self, *arrays):
        """Array mode: a tuple of ndarrays."""
        if self._use_kernel(arrays):
            return self._call(arrays)
        return self.unfused("array")(*arrays)

    def run_arrays_into(self, into, *arrays):
        """``run_arrays`` writing output ``j`` into ``arrays[into[j]]`` (None: a new array)
        where ``into`` names an argument: an optimizer's in-place update in one pass."""
        if self._use_kernel(arrays):
            outs = tuple(np.empty(v.shape, v.dtype) if i is None else arrays[i]
                         for i, v in zip(into, self.graph.outputs))
            return self._call(arrays, outs)
        res = self.unfused("array")(*arrays)
        for i, r in zip(into, res):
            if i is not None:
                np.copyto(arrays[i], r)
        return tuple(r if i is None else arrays[i] for i, r in zip(into, res))

    def run_arrays_out(self, outs, *arrays):
        """``run_arrays`` writing output ``j`` into ``outs[j]`` (memory the memory plan gives
        it: an argument, an arena buffer; None: a new array) when the fused kernel runs and
        each buffer has the result's shape and is writeable; below ``MIN_FUSED_SIZE`` the
        subgraph's own code returns new arrays."""
        if self._use_kernel(arrays):
            shape = _engine._broadcast_shape(tuple(a.shape for a in arrays))
            if all(o is None or (o.shape == shape and o.flags.writeable) for o in outs):
                outs = tuple(np.empty(shape, v.dtype) if o is None else o
                             for o, v in zip(outs, self.graph.outputs))
                return self._call(arrays, outs)
            return self._call(arrays)
        return self.unfused("array")(*arrays)

    def run_tensors(self, *tensors):
        """Tensor mode: a tuple of Tensors (autograd records through ``FusedFunction``)."""
        from ember.tensor import Tensor
        arrays = [t._data for t in tensors]
        if STATE.tracer is not None or not self._use_kernel(arrays):
            return self.unfused("tensor")(*tensors)
        if STATE.grad_enabled and any(t._requires_grad for t in tensors):
            outs = FusedFunction.apply(self, *tensors)
            node = next((o.grad_fn for o in outs if o.grad_fn is not None), None)
            if node is not None:   # its gradients are arrays the backward kernel just made: the
                node._fresh_results = True   # engine may make one a .grad without a copy
            return outs
        return tuple(Tensor._make(o) for o in self.kernel(arrays)(*arrays, backend=BACKEND))

    # ---- backward
    def backward_arrays(self, arrays, grads, needs):
        """Gradients (ndarrays or None) of the inputs ``arrays`` given the output gradients
        ``grads`` (ndarrays or None) and which inputs ``needs`` one."""
        kernel = self.kernel(arrays)
        present = tuple(g is not None for g in grads)
        key = (tuple((a.dtype, a.ndim == 0) for a in arrays), present, tuple(needs))
        bwd = self._backwards.get(key)
        if bwd is None:
            b = derive(self.expr, kernel.typing, present, needs, RULES)
            k = None
            if b.expr is not None:
                g_in = [g for g, p, (_, dt) in zip(grads, present, kernel.typing.outputs)
                        if p and dt.kind == "f"]
                k = compile_pointwise(b.expr, list(arrays) + g_in)
            bwd = self._backwards[key] = (b, k)
        b, k = bwd
        g_in = [g for g, p, (_, dt) in zip(grads, present, kernel.typing.outputs)
                if p and dt.kind == "f"]
        outs = iter(k(*arrays, *g_in, backend=BACKEND) if k is not None else ())
        res = []
        for a, kind in zip(arrays, b.kinds):
            if kind is None:
                res.append(None)
            elif kind == "zero":
                res.append(np.zeros(a.shape, a.dtype))
            else:
                res.append(sum_to_shape(next(outs), a.shape))
        return res


def _same_typing(a, b):
    """Whether two typings of one expression compute every step and output alike."""
    return len(a.steps) == len(b.steps) and \
        all((x.cast_to, x.ct, x.result) == (y.cast_to, y.ct, y.result)
            for x, y in zip(a.steps, b.steps)) and \
        tuple(dt for _, dt in a.outputs) == tuple(dt for _, dt in b.outputs)


class FusedFunction(Function):
    """Autograd for a large fusion group: fused forward, fused (recomputing) backward."""

    @staticmethod
    def forward(ctx, group, *tensors):
        from ember.tensor import Tensor
        ctx.group = group
        ctx.save_for_backward(*tensors)
        ctx.set_materialize_grads(False)
        arrays = [t._data for t in tensors]
        outs = group.kernel(arrays)(*arrays, backend=BACKEND)
        return tuple(Tensor._make(o) for o in outs)

    @staticmethod
    def backward(ctx, *grads):
        from ember.tensor import Tensor
        tensors = ctx.saved_tensors
        needs = ctx.needs_input_grad[1:]
        if STATE.grad_enabled:  # create_graph: differentiate the subgraph op by op
            return (None,) + _grad_unfused(ctx.group, tensors, grads, needs)
        res = ctx.group.backward_arrays([t._data for t in tensors],
                                        [None if g is None else g._data for g in grads], needs)
        return (None,) + tuple(None if r is None else Tensor._make(r) for r in res)


class FusedGroups:
    """One fusion group run over the operand sets of several of its nodes in one kernel call,
    each set's outputs written into its own arguments (``into``, as ``run_arrays_into``): an
    optimizer's update of every parameter at once (``ember.compiler.grouped_update``). Called
    with the sets' arguments one after another; returns their outputs in the same order. Where
    one kernel cannot take the sets (other dtypes or shapes than the first call's, an output
    array that is not C-contiguous and writeable, a 0-d array input that is not a float scalar,
    the kernel still compiling), each set runs as its node would (``run_arrays_into``), in
    order."""

    def __init__(self, group, into, n_sets):
        if not into or any(i is None for i in into):
            raise ValueError("FusedGroups: every output must be written into an argument")
        self.group, self.into, self.n_sets = group, tuple(into), n_sets
        self.n_inputs = group.n_inputs
        self._layout = None    # (kernel, array positions, their dtypes, scalar positions,
        #                         aliases, output columns), from the first call
        self._targets = ()     # the output arrays last checked (the same objects: no check)
        self._flat = []        # their flat views: per output, one per set

    def __call__(self, *args):
        k = self.n_inputs
        sets = [args[i * k:(i + 1) * k] for i in range(self.n_sets)]
        if FORCE != "unfused" and _compiler.available() and self._run(sets):
            return tuple(a[i] for a in sets for i in self.into)
        out = ()
        for a in sets:
            out += tuple(self.group.run_arrays_into(self.into, *a))
        return out

    def _lay_out(self, first):
        if any(type(x) is not np.ndarray for x in first):
            return None
        kernel, mask = self.group._scalar_kernel(first)
        if mask is None:
            if any(x.ndim == 0 for x in first):
                return None
            mask = (False,) * len(first)
        arrays = tuple(i for i, m in enumerate(mask) if not m)
        aliases = tuple(self.into.index(p) if p in self.into else -1 for p in arrays)
        return (kernel, arrays, tuple(first[p].dtype for p in arrays),
                tuple(i for i, m in enumerate(mask) if m), aliases,
                tuple(arrays.index(i) for i in self.into))

    def _run(self, sets):
        if self._layout is None:
            self._layout = self._lay_out(sets[0]) or False
        if not self._layout:
            return False
        kernel, arrays, dtypes, scalars, aliases, outs = self._layout
        into = self.into
        targets = [a[i] for a in sets for i in into]
        if len(targets) != len(self._targets) or \
                not all(x is y for x, y in zip(targets, self._targets)):
            if not self._check(targets, dtypes, outs):
                return False
        flat = self._flat
        columns = []
        for p, dt, alias in zip(arrays, dtypes, aliases):
            if alias >= 0:
                columns.append(flat[alias])
                continue
            col, f16 = [], dt == _F16
            for a in sets:
                x = a[p]
                if type(x) is not np.ndarray or (x.dtype is not dt and x.dtype != dt) or \
                        x.shape != a[into[0]].shape:
                    return False
                x = x.reshape(-1)
                col.append(x.view(np.uint16) if f16 else x)
            columns.append(tuple(col))
        values = []
        for p in scalars:
            first = sets[0][p]
            if type(first) is not np.ndarray or first.ndim:
                return False
            v = float(first)
            values.append(tuple(v if a[p] is first else float(a[p]) for a in sets))
        return kernel.run_many(tuple(columns) + tuple(flat), tuple(values), aliases)

    def _check(self, targets, dtypes, outs):
        """Check the output arrays (the parameters and states a step updates: the same objects
        call after call, checked again only when one changes) and keep their flat views, per
        output, one per set."""
        n = len(self.into)
        for k, x in enumerate(targets):
            if type(x) is not np.ndarray or x.dtype != dtypes[outs[k % n]] or not (
                    x.flags.c_contiguous and x.flags.aligned and x.flags.writeable):
                return False
        views = [x.reshape(-1).view(np.uint16) if x.dtype == _F16 else x.reshape(-1)
                 for x in targets]
        self._flat = [tuple(views[s * n + j] for s in range(self.n_sets)) for j in range(n)]
        self._targets = targets
        return True


def _grad_unfused(group, tensors, grads, needs):
    from ember.autograd.engine import grad
    outs = group.unfused("tensor")(*tensors)
    pairs = [(o, g) for o, g in zip(outs, grads) if g is not None and o._requires_grad]
    wanted = [t for t, n in zip(tensors, needs) if n]
    if not pairs or not wanted:
        return tuple(None for _ in tensors)
    got = iter(grad([o for o, _ in pairs], wanted, [g for _, g in pairs], create_graph=True,
                    allow_unused=True))
    return tuple(next(got) if n else None for n in needs)


# ---------------------------------------------------------------------------------- caching
# The most FusedGroups kept (least recently used dropped first); a dropped group still runs where
# a compiled graph holds it.
MAX_CACHED_GROUPS = 256
_GROUPS = LRUCache(MAX_CACHED_GROUPS)


def fused_group(sub):
    """The ``FusedGroup`` of a subgraph (shared between nodes whose subgraphs print equal)."""
    return _GROUPS.get_or_create(str(sub), lambda: FusedGroup(sub))
