"""Common-subexpression elimination: a pure node equal to an earlier one (same kind, same
arguments, same constants) is replaced by it. No merging across an in-place write (``copy_``),
since a write may change what an earlier value's storage holds."""
import math

import numpy as np

from ember.jit.ir import ArrayRef, GenRef, SymRef, Value


def _key(x):
    if isinstance(x, Value):
        return ("%", id(x))
    if isinstance(x, SymRef):
        return ("int", id(x.value))
    if isinstance(x, (list, tuple)):
        return (type(x).__name__,) + tuple(_key(y) for y in x)
    if isinstance(x, slice):
        return ("slice", _key(x.start), _key(x.stop), _key(x.step))
    if isinstance(x, float):
        return ("f", "nan" if math.isnan(x) else x)
    if isinstance(x, (GenRef, ArrayRef)):
        return repr(x)
    if isinstance(x, np.dtype):
        return ("dtype", x.name)
    return (type(x).__name__, x)


def cse(graph):
    seen = {}
    for node in list(graph.nodes):
        if node.kind == "copy_":
            seen.clear()
            continue
        if not node.is_pure():
            continue
        try:
            k = (node.kind, tuple(_key(a) for a in node.args),
                 tuple((n, _key(v)) for n, v in node.attrs.items()))
            hash(k)
        except TypeError:
            continue
        prev = seen.get(k)
        if prev is None:
            seen[k] = node
            continue
        for a, b in zip(node.outputs, prev.outputs):
            a.replace_all_uses_with(b)
        graph.remove(node)
    return graph
