"""Dead-code elimination: drop nodes none of whose outputs is used (in-place writes stay)."""
from ember.jit.ir import ArrayRef, Value

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
    if not graph.constants:   # (a training step's graph usually has none)
        return graph
    used = set()
    for n in graph.nodes:
        if n.kind == "constant":
            used.add(n.attrs["name"])
        for part in (n.args, n.attrs.values()):
            for a in part:
                if a.__class__ in _PLAIN:
                    continue
                used.update(_refs(a))
    for k in list(graph.constants):
        if k not in used:
            del graph.constants[k]
    return graph


# argument classes that never hold an ArrayRef (skipped without a call)
_PLAIN = frozenset((int, float, bool, str, type(None), Value))


def _refs(x):
    if isinstance(x, ArrayRef):
        yield x.name
    elif isinstance(x, (list, tuple)):
        for y in x:
            yield from _refs(y)
