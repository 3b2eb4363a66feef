"""The memory plan of an array-mode program: which node outputs are written into the memory of
an argument that dies at their node (in-place reuse), and which into a buffer of an arena kept
across calls.

``plan_memory(graph)`` (not a graph pass: it leaves the graph as it is) runs a liveness analysis
over the program's node order and returns a ``MemoryPlan``. A node is *plannable* when its
kernel can write into a given array (``WRITERS``: 2-D float GEMMs, ``linear`` on its GEMM path,
the same-dtype float arithmetic the fast path emits as NumPy operators, fusion groups' outputs
not written into an argument); each of its outputs is a *root* buffer, as is each output of a
kernel known to return new arrays (``_FRESH``). Any other node's outputs may alias (be views
of, or be) any array argument: their lifetimes extend their arguments' roots. A root lives from
its node to the last node that reads it or any possible alias of it; a root one of whose
aliases is a graph output (or a value the plan cannot see die) is *escaped*: what a call
returns is never reused memory.

**In-place reuse** (``MemoryPlan.into``): an elementwise writer -- a fusion group, float
arithmetic -- writes its output into an argument of its shape and dtype that is a root made
inside the program at this call (never a formal: the caller's arrays), not escaped, and read by
nothing after this node (its last reader, aliases included); the output then belongs to that
root, whose lifetime it extends (and which escapes with it when it is returned: new memory of
the call either way, never arena memory). The fused kernel and NumPy's ufuncs read an input that is the
output through it, element by element. One buffer fewer at that moment, and the memory written
is the memory just read (in cache).

**Arena** (``arena=True``; ``MemoryPlan.slot``): the remaining plannable roots, not escaped,
are assigned buffers greedily in node order: a root takes a buffer of its shape and dtype whose
previous occupant's lifetime ended strictly before the root's node (a kernel never writes into
memory one of its own arguments may still be reading), else a new buffer. The arena (one array
per buffer) is allocated once with the compiled program and reused at every call, so a warm
call allocates no memory for planned values -- but it is held between calls, on top of what
a call allocates (see ``ember.jit.arena``).
"""
import numpy as np

from ember.jit.ir import Value

__all__ = ["MemoryPlan", "plan_memory", "WRITERS"]

# kinds whose kernel the codegen can call with an output array (see ``_writable``)
WRITERS = ("matmul", "mm", "linear", "fusion_group", "add", "sub", "mul", "div")
# of those, the elementwise ones: their output may be one of their arguments
_ELEMENTWISE = ("fusion_group", "add", "sub", "mul", "div")
# kernels known to return new arrays (never a view of or the same object as an argument)
_FRESH = WRITERS + ("conv2d", "conv2d_input_grad", "conv2d_weight_grad", "bmm", "addmm",
                    "cross_entropy_loss", "nll_loss_backward", "max_pool2d_backward",
                    "log_softmax", "softmax", "sum", "mean", "max_pool2d_with_indices")


def _float2d(v, dtype):
    return isinstance(v, Value) and len(v.shape) == 2 and v.dtype == dtype and \
        v.dtype.kind == "f"


def _writable(node, operator):
    """Whether ``node``'s outputs can be written into buffers by the codegen: ``operator`` is
    ``fastpath.python_operator``'s answer for the node (its NumPy-operator form)."""
    from ember.kernels.linalg import GEMV_MAX_ROWS, GEMV_MIN_BYTES
    k, a = node.kind, node.args
    if k == "fusion_group":
        into = node.attrs.get("into") or ()
        return all(i is None for i in into) and all(o.shape != () for o in node.outputs)
    out = node.outputs[0] if node.outputs else None
    if out is None or len(node.outputs) != 1 or out.shape == () or out.dtype.kind != "f":
        return False
    if k in ("matmul", "mm"):
        return len(a) == 2 and all(_float2d(x, out.dtype) for x in a)
    if k == "linear":
        x, w, b = (list(a) + [None] * 3)[:3]
        if not (_float2d(x, out.dtype) and _float2d(w, out.dtype)) or \
                (w.node is not None and w.node.kind == "constant"):
            return False      # a constant weight: the fast path's pre-transposed copy
        if b is not None and not (isinstance(b, Value) and len(b.shape) == 1 and
                                  b.dtype == out.dtype):
            return False
        # linear's GEMV path (few rows, a large weight) is its own kernel: left to it
        return not (x.shape[0] <= GEMV_MAX_ROWS and w.dtype.itemsize * w.shape[0] * w.shape[1]
                    >= GEMV_MIN_BYTES)
    if k in ("add", "sub", "mul", "div") and operator in ("+", "-", "*", "/"):
        vals = [x for x in a if isinstance(x, Value)]
        return bool(vals) and all(x.dtype == out.dtype for x in vals) and \
            all(isinstance(x, Value) or (isinstance(x, (int, float)) and
                                         not isinstance(x, bool)) for x in a) and \
            np.broadcast_shapes(*(x.shape for x in vals)) == out.shape
    return False


class MemoryPlan:
    """``into``: id(Value) -> the argument (a Value of the same node) whose memory it is written
    into; ``slot``: id(Value) -> arena buffer index for each value planned into the arena;
    ``buffers``: (shape, dtype) of each buffer; ``lifetimes``: id(Value) -> (first node index,
    last node index) of each arena value (its buffer's occupancy)."""

    def __init__(self):
        self.into = {}
        self.slot = {}
        self.buffers = []
        self.lifetimes = {}

    def __len__(self):
        return len(self.slot) + len(self.into)

    @property
    def nbytes(self):
        return sum(int(np.prod(s)) * np.dtype(d).itemsize for s, d in self.buffers)

    def arena(self):
        """One new array per buffer (the arena a compiled program keeps across calls)."""
        return [np.empty(s, d) for s, d in self.buffers]


def plan_memory(graph, operator=None, arena=True):
    """The ``MemoryPlan`` of ``graph`` run in node order (see the module docstring): in-place
    reuse, and arena buffers when ``arena``. ``operator(node)``: the node's NumPy-operator form
    (default ``fastpath.python_operator``)."""
    if operator is None:
        from ember.jit.fastpath import python_operator as operator
    nodes = graph.nodes
    roots = {}        # id(Value) -> set of root ids it may alias
    root_node = {}    # root id -> (index of its node, Value)
    end = {}          # root id -> last index reading it (or an alias)
    escaped = set()   # roots aliased by a graph output
    plannable = set()
    elementwise = []  # (index, node) of the writers that may write into an argument
    for i, n in enumerate(nodes):
        if n.kind == "constant":
            continue
        args = [x for x in n.inputs]
        for x in args:
            for r in roots.get(id(x), ()):
                end[r] = max(end.get(r, i), i)
        writable = n.kind in WRITERS and _writable(n, operator(n))
        # (a fusion group writing into its arguments returns them: its outputs alias them)
        fresh = writable or (n.kind in _FRESH and not n.attrs.get("into"))
        shared = set()
        if not fresh:
            for x in args:
                shared |= roots.get(id(x), set())
        for o in n.outputs:
            if fresh:
                roots[id(o)] = {id(o)}
                root_node[id(o)] = (i, o)
                end[id(o)] = i
                if writable:
                    plannable.add(id(o))
            else:
                roots[id(o)] = set(shared)
        if writable and n.kind in _ELEMENTWISE:
            elementwise.append((i, n))
    for o in graph.outputs:
        escaped |= roots.get(id(o), set())
    plan = MemoryPlan()
    owner = {}        # root id -> the root whose memory it was written into
    for i, n in elementwise:
        taken = set()
        for o in n.outputs:
            for a in n.args:
                r = owner.get(id(a), id(a))
                if isinstance(a, Value) and r in root_node and r not in taken and \
                        r not in escaped and end[r] == i and a.shape == o.shape and \
                        a.dtype == o.dtype and roots.get(id(a)) == {id(a)}:
                    plan.into[id(o)] = a
                    taken.add(r)
                    owner[id(o)] = r
                    end[r] = end[id(o)]
                    plannable.discard(id(o))
                    if id(o) in escaped:    # returned: the argument's memory leaves with it
                        escaped.add(r)
                    break
    if not arena:
        return plan
    free = {}         # (shape, dtype) -> [(end of occupant, buffer index)]
    for r in sorted(plannable - escaped, key=lambda r: root_node[r][0]):
        i, v = root_node[r]
        key = (v.shape, v.dtype)
        pool = free.setdefault(key, [])
        pick = None
        for j, (busy_until, b) in enumerate(pool):
            if busy_until < i:
                pick = j
                break
        if pick is None:
            plan.buffers.append(key)
            b = len(plan.buffers) - 1
            pool.append((end[r], b))
        else:
            b = pool[pick][1]
            pool[pick] = (end[r], b)
        plan.slot[r] = b
        plan.lifetimes[r] = (i, end[r])
    return plan
