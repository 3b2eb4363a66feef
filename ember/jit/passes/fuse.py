"""Pointwise fusion: maximal connected runs of pointwise nodes become one ``fusion_group`` node
holding the run as a subgraph (``node.attrs["graph"]``), run as one pointwise-engine kernel
(``ember.jit.fused``).

What fuses: nodes of the spec ops with a ``pointwise:`` entry in the op spec
(``ember.jit.fused.TRANSLATE``: arithmetic with broadcasting and Python-scalar operands,
comparisons and logic, ``where``/``lerp``/``clamp``, unary math, the activations, ``to`` casts),
one output each, on float or bool values (``to`` also on integers), whose
single-op typing in the engine gives the dtype the trace recorded. All members of a group have
the same output shape (the group's iteration shape); inputs may broadcast.

What does not: random ops, reductions, views, matmuls and every other op (they are not in the
table); shape arithmetic on ints. A node joins the group of a producer only if every reader of
the group's values outside the group comes after the node in the graph: a non-pointwise consumer
between two pointwise nodes keeps them apart (the fused node takes the place of its last
member, and must not move a read past its reader). A group never spans an in-place write
(``copy_``), has at most ``max_outputs`` outputs (values read outside it; each output costs
compile time) and ``max_nodes`` nodes, and groups of fewer than ``min_size`` nodes stay unfused.
"""
import bisect

import numpy as np

from ember.jit.ir import Graph, Value

__all__ = ["fuse", "fusible"]

MAX_OUTPUTS = 4
MAX_NODES = 64
MIN_SIZE = 2

_FLOATISH = "fb"


def fusible(node):
    """True when ``node`` may be a member of a fusion group (see the module docstring)."""
    from ember.jit.fused import TRANSLATE, NotFusible, translate_nodes, value_type
    from ember.kernels.pointwise import infer_types
    if node.kind not in TRANSLATE or len(node.outputs) != 1:
        return False
    out = node.outputs[0]
    vals = []
    for a in node.args:
        if isinstance(a, Value):
            vals.append(a)
        elif not (a is None or isinstance(a, (bool, int, float))):
            return False
    if len(vals) != len(node.inputs):
        return False  # a traced int (SymRef) somewhere in its arguments
    if node.kind == "to":
        if len(vals) != 1 or vals[0].dtype == out.dtype:
            return False  # a same-dtype to() aliases its input
    elif any(v.dtype.kind not in _FLOATISH for v in vals + [out]):
        return False
    for v in vals:
        try:
            np.broadcast_shapes(v.shape, out.shape)
        except ValueError:
            return False
    ins = list(dict.fromkeys(vals))
    # the answer depends on the op, its operands' types (which are the same value), its
    # attributes and the recorded dtype only: a graph's repeated ops are typed once
    key = (node.kind, out.dtype,
           tuple(("v", ins.index(a), a.dtype, a.shape == ()) if isinstance(a, Value)
                 else (type(a), repr(a)) for a in node.args),
           tuple((k, type(v), repr(v)) for k, v in node.attrs.items()))
    known = _TYPED.get(key)
    if known is not None:
        return known
    try:
        expr, _ = translate_nodes(ins, [node], [out])
        typing = infer_types(expr, [value_type(v) for v in ins])
        ok = typing.outputs[0][1] == out.dtype
    except (NotFusible, TypeError, ValueError):
        ok = False
    if len(_TYPED) >= _TYPED_MAX:
        _TYPED.clear()
    _TYPED[key] = ok
    return ok


# fusible()'s single-op typings: (kind, out dtype, operands, attrs) -> bool
_TYPED = {}
_TYPED_MAX = 4096


class _Group:
    __slots__ = ("members", "ids", "last", "first", "shape")

    def __init__(self, node, index):
        self.members = [node]
        self.ids = {id(node)}
        self.first = self.last = index
        self.shape = node.outputs[0].shape


def _outputs(members, ids, graph_outs):
    return [o for m in members for o in m.outputs
            if id(o) in graph_outs or any(id(u) not in ids for u in o.uses)]


def fuse(graph, min_size=MIN_SIZE, max_outputs=MAX_OUTPUTS, max_nodes=MAX_NODES):
    """Group pointwise nodes into ``fusion_group`` nodes (in place); returns the graph."""
    from ember.jit.passes.cse import cse
    cse(graph)  # so duplicates are not fused twice
    nodes = list(graph.nodes)
    pos = {id(n): i for i, n in enumerate(nodes)}
    copies = [i for i, n in enumerate(nodes) if n.kind == "copy_"]
    graph_outs = {id(o) for o in graph.outputs}
    group_of = {}
    groups = []
    for i, n in enumerate(nodes):
        if not fusible(n):
            continue
        cur = _Group(n, i)
        seen = set()
        for v in n.inputs:
            p = v.node
            grp = group_of.get(id(p)) if p is not None else None
            if grp is None or grp is cur or id(grp) in seen or grp.shape != cur.shape:
                continue
            seen.add(id(grp))
            members = grp.members + cur.members
            if len(members) > max_nodes:
                continue
            ids = grp.ids | cur.ids
            first = min(grp.first, cur.first)
            k = bisect.bisect_right(copies, first)   # an in-place write between first and i
            if k < len(copies) and copies[k] < i:
                continue
            # every outside reader of a member must come after the fused node (at index i)
            if any(id(u) not in ids and pos[id(u)] <= i
                   for m in members for o in m.outputs for u in o.uses):
                continue
            if len(_outputs(members, ids, graph_outs)) > max_outputs:
                continue
            members.sort(key=lambda m: pos[id(m)])
            cur.members, cur.ids, cur.first = members, ids, first
            groups = [g for g in groups if g is not grp]
            for m in grp.members:
                group_of[id(m)] = cur
        group_of[id(n)] = cur
        groups.append(cur)
    count = 0
    for grp in groups:
        if len(grp.members) >= min_size:
            _make_group(graph, grp.members, graph_outs)
            count += 1
    return graph


def _make_group(graph, members, graph_outs):
    ids = {id(m) for m in members}
    inputs = []
    for m in members:
        for v in m.inputs:
            if (v.node is None or id(v.node) not in ids) and v not in inputs:
                inputs.append(v)
    outs = _outputs(members, ids, graph_outs)
    sub = Graph()
    vmap = {}
    for v in inputs:
        vmap[id(v)] = sub.add_input(v.name, v.dtype, v.shape)

    def subst(a):
        return vmap[id(a)] if isinstance(a, Value) else a
    for m in members:
        o = m.outputs[0]
        node = sub.create_node(m.kind, [subst(a) for a in m.args], dict(m.attrs),
                               [(o.dtype, o.shape)], names=[o.name])
        sub.insert(node)
        vmap[id(o)] = node.outputs[0]
    sub.outputs = [vmap[id(o)] for o in outs]
    fg = graph.create_node("fusion_group", inputs, {"graph": sub},
                           [(o.dtype, o.shape) for o in outs])
    graph.insert(fg, after=members[-1])
    for o, new in zip(outs, fg.outputs):
        o.replace_all_uses_with(new)
    graph.remove_nodes(members)
    for o, new in zip(outs, fg.outputs):  # the fused values keep their names
        graph._names.discard(new.name)
        new.name = o.name
        graph._names.add(o.name)
    return fg
