"""Reductions (axes as inputs where the opset takes them: ReduceSum from 13, the rest from 18),
softmax family, cumsum, arg-reductions."""
import numpy as np

from ember.onnx.registry import symbolic
from ember.onnx.symbolics._util import in_dtype, out_dtype


def _axes(dim, rank):
    """None for all axes, else a sorted list of non-negative axes."""
    if dim is None:
        return None
    if isinstance(dim, int):
        dim = [dim]
    dim = list(dim)
    if not dim:
        return None
    return sorted({int(d) % rank if rank else 0 for d in dim})


def _rank(node):
    return len(node.args[0].shape)


def _prep(g, node, x, dtype=None):
    dt = out_dtype(node)
    if dt.kind == "b":
        return g.cast(x, np.int64), True
    return g.cast(x, dt), False


def _reduce(op_type):
    def fn(g, node, x, dim=None, keepdim=False, dtype=None):
        x, _ = _prep(g, node, x)
        if _rank(node) == 0:
            return g.op("Identity", x)
        return g.reduce(op_type, x, _axes(dim, _rank(node)), keepdim)
    return fn


symbolic("sum")(_reduce("ReduceSum"))
symbolic("mean")(_reduce("ReduceMean"))


@symbolic("prod")
def sym_prod(g, node, x, dim=None, keepdim=False, dtype=None):
    x = g.cast(x, out_dtype(node))
    if _rank(node) == 0:
        return g.op("Identity", x)
    return g.reduce("ReduceProd", x, _axes(dim, _rank(node)), keepdim)


def _minmax_input(g, node, x):
    dt = in_dtype(node)
    if dt == np.bool_:
        return g.cast(x, np.int32), True
    return x, False


@symbolic("max_all", "min_all")
def sym_max_all(g, node, x):
    x, was_bool = _minmax_input(g, node, x)
    if _rank(node) == 0:
        r = g.op("Identity", x)
    else:
        r = g.reduce("ReduceMax" if node.kind == "max_all" else "ReduceMin", x, None, False)
    return g.cast(r, np.bool_) if was_bool else r


@symbolic("amax", "amin")
def sym_amax(g, node, x, dim=(), keepdim=False):
    x, was_bool = _minmax_input(g, node, x)
    if _rank(node) == 0:
        r = g.op("Identity", x)
    else:
        r = g.reduce("ReduceMax" if node.kind == "amax" else "ReduceMin", x,
                     _axes(dim, _rank(node)), keepdim)
    return g.cast(r, np.bool_) if was_bool else r


@symbolic("max_dim", "min_dim")
def sym_max_dim(g, node, x, dim, keepdim=False):
    x, was_bool = _minmax_input(g, node, x)
    rank = _rank(node)
    if rank == 0:
        return g.op("Identity", x), g.const(np.array(0, np.int64))
    d = int(dim) % rank
    big = node.kind == "max_dim"
    v = g.reduce("ReduceMax" if big else "ReduceMin", x, [d], keepdim)
    i = g.op("ArgMax" if big else "ArgMin", x, axis=d, keepdims=1 if keepdim else 0)
    return (g.cast(v, np.bool_) if was_bool else v), i


@symbolic("argmax", "argmin")
def sym_argmax(g, node, x, dim=None, keepdim=False):
    op = "ArgMax" if node.kind == "argmax" else "ArgMin"
    x, _ = _minmax_input(g, node, x)
    rank = _rank(node)
    if dim is None or rank == 0:
        flat = g.op("Reshape", x, g.const(np.array([-1], np.int64)))
        r = g.op(op, flat, axis=0, keepdims=0)
        if keepdim and rank:
            r = g.op("Reshape", r, g.const(np.ones(rank, np.int64)))
        return r
    return g.op(op, x, axis=int(dim) % rank, keepdims=1 if keepdim else 0)


def _count(g, x, axes, dt):
    s = g.op("Shape", x)
    if axes is not None:
        s = g.op("Gather", s, g.const(np.array(axes, np.int64)), axis=0)
    return g.cast(g.reduce("ReduceProd", s, None, False), dt)


@symbolic("var", "std")
def sym_var(g, node, x, dim=None, correction=1, keepdim=False):
    dt = out_dtype(node)
    rank = _rank(node)
    axes = _axes(dim, rank)
    mean = g.reduce("ReduceMean", x, axes, True)
    d = g.op("Sub", x, mean)
    ss = g.reduce("ReduceSum", g.op("Mul", d, d), axes, keepdim)
    n = _count(g, x, axes, dt)
    if correction:
        n = g.op("Sub", n, g.const(np.array(correction, dt)))
    n = g.op("Max", n, g.const(np.array(0, dt)))
    v = g.op("Div", ss, n)
    return g.op("Sqrt", v) if node.kind == "std" else v


@symbolic("logsumexp")
def sym_logsumexp(g, node, x, dim, keepdim=False):
    axes = _axes(dim, _rank(node))
    m = g.reduce("ReduceMax", x, axes, True)
    m = g.op("Where", g.op("IsInf", m), g.op("Mul", m, g.const(np.array(0, out_dtype(node)))), m)
    s = g.reduce("ReduceSum", g.op("Exp", g.op("Sub", x, m)), axes, True)
    r = g.op("Add", g.op("Log", s), m)
    if not keepdim:
        r = g.squeeze(r, axes if axes is not None else list(range(_rank(node))))
    return r


@symbolic("norm")
def sym_norm(g, node, x, p=2, dim=None, keepdim=False):
    axes = _axes(dim, _rank(node))
    if _rank(node) == 0:
        return g.op("Abs", x)
    if p == 2:
        return g.reduce("ReduceL2", x, axes, keepdim)
    if p == 1:
        return g.reduce("ReduceL1", x, axes, keepdim)
    if p == float("inf"):
        return g.reduce("ReduceMax", g.op("Abs", x), axes, keepdim)
    if p == float("-inf"):
        return g.reduce("ReduceMin", g.op("Abs", x), axes, keepdim)
    if p == 0:
        nz = g.cast(g.op("Not", g.op("Equal", x, g.const(np.array(0, out_dtype(node))))),
                    out_dtype(node))
        return g.reduce("ReduceSum", nz, axes, keepdim)
    dt = out_dtype(node)
    s = g.reduce("ReduceSum", g.op("Pow", g.op("Abs", x), g.const(np.array(p, dt))), axes,
                 keepdim)
    return g.op("Pow", s, g.const(np.array(1.0 / p, dt)))


@symbolic("cumsum")
def sym_cumsum(g, node, x, dim, dtype=None):
    x = g.cast(x, out_dtype(node))
    if _rank(node) == 0:
        return g.op("Identity", x)
    return g.op("CumSum", x, g.const(np.array(int(dim) % _rank(node), np.int64)))


@symbolic("all", "any")
def sym_all_any(g, node, x, dim=None, keepdim=False):
    xi = g.cast(g.cast(x, np.bool_), np.int32)
    if _rank(node) == 0:
        return g.cast(xi, np.bool_)
    r = g.reduce("ReduceMin" if node.kind == "all" else "ReduceMax", xi,
                 _axes(dim, _rank(node)), keepdim)
    return g.cast(r, np.bool_)


def _softmax(onnx_op):
    def fn(g, node, x, dim, dtype=None):
        x = g.cast(x, out_dtype(node))
        rank = _rank(node)
        if rank == 0:
            return g.squeeze(g.op(onnx_op, g.unsqueeze(x, [0]), axis=0), [0])
        return g.op(onnx_op, x, axis=int(dim) % rank)
    return fn


symbolic("softmax")(_softmax("Softmax"))
symbolic("log_softmax")(_softmax("LogSoftmax"))


@symbolic("cosine_similarity")
def sym_cosine_similarity(g, node, x1, x2, dim=1, eps=1e-8):
    dt = out_dtype(node)
    rank = max(len(node.args[0].shape), len(node.args[1].shape))
    d = int(dim) % rank
    w12 = g.reduce("ReduceSum", g.op("Mul", x1, x2), [d], False)
    w1 = g.reduce("ReduceSum", g.op("Mul", x1, x1), [d], False)
    w2 = g.reduce("ReduceSum", g.op("Mul", x2, x2), [d], False)
    n12 = g.op("Sqrt", g.op("Max", g.op("Mul", w1, w2), g.const(np.array(eps * eps, dt))))
    return g.op("Div", w12, n12)

