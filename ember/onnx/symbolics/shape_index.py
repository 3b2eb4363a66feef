"""Shape and indexing ops: diagonal and diag_embed (Gather over the flattened
matrix), Tensor.unfold (Gather of window indices), nan_to_num, isclose. The sizes of the
dimensions these ops index (the matrix dims, the unfolded dim) are fixed at export; the other
dimensions may be dynamic."""
import numpy as np

from ember.onnx.registry import symbolic
from ember.onnx.symbolics._util import SymbolicError


def _shape(node, i=0):
    return node.args[i].shape


class _Rank1:
    """A node whose 0-d tensor arguments are seen as 1-element vectors."""

    class _Arg:
        def __init__(self, a):
            self.shape = tuple(getattr(a, "shape", ())) or (1,)
            self.dtype = getattr(a, "dtype", None)

    def __init__(self, node):
        self.args = [self._Arg(a) for a in node.args]
        self.outputs = [self._Arg(o) for o in node.outputs]


def _diag_positions(rows, cols, offset):
    """Flat (row * cols + col) positions of the diagonal ``offset`` of a rows x cols matrix."""
    r0, c0 = max(-offset, 0), max(offset, 0)
    n = max(min(rows - r0, cols - c0), 0)
    i = np.arange(n, dtype=np.int64)
    return (i + r0) * cols + (i + c0)


@symbolic("diagonal")
def sym_diagonal(g, node, x, offset=0, dim1=0, dim2=1):
    shape = _shape(node)
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
    shape = _shape(node)
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
    shape = _shape(node)
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


@symbolic("nan_to_num")
def sym_nan_to_num(g, node, x, nan=0.0, posinf=None, neginf=None):
    dt = np.dtype(node.args[0].dtype)
    if dt.kind != "f":
        return g.op("Identity", x)
    fi = np.finfo(dt)
    big = g.const(np.array(fi.max if posinf is None else posinf, dt))
    small = g.const(np.array(fi.min if neginf is None else neginf, dt))
    out = g.op("Where", g.op("IsNaN", x), g.const(np.array(nan, dt)), x)
    out = g.op("Where", g.op("IsInf", x, detect_negative=0, detect_positive=1), big, out)
    return g.op("Where", g.op("IsInf", x, detect_negative=1, detect_positive=0), small, out)


@symbolic("isclose")
def sym_isclose(g, node, a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    dt = np.dtype(node.args[0].dtype)
    if dt == np.bool_:
        return g.op("Equal", g.cast(a, np.int64), g.cast(b, np.int64))
    if dt.kind != "f":
        dt = np.dtype(np.float64)
        a, b = g.cast(a, dt), g.cast(b, dt)
    tol = g.op("Add", g.const(np.array(atol, dt)),
               g.op("Mul", g.const(np.array(rtol, dt)), g.op("Abs", b)))
    close = g.op("LessOrEqual", g.op("Abs", g.op("Sub", a, b)), tol)
    out = g.op("Or", g.op("Equal", a, b), close)
    if equal_nan:
        out = g.op("Or", out, g.op("And", g.op("IsNaN", a), g.op("IsNaN", b)))
    return out


_REDUCTION = {"sum": ("add", 16), "mean": ("add", 16), "prod": ("mul", 16), "amax": ("max", 18),
              "amin": ("min", 18)}


@symbolic("scatter_reduce")
def sym_scatter_reduce(g, node, x, index, src, dim, reduce, include_self=True):
    rank = len(_shape(node))
    if rank == 0:  # a 0-d tensor is a 1-element vector
        one = g.ints([1])
        out = sym_scatter_reduce(g, _Rank1(node), g.op("Reshape", x, one),
                                 g.op("Reshape", index, one), g.op("Reshape", src, one), 0,
                                 reduce, include_self)
        return g.op("Reshape", out, g.ints([]))
    red, first = _REDUCTION[reduce]
    if g.opset < first:
        raise SymbolicError(f"scatter_reduce(reduce={reduce!r}) needs opset {first} or later "
                            f"(ScatterElements reduction={red!r})")
    d = int(dim) % rank
    dt = np.dtype(node.args[0].dtype)
    idx_shape, src_shape = _shape(node, 1), _shape(node, 2)
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
    rank = len(_shape(node))
    if rank == 0:  # a 0-d tensor is a 1-element vector
        one = g.ints([1])
        out = sym_index_copy(g, _Rank1(node), g.op("Reshape", x, one), index,
                             g.op("Reshape", source, one), 0)
        return g.op("Reshape", out, g.ints([]))
    d = int(dim) % rank
    xt, back = _to_front(g, x, d, rank)
    st, _ = _to_front(g, source, d, rank)
    idx = g.unsqueeze(g.op("Reshape", g.cast(index, np.int64), g.ints([-1])), [1])
    return g.op("Transpose", g.op("ScatterND", xt, idx, st), perm=back)


@symbolic("index_fill")
def sym_index_fill(g, node, x, index, value, dim):
    shape = _shape(node)
    rank = len(shape)
    if rank == 0:  # a 0-d tensor is a 1-element vector
        out = sym_index_fill(g, _Rank1(node), g.op("Reshape", x, g.ints([1])), index, value, 0)
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
