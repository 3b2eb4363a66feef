"""Shape ops: reshape family (traced sizes become Shape/Gather values), transposes, squeeze,
expand/tile, cat/stack/split, narrow/flip/roll, tril/triu, pad, ``size``, diagonal and
diag_embed (Gather over the flattened matrix, whose dims are fixed at export), Tensor.unfold
(Gather of window indices; the unfolded dim is fixed at export)."""
import numpy as np

from ember.onnx.context import INT64_MAX, INT64_MIN, Dyn
from ember.onnx.registry import symbolic
from ember.onnx.symbolics._util import SymbolicError, arg_shape, out_dtype, static


def _rank(node, i=0):
    return len(node.args[i].shape)


@symbolic("size")
def sym_size(g, node, x, dim):
    return g.dim(x, int(dim) % max(_rank(node), 1))


def _reshape(g, x, shape):
    shape = list(shape)
    kw = {}
    if any(not isinstance(s, Dyn) and int(s) == 0 for s in shape):
        if g.opset < 14:
            raise SymbolicError("a reshape to a size-0 dim needs opset 14 or later (allowzero)")
        kw["allowzero"] = 1
    return g.op("Reshape", x, g.ints(shape), **kw)


@symbolic("view")
def sym_view(g, node, x, size):
    return _reshape(g, x, size if isinstance(size, (list, tuple)) else [size])


@symbolic("reshape")
def sym_reshape(g, node, x, shape):
    return _reshape(g, x, shape if isinstance(shape, (list, tuple)) else [shape])


@symbolic("view_as", "reshape_as")
def sym_view_as(g, node, x, other):
    return g.op("Reshape", x, g.op("Shape", other))


@symbolic("expand_as")
def sym_expand_as(g, node, x, other):
    return g.op("Expand", x, g.op("Shape", other))


@symbolic("flatten")
def sym_flatten(g, node, x, start_dim=0, end_dim=-1):
    rank = _rank(node)
    if rank == 0:
        return g.op("Reshape", x, g.const(np.array([1], np.int64)))
    s, e = int(start_dim) % rank, int(end_dim) % rank
    if s == e:
        return g.op("Identity", x)
    if e == rank - 1 and s == 1:
        return g.op("Flatten", x, axis=1)
    parts = []
    if s > 0:
        parts.append(g.shape_of(x, 0, s))
    parts.append(g.const(np.array([-1], np.int64)))
    if e < rank - 1:
        parts.append(g.shape_of(x, e + 1, None))
    shape = parts[0] if len(parts) == 1 else g.op("Concat", *parts, axis=0)
    return g.op("Reshape", x, shape)


@symbolic("unflatten")
def sym_unflatten(g, node, x, dim, sizes):
    rank = _rank(node)
    d = int(dim) % rank
    parts = []
    if d > 0:
        parts.append(g.shape_of(x, 0, d))
    parts.append(g.ints(sizes))
    if d < rank - 1:
        parts.append(g.shape_of(x, d + 1, None))
    shape = parts[0] if len(parts) == 1 else g.op("Concat", *parts, axis=0)
    return g.op("Reshape", x, shape)


@symbolic("permute")
def sym_permute(g, node, x, dims):
    rank = _rank(node)
    return g.op("Transpose", x, perm=[int(d) % rank for d in dims])


@symbolic("transpose")
def sym_transpose(g, node, x, dim0, dim1):
    rank = _rank(node)
    if rank < 2:
        return g.op("Identity", x)
    perm = list(range(rank))
    a, b = int(dim0) % rank, int(dim1) % rank
    perm[a], perm[b] = perm[b], perm[a]
    return g.op("Transpose", x, perm=perm)


@symbolic("t")
def sym_t(g, node, x):
    if _rank(node) < 2:
        return g.op("Identity", x)
    return g.op("Transpose", x, perm=[1, 0])


@symbolic("squeeze")
def sym_squeeze(g, node, x, dim=None):
    shape = node.args[0].shape
    rank = len(shape)
    if rank == 0:
        return g.op("Identity", x)
    if dim is None:
        axes = [i for i, s in enumerate(shape) if s == 1]
    else:
        dims = [dim] if isinstance(dim, int) else list(dim)
        axes = sorted({int(d) % rank for d in dims if shape[int(d) % rank] == 1})
    if not axes:
        return g.op("Identity", x)
    return g.squeeze(x, axes)


@symbolic("unsqueeze")
def sym_unsqueeze(g, node, x, dim):
    return g.unsqueeze(x, [int(dim) % (_rank(node) + 1)])


@symbolic("expand")
def sym_expand(g, node, x, size):
    size = list(size)
    return g.op("Expand", x, g.ints([1 if (not isinstance(s, Dyn) and s == -1) else s
                                     for s in size]))


def _tile(g, node, x, reps):
    reps = list(reps)
    rank = _rank(node)
    if len(reps) > rank:
        x = g.unsqueeze(x, list(range(len(reps) - rank)))
    elif len(reps) < rank:
        reps = [1] * (rank - len(reps)) + reps
    return g.op("Tile", x, g.ints(reps))


@symbolic("repeat")
def sym_repeat(g, node, x, repeats):
    return _tile(g, node, x, repeats)


@symbolic("tile")
def sym_tile(g, node, x, dims):
    return _tile(g, node, x, dims)


@symbolic("cat")
def sym_cat(g, node, tensors, dim=0):
    dt = out_dtype(node)
    vals = node.args[0]
    rank = len(node.outputs[0].shape)
    ins = [g.cast(t, dt) for t, v in zip(tensors, vals) if not (len(v.shape) == 1 and
                                                                  v.shape[0] == 0 and rank > 1)]
    if len(ins) == 1:
        return g.op("Identity", ins[0])
    return g.op("Concat", *ins, axis=int(dim) % rank)


@symbolic("stack")
def sym_stack(g, node, tensors, dim=0):
    dt = out_dtype(node)
    rank = len(node.outputs[0].shape)
    d = int(dim) % rank
    ins = [g.unsqueeze(g.cast(t, dt), [d]) for t in tensors]
    if len(ins) == 1:
        return g.op("Identity", ins[0])
    return g.op("Concat", *ins, axis=d)


def _split(g, node, x, dim, squeeze=False):
    rank = _rank(node)
    d = int(dim) % rank
    sizes = [o.shape[d] if not squeeze else 1 for o in node.outputs]
    if len(sizes) == 1:
        outs = [g.op("Identity", x)]
    else:
        outs = g.op("Split", x, g.const(np.array(sizes, np.int64)), axis=d, outputs=len(sizes))
    if squeeze:
        outs = [g.squeeze(o, [d]) for o in outs]
    return tuple(outs)


@symbolic("split")
def sym_split(g, node, x, split_size, dim=0):
    return _split(g, node, x, dim)


@symbolic("split_with_sizes")
def sym_split_with_sizes(g, node, x, split_sizes, dim=0):
    return _split(g, node, x, dim)


@symbolic("chunk")
def sym_chunk(g, node, x, chunks, dim=0):
    return _split(g, node, x, dim)


@symbolic("unbind")
def sym_unbind(g, node, x, dim=0):
    return _split(g, node, x, dim, squeeze=True)


def _slice(g, x, starts, ends, axes, steps=None):
    ins = [x, g.ints(starts), g.ints(ends), g.const(np.array(axes, np.int64))]
    if steps is not None:
        ins.append(g.const(np.array(steps, np.int64)))
    return g.op("Slice", *ins)


@symbolic("narrow")
def sym_narrow(g, node, x, dim, start, length):
    rank = _rank(node)
    d = int(dim) % rank
    if isinstance(start, Dyn) or isinstance(length, Dyn):
        s = start if isinstance(start, Dyn) else Dyn(g.const(np.array(int(start), np.int64)))
        ln = length if isinstance(length, Dyn) else Dyn(g.const(np.array(int(length), np.int64)))
        end = Dyn(g.op("Add", s.name, ln.name))
        return _slice(g, x, [s], [end], [d])
    start = int(start)
    if start < 0:
        start += node.args[0].shape[d]
    return _slice(g, x, [start], [start + int(length)], [d])


@symbolic("flip")
def sym_flip(g, node, x, dims):
    rank = _rank(node)
    if rank == 0:
        return g.op("Identity", x)
    axes = [int(d) % rank for d in dims]
    return _slice(g, x, [-1] * len(axes), [INT64_MIN] * len(axes), axes, [-1] * len(axes))


@symbolic("roll")
def sym_roll(g, node, x, shifts, dims=None):
    shape = node.args[0].shape
    shifts = [shifts] if isinstance(shifts, int) else list(shifts)
    if dims is None:
        flat = g.op("Reshape", x, g.const(np.array([-1], np.int64)))
        n = int(np.prod(shape))
        r = _roll1(g, flat, int(shifts[0]), 0, n)
        return g.op("Reshape", r, g.const(np.array(shape, np.int64)))
    dims = [dims] if isinstance(dims, int) else list(dims)
    for s, d in zip(shifts, dims):
        d = int(d) % len(shape)
        x = _roll1(g, x, int(s), d, shape[d])
    return x


def _roll1(g, x, shift, d, n):
    if n == 0:
        return x
    shift %= n
    if shift == 0:
        return x
    a = _slice(g, x, [n - shift], [INT64_MAX], [d])
    b = _slice(g, x, [0], [n - shift], [d])
    return g.op("Concat", a, b, axis=d)


@symbolic("tril", "triu", since=14)
def sym_trilu(g, node, x, diagonal=0):
    return g.op("Trilu", x, g.const(np.array(int(diagonal), np.int64)),
                upper=1 if node.kind == "triu" else 0)


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge",
              "circular": "wrap"}


@symbolic("pad")
def sym_pad(g, node, x, pad, mode="constant", value=None):
    rank = _rank(node)
    pad = [static(p, "pad") for p in pad]
    n = len(pad) // 2
    begins, ends = [0] * rank, [0] * rank
    for i in range(n):
        d = rank - 1 - i
        begins[d], ends[d] = int(pad[2 * i]), int(pad[2 * i + 1])
    onnx_mode = _PAD_MODES.get(mode)
    if onnx_mode is None:
        raise SymbolicError(f"pad mode {mode!r} has no ONNX equivalent")
    if onnx_mode == "wrap" and g.opset < 19:
        raise SymbolicError("circular padding needs opset 19 or later (Pad mode 'wrap')")
    if onnx_mode != "constant" and min(begins + ends) < 0:
        # ember (as torch) crops first, then pads what is left: a Slice, then a positive Pad
        axes = [d for d in range(rank) if begins[d] < 0 or ends[d] < 0]
        x = g.op("Slice", x, g.const(np.array([max(-begins[d], 0) for d in axes], np.int64)),
                 g.const(np.array([ends[d] if ends[d] < 0 else INT64_MAX for d in axes],
                                  np.int64)), g.const(np.array(axes, np.int64)))
        begins, ends = [max(b, 0) for b in begins], [max(e, 0) for e in ends]
    pads = g.const(np.array(begins + ends, np.int64))
    if onnx_mode == "constant":
        v = g.const(np.array(0 if value is None else value, out_dtype(node)))
        return g.op("Pad", x, pads, v, mode="constant")
    return g.op("Pad", x, pads, mode=onnx_mode)


@symbolic("copy")
def sym_copy(g, node, x, src):
    s = g.cast(src, out_dtype(node))
    return g.op("Expand", s, g.op("Shape", x))


def _diag_positions(rows, cols, offset):
    """Flat (row * cols + col) positions of the diagonal ``offset`` of a rows x cols matrix."""
    r0, c0 = max(-offset, 0), max(offset, 0)
    n = max(min(rows - r0, cols - c0), 0)
    i = np.arange(n, dtype=np.int64)
    return (i + r0) * cols + (i + c0)


@symbolic("diagonal")
def sym_diagonal(g, node, x, offset=0, dim1=0, dim2=1):
    shape = arg_shape(node)
    rank = len(shape)
    d1, d2 = int(dim1) % rank, int(dim2) % rank
    rest = [i for i in range(rank) if i not in (d1, d2)]
    t = g.op("Transpose", x, perm=rest + [d1, d2])
    area = shape[d1] * shape[d2]
    target = g.const(np.array([area], np.int64))
    if rest:
        target = g.op("Concat", g.shape_of(t, 0, len(rest)), target, axis=0)
    kw = {}
    if area == 0:
        if g.opset < 14:
            raise SymbolicError("diagonal of an empty matrix needs opset 14 or later (allowzero)")
        kw["allowzero"] = 1
    flat = g.op("Reshape", t, target, **kw)
    idx = _diag_positions(shape[d1], shape[d2], int(offset))
    return g.op("Gather", flat, g.const(idx), axis=len(rest))


@symbolic("diag_embed")
def sym_diag_embed(g, node, x, offset=0, dim1=-2, dim2=-1):
    shape = arg_shape(node)
    n = shape[-1]
    m = n + abs(int(offset))
    nd = len(shape) + 1
    d1, d2 = int(dim1) % nd, int(dim2) % nd
    # [0, x...] along the last dim, then gather m*m entries: 0 off the diagonal, x on it
    padded = g.op("Pad", x, g.const(np.array([0] * (nd - 2) + [1] + [0] * (nd - 1), np.int64)))
    idx = np.zeros(m * m, np.int64)
    idx[_diag_positions(m, m, int(offset))] = np.arange(1, n + 1)
    flat = g.op("Gather", padded, g.const(idx), axis=nd - 2)
    mat = g.op("Reshape", flat, g.ints([0] * (nd - 2) + [m, m]))
    rest = iter(range(nd - 2))
    perm = [nd - 2 if j == d1 else nd - 1 if j == d2 else next(rest) for j in range(nd)]
    return g.op("Transpose", mat, perm=perm)


@symbolic("unfold")
def sym_unfold(g, node, x, dimension, size, step):
    shape = arg_shape(node)
    rank = len(shape)
    if rank == 0:
        return g.op("Gather", g.op("Reshape", x, g.ints([1])),
                    g.const(np.zeros(int(size), np.int64)), axis=0)
    d = int(dimension) % rank
    nwin = (shape[d] - int(size)) // int(step) + 1
    idx = (np.arange(nwin, dtype=np.int64)[:, None] * int(step)
           + np.arange(int(size), dtype=np.int64)[None, :])
    out = g.op("Gather", x, g.const(idx), axis=d)     # shape[:d] + (nwin, size) + shape[d+1:]
    if d == rank - 1:
        return out
    perm = list(range(d + 1)) + list(range(d + 2, rank + 1)) + [d + 1]
    return g.op("Transpose", out, perm=perm)
