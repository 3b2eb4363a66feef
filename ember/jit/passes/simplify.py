"""Algebraic simplification: x*1, 1*x, x+0, 0+x, x-0, x/1 (when the result has x's type and
shape), reshape/view of reshape/view, transpose of the same transpose, t(t(x)), permute of
permute. Replaced nodes become dead and are removed by dce."""
from ember.jit.ir import Value

_RESHAPES = ("reshape", "view")


def _scalar(x, val):
    return not isinstance(x, bool) and isinstance(x, (int, float)) and x == val


def _same_type(node, v):
    o = node.outputs[0]
    return isinstance(v, Value) and o.dtype == v.dtype and o.shape == v.shape


def simplify(graph):
    written = {id(n.args[0]) for n in graph.nodes if n.kind == "copy_"}
    changed = True
    while changed:
        changed = False
        for node in list(graph.nodes):
            if node.graph is not graph:
                continue
            if _rewrite(graph, node, written):
                changed = True
    from ember.jit.passes.dce import dce
    return dce(graph)


def _forward(graph, node, v):
    node.outputs[0].replace_all_uses_with(v)
    return True


def _rewrite(graph, node, written):
    k = node.kind
    a = node.args
    if any(id(o) in written for o in node.outputs):
        return False
    if not any(o.uses or o in graph.outputs for o in node.outputs):
        return False  # already dead (dce removes it)
    if k == "mul" and len(a) == 2:
        if _scalar(a[1], 1) and _same_type(node, a[0]):
            return _forward(graph, node, a[0])
        if _scalar(a[0], 1) and _same_type(node, a[1]):
            return _forward(graph, node, a[1])
    if k == "add" and len(a) == 2:
        if _scalar(a[1], 0) and _same_type(node, a[0]):
            return _forward(graph, node, a[0])
        if _scalar(a[0], 0) and _same_type(node, a[1]):
            return _forward(graph, node, a[1])
    if k == "sub" and len(a) == 2 and _scalar(a[1], 0) and _same_type(node, a[0]):
        return _forward(graph, node, a[0])
    if k == "div" and len(a) == 2 and _scalar(a[1], 1) and node.attrs.get("rounding_mode") is None \
            and _same_type(node, a[0]):
        return _forward(graph, node, a[0])
    src = a[0] if a and isinstance(a[0], Value) else None
    inner = src.node if src is not None else None
    if inner is None or id(src) in written:
        return False
    if k in _RESHAPES and inner.kind in _RESHAPES:
        node.replace_input(src, inner.args[0])
        if k == "view" and inner.kind == "reshape":
            node.kind = "reshape"
            node.attrs = {"shape": node.attrs["size"]}
        return True
    if k == "transpose" and inner.kind == "transpose":
        d = {node.attrs["dim0"], node.attrs["dim1"]}
        nd = len(src.shape)
        norm = {x % nd for x in d} if nd else d
        inner_d = {x % nd for x in (inner.attrs["dim0"], inner.attrs["dim1"])} if nd else set()
        if norm == inner_d:
            return _forward(graph, node, inner.args[0])
    if k == "t" and inner.kind == "t":
        return _forward(graph, node, inner.args[0])
    if k == "permute" and inner.kind == "permute":
        nd = len(src.shape)
        p1 = [x % nd for x in inner.attrs["dims"]]
        p2 = [x % nd for x in node.attrs["dims"]]
        comp = tuple(p1[i] for i in p2)
        node.replace_input(src, inner.args[0])
        node.attrs = {"dims": comp}
        if comp == tuple(range(nd)) and _same_type(node, inner.args[0]):
            return _forward(graph, node, inner.args[0])
        return True
    return False
