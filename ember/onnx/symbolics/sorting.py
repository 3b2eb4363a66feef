"""Sorting and selection (issue 12): sort, argsort and topk as TopK (its ties: the lower index
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
