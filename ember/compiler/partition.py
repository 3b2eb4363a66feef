"""Save versus recompute: which forward values a compiled backward takes from the forward
program (saved) and which it computes again from those (recomputed).

The joint graph's backward reads forward values; saving all of them keeps every one alive from
the forward to the backward. ``partition`` chooses instead a set of saved values of the least
total size (a minimum cut, as AOTAutograd's partitioner) from which the backward can compute
the rest, recomputing only **cheap** forward nodes: the fusible pointwise ops the engine's
table does not class as transcendental (arithmetic, comparisons, selections, ``relu``,
``clamp``, ``sqrt``, casts: a recomputation fuses into the backward's pointwise groups and
costs a memory pass), single-output views and the outputs ``derived`` names (dropout's).
GEMMs, convolutions, reductions, transcendental functions (``exp``, ``erf``, ``gelu``,
``tanh``), random draws and every other op are computed once and saved when the backward reads
them. Formals (inputs, parameters) cost nothing to save: the caller holds them anyway.

The flow network (one edge ``v_in -> v_out`` per forward value, capacity its size in bytes;
``source -> v_in``, capacity a sixteenth of that, so that of two cuts saving the same bytes the
one recomputing less wins, unbounded for what cannot be recomputed; ``p_out -> v_in`` for each
input ``p`` of ``v``'s node; ``v_out -> sink`` for what the backward reads) is cut with SciPy's
maximum flow
(``scipy.sparse.csgraph``, in ember's ``fast`` extra). Without SciPy, or when the forward
writes in place (a recomputed value could read memory the forward overwrote), every value the
backward reads is saved.
"""
import numpy as np

__all__ = ["ENABLED", "derived", "partition", "recomputable"]

# False: every forward value the backward reads is saved (tests, measurements)
ENABLED = True

_INF = 1 << 30


def recomputable(node):
    """Whether a backward may compute ``node`` again instead of reading its saved output."""
    if len(node.outputs) != 1 or not node.is_pure():
        return False
    from ember.kernels.pointwise.ops import OPS
    if node.kind == "to" or node.kind in OPS:
        from ember.jit.passes.fuse import fusible
        return (node.kind == "to" or OPS[node.kind].cost != "transcendental") and \
            fusible(node)
    op = node.op
    return op is not None and op.view and not op.random


def _nbytes(v):
    return int(np.prod(v.shape, dtype=np.int64)) * v.dtype.itemsize


def derived(node):
    """{output index: (kind, values)}: outputs of ``node`` a cheap op computes again from its
    inputs and its other outputs, with eager's bits (``native_dropout``'s output is its input
    times its mask, as its kernel computes it)."""
    if node.kind == "native_dropout" and node.outputs[0].dtype == node.outputs[1].dtype:
        return {0: ("mul", (node.args[0], node.outputs[1]))}
    return {}


def partition(fwd, needed, formals):
    """``(saved, recompute, rebuilt)`` for the forward nodes ``fwd`` (in graph order), the
    forward values the backward reads ``needed`` and the forward program's formals: ``saved``
    the values the forward program hands to the backward (formals among them), ``recompute``
    the forward nodes the backward runs again (in graph order), ``rebuilt`` the outputs it
    computes from their node's other values instead (``derived``), as (value, kind, args)."""
    needed = list(dict.fromkeys(needed))
    if not ENABLED or any(n.kind == "copy_" for n in fwd):
        return needed, [], []
    try:
        from scipy.sparse import csr_matrix
        from scipy.sparse.csgraph import breadth_first_order, maximum_flow
    except ImportError:
        return needed, [], []
    values = list(formals) + [o for n in fwd for o in n.outputs]
    index = {id(v): i for i, v in enumerate(values)}
    n_val = len(values)
    source, sink = 2 * n_val, 2 * n_val + 1
    total = sum(_nbytes(v) for v in values) + 1
    unit = max(1, -(-total // (1 << 28)))   # every finite capacity sums below 2^28
    rows, cols, caps = [], [], []
    recipes = {}   # id(value) -> (value, kind, args) of a derived output

    def edge(a, b, c):
        rows.append(a)
        cols.append(b)
        caps.append(c)

    def reads(i, inputs):
        for p in inputs:
            j = index.get(id(p))
            if j is None:   # read from outside the forward (a constant): not recomputed
                edge(source, 2 * i, _INF)
            else:
                edge(2 * j + 1, 2 * i, _INF)
    for v in formals:
        edge(source, 2 * index[id(v)], _INF)   # v_in -> v_out: capacity 0, saved for free
    for n in fwd:
        re = recomputable(n)
        rules = {} if re else derived(n)
        for k, o in enumerate(n.outputs):
            i = index[id(o)]
            edge(2 * i, 2 * i + 1, -(-_nbytes(o) // unit) + 1)
            if k in rules:
                kind, args = rules[k]
                recipes[id(o)] = (o, kind, args)
                edge(source, 2 * i, -(-_nbytes(o) // (16 * unit)) + 1)
                reads(i, args)
                continue
            # recomputing costs a sixteenth of saving: of two cuts that
            # save the same bytes, the one that recomputes less
            edge(source, 2 * i, -(-_nbytes(o) // (16 * unit)) + 1 if re else _INF)
            reads(i, n.inputs)
    for v in needed:
        edge(2 * index[id(v)] + 1, sink, _INF)
    size = 2 * n_val + 2
    cap = csr_matrix((np.array(caps, np.int64), (rows, cols)), shape=(size, size))
    cap.sum_duplicates()
    cap.data = np.minimum(cap.data, _INF).astype(np.int32)
    flow = maximum_flow(cap, source, sink).flow
    residual = (cap - flow).tocsr()
    residual.data = (residual.data > 0).astype(np.int32)
    residual.eliminate_zeros()
    reached = np.zeros(size, bool)
    reached[breadth_first_order(residual, source, directed=True,
                                return_predecessors=False)] = True
    # what the backward reads, walked back through what it computes again (v_in unreached)
    saved, recompute, rebuilt, seen = [], set(), [], set()
    stack = list(reversed(needed))
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        if v.node is None or reached[2 * index[id(v)]]:
            saved.append(v)
        elif id(v) in recipes:
            rebuilt.append(recipes[id(v)])
            stack.extend(reversed(recipes[id(v)][2]))
        else:
            recompute.add(id(v.node))
            stack.extend(reversed(v.node.inputs))
    return saved, [n for n in fwd if id(n) in recompute], rebuilt
