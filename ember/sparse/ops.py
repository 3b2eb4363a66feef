"""Ops on sparse COO tensors, written in differentiable dense ops on the values: ``mm``
(sparse @ dense, dense @ sparse), ``sum``, ``softmax`` / ``log_softmax``, multiplication by a
dense tensor or a scalar, ``add`` / ``sub``, transposition and the zero-preserving unary ops.

``HANDLERS`` maps spec op names to the function dispatch calls when an operand is sparse
(``ember.autograd.dispatch.SPARSE_OPS``); any other op raises UnsupportedError there."""
import numpy as np

import ember
from ember.autograd.dispatch import dispatch
from ember.errors import EmberRuntimeError, EmberTypeError, UnsupportedError
from ember.kernels import sparse as _k
from ember.sparse.coo import SparseTensor, _dim, _zeros
from ember.tensor import Tensor

_SCALARS = (int, float, bool, complex, np.number)


def _is_sparse(t):
    return getattr(t, "is_sparse", False) is True


def _need(cond, who, what):
    if not cond:
        raise UnsupportedError(f"{who}: {what} is not supported for sparse COO tensors "
                               f"(docs/sparse.md)")


def _desc(t):
    kind = "sparse_coo " if _is_sparse(t) else ""
    return f"{kind}{t.dtype.name}{list(t.shape)}"


def _index(a):
    return Tensor._make(a)


# ---------------------------------------------------------------------------------- matmul
def mm(mat1, mat2):
    """``mat1 @ mat2`` with a sparse COO operand (``torch.sparse.mm``): sparse @ dense and
    dense @ sparse give a dense result (dense @ dense is ``ember.mm``). Gradients reach the dense operand (dense) and the
    sparse operand's values (a sparse gradient with its pattern).

    Raises EmberRuntimeError for operands that are not 2-d, sizes that do not fit, or unequal
    dtypes; UnsupportedError for sparse @ sparse and for hybrid sparse operands."""
    who = "mm"
    if not _is_sparse(mat1) and not _is_sparse(mat2):   # torch.sparse.mm of dense operands
        return ember.mm(mat1, mat2)
    if _is_sparse(mat1) and _is_sparse(mat2):
        raise UnsupportedError(f"{who}: sparse @ sparse ({_desc(mat1)} @ {_desc(mat2)}) is not "
                               f"supported for sparse COO tensors; convert one operand with "
                               f".to_dense()")
    for t in (mat1, mat2):
        if not isinstance(t, Tensor):
            raise EmberTypeError(f"{who}: expected Tensors, got {type(t).__name__}")
        if t.ndim != 2:
            raise EmberRuntimeError(f"{who}: expected 2-d operands, got {_desc(mat1)} and "
                                    f"{_desc(mat2)}")
        if _is_sparse(t):
            _need(t.dense_dim() == 0, who, "a hybrid operand (dense_dim > 0)")
    if mat1.shape[1] != mat2.shape[0]:
        raise EmberRuntimeError(f"{who}: mat1 and mat2 shapes cannot be multiplied "
                                f"({_desc(mat1)} and {_desc(mat2)})")
    if mat1.dtype is not mat2.dtype:
        raise EmberRuntimeError(f"{who}: expected mat1 and mat2 to have the same dtype, but got "
                                f"{_desc(mat1)} and {_desc(mat2)}")
    if not _is_sparse(mat1):  # dense @ sparse = (sparse^T @ dense^T)^T
        return mm(transpose(mat2, 0, 1), mat1.t()).t()
    rows, cols = mat1._idx
    dense = mat2
    gathered = dense.index_select(0, _index(cols))
    contrib = mat1._v.unsqueeze(1) * gathered
    out = _zeros((mat1.shape[0], dense.shape[1]), contrib)
    return out.index_add(0, _index(rows), contrib)


def spmm(input, mat2):
    """``torch.spmm``: ``mm``, either operand sparse COO or both dense; a dense result."""
    return mm(input, mat2)


def matmul(input, other):
    """``input @ other`` with a sparse COO operand: 2-d operands as ``mm``; a 1-d dense
    ``other`` is a matrix-vector product. Other ranks raise UnsupportedError."""
    if _is_sparse(input) and not _is_sparse(other) and isinstance(other, Tensor) and \
            other.ndim == 1 and input.ndim == 2:
        return mm(input, other.unsqueeze(1)).squeeze(1)
    _need(input.ndim == 2 and other.ndim == 2, "matmul",
          f"an operand that is not 2-d ({_desc(input)} @ {_desc(other)})")
    return mm(input, other)


# ------------------------------------------------------------------------------- reduction
def sum(input, dim=None, dtype=None, *, keepdim=False):
    """Sum of a sparse COO tensor (``torch.sparse.sum``): over everything a dense 0-d tensor;
    over ``dim`` (an int or a sequence) a sparse tensor of the remaining sparse dimensions, or
    a dense tensor when every sparse dimension is summed. Differentiable in the values."""
    who = "sparse.sum"
    if not _is_sparse(input):
        raise EmberRuntimeError(f"{who}: expected a sparse COO tensor, got {_desc(input)}")
    v = input._v if dtype is None else input._v.to(dtype)
    if dim is None:
        return ember.sum(v, None, False, dtype=None) if not keepdim else \
            ember.sum(v, None, False).reshape((1,) * input.ndim)
    nd = input.ndim
    dims = (dim,) if isinstance(dim, (int, np.integer)) else tuple(dim)
    dims = sorted({_dim(d, nd, who) for d in dims})
    if len(dims) != len(dim if not isinstance(dim, (int, np.integer)) else (dim,)):
        raise EmberRuntimeError(f"{who}: dim {dim} names a dimension twice")
    sd = input.sparse_dim()
    sparse_red = [d for d in dims if d < sd]
    dense_red = [d - sd + 1 for d in dims if d >= sd]
    if dense_red:
        v = ember.sum(v, dense_red, keepdim)
    keep = [d for d in range(sd) if d not in sparse_red]
    dense_shape = tuple(v.shape[1:])
    if not sparse_red:
        size = _kept_size(input.shape, dims, keepdim)
        return SparseTensor._build(input._idx, v, size, input.is_coalesced())
    if not keep:   # every sparse dimension summed: dense
        out = ember.sum(v, [0], False)
        if keepdim:
            out = out.reshape((1,) * sd + tuple(out.shape))
        return out
    group, n, kept = _k.groups(input._idx, keep)
    vals = _zeros((n,) + dense_shape, v).index_add(0, _index(group), v)
    size = _kept_size(input.shape, dims, keepdim)
    if keepdim:
        full = np.zeros((sd, n), np.int64)
        full[keep] = kept
        kept = full
    return SparseTensor._build(kept, vals, size, True)


def _kept_size(shape, dims, keepdim):
    return tuple(1 if d in dims else s for d, s in enumerate(shape) if keepdim or d not in dims)


# -------------------------------------------------------------------------------- softmax
def _softmax_parts(input, dim, dtype, who):
    if not _is_sparse(input):
        raise UnsupportedError(f"{who}: defined for sparse COO tensors, got {_desc(input)} "
                               f"(ember.softmax / log_softmax take dense ones)")
    _need(input.dense_dim() == 0, who, "a hybrid tensor (dense_dim > 0)")
    d = _dim(dim, input.ndim, who)
    s = input.coalesce()
    v = s._v if dtype is None else s._v.to(dtype)
    if not v.is_floating_point():
        raise EmberRuntimeError(f"{who}: expected a floating-point tensor, got {_desc(input)}")
    group, n, _ = _k.groups(s._idx, [k for k in range(s.sparse_dim()) if k != d])
    g = _index(group)
    m = _k.group_max(v.detach().numpy(), group, n)
    m[~np.isfinite(m)] = 0   # a group of -inf entries: exp gives 0, as torch's
    shifted = v - _index(m).index_select(0, g)
    e = shifted.exp()
    total = _zeros((n,), e).index_add(0, g, e)
    return s, g, shifted, e, total


def softmax(input, dim, dtype=None):
    """Softmax of a sparse COO tensor along ``dim`` over its specified entries only (the
    unspecified ones count as -inf, as ``torch.sparse.softmax``); a coalesced sparse tensor with
    the input's pattern, differentiable in the values."""
    s, g, _, e, total = _softmax_parts(input, dim, dtype, "sparse.softmax")
    return SparseTensor._build(s._idx, e / total.index_select(0, g), s.shape, True)


def log_softmax(input, dim, dtype=None):
    """Log-softmax of a sparse COO tensor along ``dim`` over its specified entries only, as
    ``torch.sparse.log_softmax``."""
    s, g, shifted, _, total = _softmax_parts(input, dim, dtype, "sparse.log_softmax")
    return SparseTensor._build(s._idx, shifted - total.log().index_select(0, g), s.shape, True)


# ---------------------------------------------------------------------------- elementwise
def transpose(input, dim0, dim1):
    """The sparse tensor with sparse dimensions ``dim0`` and ``dim1`` swapped (uncoalesced,
    as torch); values shared with autograd."""
    nd = input.ndim
    a, b = _dim(dim0, nd, "transpose"), _dim(dim1, nd, "transpose")
    if a == b:
        return input
    sd = input.sparse_dim()
    _need(a < sd and b < sd, "transpose", "swapping a dense dimension of a hybrid tensor")
    order = list(range(sd))
    order[a], order[b] = b, a
    size = list(input.shape)
    size[a], size[b] = size[b], size[a]
    return SparseTensor._build(input._idx[order], input._v, size, False)


def t(input):
    """Transpose of a sparse COO tensor of at most 2 dimensions."""
    if input.ndim > 2:
        raise EmberRuntimeError(f"t: expects a tensor with <= 2 dimensions, but self is "
                                f"{input.ndim}-d")
    return input if input.ndim < 2 else transpose(input, 0, 1)


def _dense_at(dense, sp, who):
    """The entries of dense ``dense`` (broadcast to the size of sparse ``sp``) at ``sp``'s
    indices, one row per specified entry; differentiable in ``dense``."""
    size = sp.shape
    if dense.ndim > len(size) or any(
            a != b and a != 1 for a, b in zip(reversed(dense.shape), reversed(size))):
        raise EmberRuntimeError(f"{who}: the dense operand {_desc(dense)} does not broadcast to "
                                f"the sparse operand's size {list(size)}")
    _need(sp.dense_dim() == 0, who, "a hybrid sparse operand with a dense operand")
    shape = (1,) * (len(size) - dense.ndim) + tuple(dense.shape)
    idx = np.stack([sp._idx[d] if shape[d] != 1 else np.zeros_like(sp._idx[d])
                    for d in range(len(size))]) if size else sp._idx
    flat = _k.flat_index(idx, shape)
    return dense.reshape(-1).index_select(0, _index(flat))


def mul(input, other):
    """Elementwise product with a sparse COO operand: sparse * scalar and sparse * dense
    (either order; dense broadcast to the sparse size) give a sparse tensor with the sparse
    operand's pattern. sparse * sparse raises UnsupportedError."""
    who = "mul"
    if _is_sparse(input) and _is_sparse(other):
        raise UnsupportedError(f"{who}: sparse * sparse ({_desc(input)} * {_desc(other)}) is not "
                               f"supported for sparse COO tensors; convert one with "
                               f".to_dense()")
    sp, other = (input, other) if _is_sparse(input) else (other, input)
    if isinstance(other, _SCALARS) or (isinstance(other, Tensor) and other.ndim == 0):
        return SparseTensor._build(sp._idx, sp._v * other, sp.shape, sp.is_coalesced())
    if not isinstance(other, Tensor):
        raise EmberTypeError(f"{who}: expected a Tensor or a number, got "
                             f"{type(other).__name__}")
    return SparseTensor._build(sp._idx, sp._v * _dense_at(other, sp, who), sp.shape,
                               sp.is_coalesced())


def div(input, other, rounding_mode=None):
    """sparse / scalar (or 0-d dense tensor), a sparse tensor with the input's pattern;
    a sparse divisor raises UnsupportedError."""
    _need(_is_sparse(input) and not _is_sparse(other) and rounding_mode is None and
          (isinstance(other, _SCALARS) or isinstance(other, Tensor) and other.ndim == 0),
          "div", "division other than sparse / scalar")
    return SparseTensor._build(input._idx, ember.div(input._v, other), input.shape,
                               input.is_coalesced())


def add(input, other, alpha=1):
    """``input + alpha * other`` with a sparse operand: sparse + sparse is sparse (indices
    concatenated, uncoalesced), dense + sparse is dense. sparse + dense raises as torch."""
    who = "add"
    if _is_sparse(input) and _is_sparse(other):
        if tuple(input.shape) != tuple(other.shape):
            raise EmberRuntimeError(f"{who}: sizes do not match: {_desc(input)} and "
                                    f"{_desc(other)}")
        _need(input.sparse_dim() == other.sparse_dim(), who, "operands of unequal sparse_dim")
        ov = other._v if alpha == 1 else other._v * alpha
        v = ember.cat([input._v, ov], 0)
        idx = np.concatenate([input._idx, other._idx], axis=1)
        return SparseTensor._build(idx, v, input.shape, idx.shape[1] <= 1)
    if _is_sparse(input):
        raise EmberRuntimeError(f"{who}: add(sparse, dense) is not supported. Use "
                                f"add(dense, sparse) instead ({_desc(input)} + {_desc(other)})")
    if not isinstance(input, Tensor):
        raise EmberTypeError(f"{who}: expected a Tensor, got {type(input).__name__}")
    return ember.add(input, other.to_dense(), alpha=alpha)


def sub(input, other, alpha=1):
    """``input - alpha * other``: sparse - sparse and dense - sparse, as ``add``."""
    if _is_sparse(input) and not _is_sparse(other):
        raise EmberRuntimeError(f"sub: sub(sparse, dense) is not supported. Use "
                                f"sub(dense, sparse) instead ({_desc(input)} - {_desc(other)})")
    return add(input, other, -alpha)


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat1 @ mat2)`` with sparse ``mat1`` and dense ``input`` and
    ``mat2`` (``torch.sparse.addmm``); dense result."""
    if _is_sparse(input):
        raise UnsupportedError("addmm: a sparse 'input' is not supported for sparse COO tensors; "
                               "pass it dense")
    prod = mm(mat1, mat2)
    return ember.add(input * beta if beta != 1 else input, prod * alpha if alpha != 1 else prod)


# zero-preserving unary ops: applied to the values (nonlinear ones after coalescing)
LINEAR_UNARY = frozenset(("neg", "positive", "conj"))
UNARY = frozenset(("abs", "relu", "sqrt", "sin", "tan", "tanh", "asin", "atan", "sinh", "asinh",
                   "atanh", "expm1", "log1p", "sign", "trunc", "floor", "ceil", "round",
                   "erf", "erfinv", "deg2rad", "rad2deg", "frac", "signbit", "isnan",
                   "isinf", "nan_to_num"))


def _unary(op, tensors, consts):
    sp = tensors[0]
    if op.name not in LINEAR_UNARY:
        sp = sp.coalesce()
    v = dispatch(op, (sp._v,) + tuple(tensors[1:]), consts)
    return SparseTensor._build(sp._idx, v, sp.shape, sp.is_coalesced())


def _sum_op(op, tensors, consts):
    dim, keepdim, dtype = consts
    if dim is not None and not isinstance(dim, (int, np.integer)) and len(dim) == 0:
        dim = None
    return sum(tensors[0], dim, dtype, keepdim=keepdim)


HANDLERS = {
    "mm": lambda op, ts, cs: mm(*ts),
    "matmul": lambda op, ts, cs: matmul(*ts),
    "mul": lambda op, ts, cs: mul(*ts),
    "div": lambda op, ts, cs: div(*ts, *cs),
    "add": lambda op, ts, cs: add(*ts, *cs),
    "sub": lambda op, ts, cs: sub(*ts, *cs),
    "addmm": lambda op, ts, cs: addmm(*ts, beta=cs[0], alpha=cs[1]),
    "sum": _sum_op,
    "t": lambda op, ts, cs: t(ts[0]),
    "transpose": lambda op, ts, cs: transpose(ts[0], *cs),
}
HANDLERS.update({name: _unary for name in LINEAR_UNARY | UNARY})


