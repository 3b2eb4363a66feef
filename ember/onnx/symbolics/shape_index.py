"""Shape and indexing ops of issue 12: diagonal and diag_embed (Gather over the flattened
matrix), Tensor.unfold (Gather of window indices), nan_to_num, isclose. The sizes of the
dimensions these ops index (the matrix dims, the unfolded dim) are fixed at export; the other
dimensions may be dynamic."""
import numpy as np

from ember.onnx.registry import symbolic
from ember.onnx.symbolics._util import SymbolicError, in_dtype


def _shape(node, i=0):
    return node.args[i].shape


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
    dt = in_dtype(node)
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
    dt = in_dtype(node)
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
