"""Sorting and selection: sort, argsort and topk as TopK (its ties: the lower index
first, which is ember's stable order)."""
import numpy as np

from ember.onnx.registry import symbolic


def _topk(g, node, x, k, dim, largest):
    rank = len(node.args[0].shape)
    if rank == 0:
        return g.op("Identity", x), g.const(np.array(0, np.int64))
    d = int(dim) % rank
    if k is None:
        k = node.args[0].shape[d]
    return g.op("TopK", x, g.const(np.array([int(k)], np.int64)), axis=d,
                largest=1 if largest else 0, sorted=1, outputs=2)


@symbolic("sort")
def sym_sort(g, node, x, dim=-1, descending=False, stable=False):
    return _topk(g, node, x, None, dim, descending)


@symbolic("argsort")
def sym_argsort(g, node, x, dim=-1, descending=False, stable=False):
    return _topk(g, node, x, None, dim, descending)[1]


@symbolic("topk")
def sym_topk(g, node, x, k, dim=-1, largest=True, sorted=True):
    return _topk(g, node, x, k, dim, largest)


@symbolic("cumprod")
def sym_cumprod(g, node, x, dim, dtype=None):
    """No CumProd before opset 26: each output is the ReduceProd of its slice's elements up to it
    (the others replaced by 1 under a lower-triangular mask of the dimension's static length)."""
    dt = node.outputs[0].dtype
    x = g.cast(x, dt)
    shape = node.args[0].shape
    rank = len(shape)
    if rank == 0:
        return g.op("Identity", x)
    d = int(dim) % rank
    n = int(shape[d])
    perm = [i for i in range(rank) if i != d] + [d]
    inv = [perm.index(i) for i in range(rank)]
    xt = g.op("Transpose", x, perm=perm) if d != rank - 1 else x
    mask = g.const(np.tril(np.ones((n, n), np.bool_)))  # [j, i]: i <= j
    masked = g.op("Where", mask, g.unsqueeze(xt, [rank - 1]), g.const(np.array(1, dt)))
    out = g.reduce("ReduceProd", masked, [rank], False)
    return g.op("Transpose", out, perm=inv) if d != rank - 1 else out


@symbolic("unique")
def sym_unique(g, node, x, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """ONNX Unique (sorted) over the flattened input, or over slices along ``dim``."""
    shape = node.args[0].shape
    if dim is None:
        flat = g.op("Reshape", x, g.const(np.array([-1], np.int64)))
        y, _, inverse, counts = g.op("Unique", flat, sorted=1, outputs=4)
        inverse = g.op("Reshape", inverse, g.const(np.array(shape, np.int64)))
        return y, inverse, counts
    y, _, inverse, counts = g.op("Unique", x, axis=int(dim) % max(len(shape), 1), sorted=1,
                                 outputs=4)
    return y, inverse, counts
