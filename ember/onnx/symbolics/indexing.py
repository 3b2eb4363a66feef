"""Indexing: getitem (ints, slices, None, Ellipsis, one index array or mask), gather/scatter,
index_select/index_add/index_put, masked ops, nonzero, embedding, scatter_reduce, index_copy,
index_fill, masked_scatter."""
import numpy as np

from ember.onnx.context import INT64_MAX, Dyn
from ember.onnx.registry import symbolic
from ember.onnx.symbolics._util import Rank1, SymbolicError, arg_shape, out_dtype


def _rank(node, i=0):
    return len(node.args[i].shape)


def _expand_index(key, rank):
    key = key if isinstance(key, tuple) else (key,)
    used = sum(1 for k in key if k is not None and k is not Ellipsis and not
               (isinstance(k, np.ndarray) and k.dtype == np.bool_))
    used += sum(k.ndim for k in key if isinstance(k, np.ndarray) and k.dtype == np.bool_)
    out = []
    for k in key:
        if k is Ellipsis:
            out.extend([slice(None)] * (rank - used))
            used = rank
        else:
            out.append(k)
    if not any(k is Ellipsis for k in key):
        n_dims = sum(1 for k in out if k is not None and not
                     (isinstance(k, np.ndarray) and k.dtype == np.bool_)) + \
            sum(k.ndim for k in out if isinstance(k, np.ndarray) and k.dtype == np.bool_)
        out.extend([slice(None)] * (rank - n_dims))
    return out


@symbolic("getitem")
def sym_getitem(g, node, x, indices):
    shape = node.args[0].shape
    rank = len(shape)
    items = _expand_index(indices, rank)
    starts, ends, axes, steps = [], [], [], []
    squeeze, none_pos, arrays = [], [], []
    d = 0          # input dim
    o = 0          # output dim (after slicing and squeezing, before None)
    for k in items:
        if k is None:
            none_pos.append(o)
            o += 1
            continue
        if isinstance(k, np.ndarray):
            if k.dtype == np.bool_:
                if k.ndim != 1:
                    raise SymbolicError("a multi-dimensional boolean mask index is not "
                                        "supported by the ONNX exporter")
                k = np.nonzero(k)[0]
            if not arrays:
                o += 1
            arrays.append((d, o, k.astype(np.int64)))
            d += 1
            continue
        if isinstance(k, slice):
            step = 1 if k.step is None else k.step
            start = 0 if k.start is None else k.start
            stop = INT64_MAX if k.stop is None else k.stop
            if not (start == 0 and stop == INT64_MAX and step == 1):
                starts.append(start)
                ends.append(stop)
                axes.append(d)
                steps.append(step)
            d += 1
            o += 1
            continue
        if isinstance(k, (int, np.integer, Dyn)) and not isinstance(k, bool):
            if isinstance(k, Dyn):
                end = Dyn(g.op("Add", k.name, g.const(np.array(1, np.int64))))
                starts.append(k)
                ends.append(end)
            else:
                k = int(k)
                starts.append(k)
                ends.append(k + 1 if k != -1 else INT64_MAX)
            axes.append(d)
            steps.append(1)
            squeeze.append(d)
            d += 1
            continue
        raise SymbolicError(f"index {k!r} is not supported by the ONNX exporter")
    y = x
    if axes:
        ins = [y, g.ints(starts), g.ints(ends), g.const(np.array(axes, np.int64))]
        if any(s != 1 for s in steps):
            ins.append(g.const(np.array(steps, np.int64)))
        y = g.op("Slice", *ins)
    if arrays:
        if squeeze:
            y = g.squeeze(y, squeeze)
        cur = [ad - sum(1 for s in squeeze if s < ad) for ad, _, _ in arrays]
        squeeze = []
        if cur != list(range(cur[0], cur[0] + len(cur))):
            raise SymbolicError("index arrays on non-adjacent dims are not supported by the "
                                "ONNX exporter")
        dims = [shape[ad] for ad, _, _ in arrays]
        idx = [a % n if n else a for (_, _, a), n in zip(arrays, dims)]
        lin = np.zeros(np.broadcast_shapes(*[a.shape for a in idx]), np.int64)
        stride = 1
        for a, n in zip(reversed(idx), reversed(dims)):
            lin = lin + a * stride
            stride *= n
        d0, k = cur[0], len(cur)
        if k > 1:
            yr = len(shape) - len([1 for it in items if isinstance(it, (int, np.integer, Dyn))
                                   and not isinstance(it, bool)])
            parts = []
            if d0 > 0:
                parts.append(g.shape_of(y, 0, d0))
            parts.append(g.const(np.array([stride], np.int64)))
            if d0 + k < yr:
                parts.append(g.shape_of(y, d0 + k, None))
            y = g.op("Reshape", y, parts[0] if len(parts) == 1 else
                     g.op("Concat", *parts, axis=0))
        y = g.op("Gather", y, g.const(lin), axis=d0)
        first_o = arrays[0][1]
        none_pos = [p if p < first_o else p + lin.ndim - 1 for p in none_pos]
    if squeeze:
        y = g.squeeze(y, squeeze)
    if none_pos:
        y = g.unsqueeze(y, none_pos)
    if y is x:
        y = g.op("Identity", x)
    return y


@symbolic("index_select")
def sym_index_select(g, node, x, index, dim):
    d = int(dim) % max(_rank(node), 1)
    if _rank(node) == 0:
        return g.op("Identity", x)
    idx = g.cast(index, np.int64)
    if len(node.args[1].shape) == 0:
        idx = g.unsqueeze(idx, [0])
    return g.op("Gather", x, idx, axis=d)


@symbolic("gather")
def sym_gather(g, node, x, index, dim, sparse_grad=False):
    if _rank(node) == 0:
        return g.op("Identity", x)
    return g.op("GatherElements", x, g.cast(index, np.int64), axis=int(dim) % _rank(node))


@symbolic("scatter")
def sym_scatter(g, node, x, index, src, dim, reduce=None):
    dt = out_dtype(node)
    if not isinstance(src, str):
        src = g.op("Expand", g.const(np.array(src, dt)), g.op("Shape", index))
    if _rank(node) == 0 and reduce is None:
        return g.op("Identity", src)
    if _rank(node) == 0:
        raise SymbolicError("scatter: reduce= on a 0-d tensor has no ONNX export")
    src = g.cast(src, dt)
    extra = {} if reduce is None else {"reduction": {"add": "add", "multiply": "mul"}[reduce]}
    if extra and g.opset < 16:
        raise SymbolicError(f"scatter: reduce={reduce!r} needs ONNX opset 16 or later "
                               f"(ScatterElements reduction), exporting at opset {g.opset}")
    return g.op("ScatterElements", x, g.cast(index, np.int64), src,
                axis=int(dim) % _rank(node), **extra)


@symbolic("scatter_add", since=16)
def sym_scatter_add(g, node, x, index, src, dim):
    src = g.cast(src, out_dtype(node))
    return g.op("ScatterElements", x, g.cast(index, np.int64), src,
                axis=int(dim) % max(_rank(node), 1), reduction="add")


@symbolic("index_add", since=16)
def sym_index_add(g, node, x, index, source, dim, alpha=1):
    rank = _rank(node)
    d = int(dim) % rank
    src = g.cast(source, out_dtype(node))
    if alpha != 1:
        src = g.op("Mul", src, g.const(np.array(alpha, out_dtype(node))))
    perm = [d] + [i for i in range(rank) if i != d]
    inv = list(np.argsort(perm))
    xt = g.op("Transpose", x, perm=perm) if d else x
    st = g.op("Transpose", src, perm=perm) if d else src
    idx = g.unsqueeze(g.cast(index, np.int64), [1])
    r = g.op("ScatterND", xt, idx, st, reduction="add")
    return g.op("Transpose", r, perm=[int(i) for i in inv]) if d else r


@symbolic("index_put")
def sym_index_put(g, node, x, values, indices, accumulate=False):
    shape = node.args[0].shape
    dt = out_dtype(node)
    values = g.cast(values, dt)
    key = indices if isinstance(indices, tuple) else (indices,)
    if len(key) == 1 and isinstance(key[0], np.ndarray) and key[0].dtype == np.bool_ and \
            key[0].shape == tuple(shape) and not accumulate:
        if int(np.prod(node.args[1].shape)) != 1:
            raise SymbolicError("index_put with a mask needs a single value")
        return g.op("Where", g.const(key[0]), g.op("Reshape", values,
                                                   g.const(np.array([], np.int64))), x)
    if len(key) == 1 and isinstance(key[0], np.ndarray) and key[0].dtype != np.bool_ and \
            key[0].ndim == 1:
        if accumulate and g.opset < 16:
            raise SymbolicError("index_put with accumulate=True needs opset 16 or later")
        idx = g.const(key[0].astype(np.int64).reshape(-1, 1) % shape[0])
        upd_shape = [len(key[0])] + list(shape[1:])
        upd = g.op("Expand", values, g.const(np.array(upd_shape, np.int64)))
        return g.op("ScatterND", x, idx, upd, reduction="add" if accumulate else None)
    # basic indices (ints and slices): scatter through a constant index grid
    grid = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    try:
        sel = grid[key]
    except Exception as e:  # noqa: BLE001
        raise SymbolicError(f"index_put with index {key!r} is not supported: {e}") from None
    if accumulate and g.opset < 16:
        raise SymbolicError("index_put with accumulate=True needs opset 16 or later")
    flat = g.op("Reshape", x, g.const(np.array([-1], np.int64)))
    upd = g.op("Reshape", g.op("Expand", values, g.const(np.array(sel.shape, np.int64))),
               g.const(np.array([-1], np.int64)))
    idx = g.const(sel.reshape(-1, 1))
    r = g.op("ScatterND", flat, idx, upd, reduction="add" if accumulate else None)
    return g.op("Reshape", r, g.const(np.array(shape, np.int64)))


@symbolic("masked_fill")
def sym_masked_fill(g, node, x, mask, value):
    dt = out_dtype(node)
    v = g.cast(value, dt) if isinstance(value, str) else g.const(np.array(value, dt))
    return g.op("Where", g.cast(mask, np.bool_), v, x)


@symbolic("masked_select")
def sym_masked_select(g, node, x, mask):
    xb = g.op("Expand", x, g.op("Shape", g.op("Where", g.cast(mask, np.bool_), x, x)))
    mb = g.op("Expand", g.cast(mask, np.bool_), g.op("Shape", xb))
    flat = g.const(np.array([-1], np.int64))
    return g.op("Compress", g.op("Reshape", xb, flat), g.op("Reshape", mb, flat), axis=0)


@symbolic("nonzero")
def sym_nonzero(g, node, x):
    if _rank(node) == 0:
        raise SymbolicError("nonzero of a 0-d tensor is not supported")
    return g.op("Transpose", g.op("NonZero", x), perm=[1, 0])


@symbolic("embedding")
def sym_embedding(g, node, input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
                  scale_grad_by_freq=False, sparse=False):
    if max_norm is not None:
        raise SymbolicError("embedding with max_norm (renormalises the weight in place) is not "
                            "exportable")
    return g.op("Gather", weight, g.cast(input, np.int64), axis=0)


_REDUCTION = {"sum": ("add", 16), "mean": ("add", 16), "prod": ("mul", 16), "amax": ("max", 18),
              "amin": ("min", 18)}


@symbolic("scatter_reduce")
def sym_scatter_reduce(g, node, x, index, src, dim, reduce, include_self=True):
    rank = len(arg_shape(node))
    if rank == 0:  # a 0-d tensor is a 1-element vector
        one = g.ints([1])
        out = sym_scatter_reduce(g, Rank1(node), g.op("Reshape", x, one),
                                 g.op("Reshape", index, one), g.op("Reshape", src, one), 0,
                                 reduce, include_self)
        return g.op("Reshape", out, g.ints([]))
    red, first = _REDUCTION[reduce]
    if g.opset < first:
        raise SymbolicError(f"scatter_reduce(reduce={reduce!r}) needs opset {first} or later "
                            f"(ScatterElements reduction={red!r})")
    d = int(dim) % rank
    dt = np.dtype(node.args[0].dtype)
    idx_shape, src_shape = arg_shape(node, 1), arg_shape(node, 2)
    idx = g.cast(index, np.int64)
    if tuple(src_shape) != tuple(idx_shape):
        n = len(idx_shape)
        src = g.op("Slice", src, g.const(np.zeros(n, np.int64)),
                   g.const(np.array(idx_shape, np.int64)), g.const(np.arange(n, dtype=np.int64)))
    fill = g.op("Shape", idx)
    if not include_self:
        if reduce in ("sum", "mean"):
            init = 0
        elif reduce == "prod":
            init = 1
        elif dt.kind == "f":
            init = -np.inf if reduce == "amax" else np.inf
        else:
            info = np.iinfo(dt)
            init = info.min if reduce == "amax" else info.max
        x = g.op("ScatterElements", x, idx, g.op("Expand", g.const(np.array(init, dt)), fill),
                 axis=d)
    out = g.op("ScatterElements", x, idx, src, axis=d, reduction=red)
    if reduce != "mean":
        return out
    ones = g.op("Expand", g.const(np.array(1, dt)), fill)
    start = g.op("Expand", g.const(np.array(1 if include_self else 0, dt)), g.op("Shape", x))
    count = g.op("ScatterElements", start, idx, ones, axis=d, reduction="add")
    count = g.op("Max", count, g.const(np.array(1, dt)))
    return g.op("Div", out, count)


def _to_front(g, x, d, rank):
    perm = [d] + [i for i in range(rank) if i != d]
    return g.op("Transpose", x, perm=perm), [perm.index(i) for i in range(rank)]


@symbolic("index_copy")
def sym_index_copy(g, node, x, index, source, dim):
    rank = len(arg_shape(node))
    if rank == 0:  # a 0-d tensor is a 1-element vector
        one = g.ints([1])
        out = sym_index_copy(g, Rank1(node), g.op("Reshape", x, one), index,
                             g.op("Reshape", source, one), 0)
        return g.op("Reshape", out, g.ints([]))
    d = int(dim) % rank
    xt, back = _to_front(g, x, d, rank)
    st, _ = _to_front(g, source, d, rank)
    idx = g.unsqueeze(g.op("Reshape", g.cast(index, np.int64), g.ints([-1])), [1])
    return g.op("Transpose", g.op("ScatterND", xt, idx, st), perm=back)


@symbolic("index_fill")
def sym_index_fill(g, node, x, index, value, dim):
    shape = arg_shape(node)
    rank = len(shape)
    if rank == 0:  # a 0-d tensor is a 1-element vector
        out = sym_index_fill(g, Rank1(node), g.op("Reshape", x, g.ints([1])), index, value, 0)
        return g.op("Reshape", out, g.ints([]))
    d = int(dim) % rank
    dt = np.dtype(node.args[0].dtype)
    idx = g.op("Reshape", g.cast(index, np.int64), g.ints([-1]))
    hit = g.op("ScatterElements", g.const(np.zeros(shape[d], np.int64)), idx,
               g.op("Expand", g.const(np.array(1, np.int64)), g.op("Shape", idx)), axis=0)
    view = [1] * rank
    view[d] = shape[d]
    mask = g.op("Cast", g.op("Reshape", hit, g.ints(view)), to=9)   # BOOL
    val = g.cast(value, dt) if isinstance(value, str) else g.const(np.array(value, dt))
    return g.op("Where", mask, val, x)


@symbolic("masked_scatter")
def sym_masked_scatter(g, node, x, mask, source):
    out_shape = node.outputs[0].shape
    target = g.ints(out_shape)
    xb = g.op("Expand", x, target)
    where = g.op("Transpose", g.op("NonZero", g.op("Expand", mask, target)), perm=[1, 0])
    count = g.op("Slice", g.op("Shape", where), g.const(np.array([0], np.int64)),
                 g.const(np.array([1], np.int64)))
    flat = g.op("Reshape", source, g.ints([-1]))
    taken = g.op("Slice", flat, g.const(np.array([0], np.int64)), count)
    return g.op("ScatterND", xb, where, taken)
