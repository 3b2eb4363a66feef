"""Dead-code elimination: drop nodes none of whose outputs is used (in-place writes stay)."""
from ember.jit.ir import ArrayRef

SIDE_EFFECTS = ("copy_",)


def dce(graph):
    """Remove unused nodes (walking backwards, so dead chains go at once) and unused constants."""
    outs = {id(o) for o in graph.outputs}
    dead, ids = [], set()
    for node in reversed(graph.nodes):
        if node.kind in SIDE_EFFECTS:
            continue
        if any(id(o) in outs or any(id(u) not in ids for u in o.uses) for o in node.outputs):
            continue
        dead.append(node)
        ids.add(id(node))
    if dead:
        graph.remove_nodes(dead)
    used = set()
    for n in graph.nodes:
        if n.kind == "constant":
            used.add(n.attrs["name"])
        for a in list(n.attrs.values()) + list(n.args):
            used.update(_refs(a))
    for k in list(graph.constants):
        if k not in used:
            del graph.constants[k]
    return graph


def _refs(x):
    if isinstance(x, ArrayRef):
        yield x.name
    elif isinstance(x, (list, tuple)):
        for y in x:
            yield from _refs(y)
