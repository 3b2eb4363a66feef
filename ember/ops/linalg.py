"""Linear algebra: the composites of ember/ops/spec/linalg.yaml (norms, ``det``, ``lstsq``, LU,
``matrix_exp``, ``tensordot``, ``cdist``, ...), written in spec ops, and torch's top-level entry
points with named results (``torch.slogdet``, ``qr``, ``svd``, ``lu``, ``triangular_solve``,
``geqrf``), ``svd_lowrank`` / ``pca_lowrank`` and the in-place ``addmv_`` family.
``ember.linalg`` (torch.linalg) is ember/linalg.py."""
import builtins

import numpy as np

from ember.autograd._generated import functions as G
from ember import return_types as R
from ember._dtype import to_numpy_dtype
from ember.errors import EmberRuntimeError, EmberTypeError, EmberValueError, LinAlgError
from ember.errors import public as _public
from ember.kernels import linalg as _K
from ember.ops.reduction import _dim
from ember.random import resolve
from ember.tensor import Tensor

_INF = float("inf")


def _mT(x):
    return G.transpose(x, -2, -1)


def _need_float(A, op):
    if A._data.dtype.kind != "f":
        raise EmberRuntimeError(f"{op}: expected a floating point tensor as input, got "
                                f"{A._data.dtype}")


def _need_matrix(A, op, square=False):
    shape = A._data.shape
    if len(shape) < 2:
        raise EmberRuntimeError(f"{op}: the input tensor A must have at least 2 dimensions, got "
                                f"shape {tuple(shape)}")
    if square and shape[-1] != shape[-2]:
        raise EmberRuntimeError(f"{op}: A must be a batch of square matrices (..., n, n), got "
                                f"shape {tuple(shape)}")


def linalg_vector_norm(x, ord=2, dim=None, keepdim=False, dtype=None):
    _need_float(x, "linalg.vector_norm")
    if dtype is not None:
        x = G.to(x, to_numpy_dtype(dtype))
    if isinstance(dim, (int, np.integer)):
        dim = (int(dim),)
    if ord == 0:   # the number of nonzeros (NaN counts): a zero gradient, as torch
        nonzero = G.where(G.isnan(x), 1.0, G.abs(G.sign(x)))
        return G.sum(nonzero, dim, keepdim)
    return G.norm(x, ord, dim, keepdim)


def _norm_dims(dim, ndim, op):
    if len(dim) != 2:
        raise EmberRuntimeError(f"{op}: dim must be a 2-tuple, got {dim}")
    d = []
    for x in dim:
        if not -ndim <= x < ndim:
            raise EmberRuntimeError(f"{op}: dimension {x} out of range for a {ndim}-D input")
        d.append(x % ndim)
    if d[0] == d[1]:
        raise EmberRuntimeError(f"{op}: dims must be different, got {tuple(dim)}")
    return d


def linalg_matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, dtype=None):
    op = "linalg.matrix_norm"
    _need_float(A, op)
    _need_matrix(A, op)
    if dtype is not None:
        A = G.to(A, to_numpy_dtype(dtype))
    d0, d1 = _norm_dims(tuple(dim), A._data.ndim, op)
    if ord not in ("fro", "nuc", 1, -1, 2, -2, _INF, -_INF):
        raise EmberRuntimeError(f"{op}: order {ord!r} not supported (expected 'fro', 'nuc', inf, "
                                f"-inf, 1, -1, 2 or -2)")
    if A._data.shape[d0] == 0 or A._data.shape[d1] == 0:   # empty matrices: norm 0, as torch
        return G.sum(A, (d0, d1), keepdim)
    if ord == "fro":
        return G.norm(A, 2, (d0, d1), keepdim)
    if ord in ("nuc", 2, -2):
        s = linalg_svdvals(G.movedim(A, [d0, d1], [-2, -1]))
        r = G.sum(s, (-1,)) if ord == "nuc" else (G.amax if ord == 2 else G.amin)(s, (-1,))
        if keepdim:
            for d in sorted((d0, d1)):
                r = G.unsqueeze(r, d)
        return r
    # 1, -1: max/min column sum; inf, -inf: max/min row sum
    summed, other = (d0, d1) if ord in (1, -1) else (d1, d0)
    r = G.sum(G.abs(A), (summed,), True)
    r = (G.amax if ord > 0 else G.amin)(r, (other,), True)
    return r if keepdim else G.squeeze(r, [d0, d1])


def linalg_norm(A, ord=None, dim=None, keepdim=False, dtype=None):
    if isinstance(dim, (int, np.integer)):
        dim = (int(dim),)
    if dim is not None:
        dim = tuple(dim)
        if len(dim) == 1:
            return linalg_vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype)
        return linalg_matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype)
    if ord is None:
        return linalg_vector_norm(A, 2, None, keepdim, dtype)
    nd = A._data.ndim
    if nd == 1:
        return linalg_vector_norm(A, ord, None, keepdim, dtype)
    if nd == 2:
        return linalg_matrix_norm(A, ord, (-2, -1), keepdim, dtype)
    raise EmberRuntimeError(f"linalg.norm: if dim is not specified but ord is, the input must be 1D "
                            f"or 2D, got {nd}D")


def det(input):
    return G.linalg_det(input)


def slogdet(input):
    return G.linalg_slogdet(input)


def logdet(input):
    sign, lad = G.linalg_slogdet(input)
    return G.where(G.lt(sign, 0), float("nan"), lad)


def inverse(input):
    return G.linalg_inv(input)


def cholesky(input, upper=False):
    return G.linalg_cholesky(input, upper=upper)


def cross(input, other, dim=None):
    if dim is None:   # torch: the first dimension of size 3
        shape = np.broadcast_shapes(input._data.shape, other._data.shape)
        dims = [i for i, s in enumerate(shape) if s == 3]
        if not dims:
            raise EmberRuntimeError(f"cross: no dimension of size 3 in inputs of shapes "
                                    f"{tuple(input._data.shape)} and {tuple(other._data.shape)}")
        dim = dims[0]
    return G.linalg_cross(input, other, dim=dim)


def linalg_multi_dot(tensors):
    op = "linalg.multi_dot"
    n = len(tensors)
    if n < 2:
        raise EmberRuntimeError(f"{op}: expected at least 2 tensors but got {n}")
    for i, t in enumerate(tensors):
        nd = t._data.ndim
        ok = nd in (1, 2) if i in (0, n - 1) else nd == 2
        if not ok:
            where = "first" if i == 0 else "last" if i == n - 1 else f"tensor {i}"
            raise EmberRuntimeError(f"{op}: {where} tensor must be "
                                    f"{'1D or 2D' if i in (0, n - 1) else '2D'} but got {nd}D")
    for i, t in enumerate(tensors):   # torch's words (its typo included): no promotion
        if t._data.dtype != tensors[0]._data.dtype:
            raise EmberRuntimeError(
                f"multi_dot(): all tensors must have be the same dtype but tensor 0 is "
                f"{_K.cpp_name(tensors[0]._data.dtype)} and tensor {i} "
                f"{_K.cpp_name(t._data.dtype)}")
    out = tensors[0]
    for t in tensors[1:]:
        out = G.matmul(out, t)
    return out


def linalg_matrix_power(A, n):
    _need_matrix(A, "linalg.matrix_power", square=True)
    k = A._data.shape[-1]
    if n == 0:
        return G.add(G.mul(A, 0), G.eye(k, None, A._data.dtype))
    if n < 0:
        A, n = G.linalg_inv(A), -n
    if n == 1:
        return G.clone(A)
    result, base = None, A
    while n:
        if n & 1:
            result = base if result is None else G.matmul(result, base)
        n >>= 1
        if n:
            base = G.matmul(base, base)
    return result


def matrix_power(input, n):
    return linalg_matrix_power(input, n)


def linalg_vecdot(x, y, dim=-1):
    """sum(conj(x) * y) over ``dim`` (torch.linalg.vecdot). Raises EmberRuntimeError for a
    tensor that is not floating point or complex, or for x and y of different dtypes."""
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        raise EmberRuntimeError(f"linalg.vecdot: expected a floating point or complex tensor as "
                                f"input, got {x.dtype.name}")
    if x.dtype != y.dtype:
        raise EmberRuntimeError(f"linalg.vecdot: Expected x and y to have the same dtype, but "
                                f"found x of type {_K.scalar_name(x._data.dtype)} and y of type "
                                f"{_K.scalar_name(y._data.dtype)} instead")
    if x.dtype.is_complex:
        x = G.conj(x)
    return G.sum(G.mul(x, y), (dim,))


def linalg_diagonal(A, offset=0, dim1=-2, dim2=-1):
    return G.diagonal(A, offset, dim1, dim2)


def linalg_svdvals(A):
    return G.linalg_svd(A, False)[1]


def linalg_eigvalsh(A, UPLO="L"):
    return G.linalg_eigh(A, UPLO)[0]


def _tol_value(v):
    return v._data if isinstance(v, Tensor) else v


def _tolerance(s_max, m, n, dtype, atol, rtol):
    """max(atol, rtol * s_max), torch's defaults: rtol = eps * max(m, n) unless atol > 0 is given."""
    atol, rtol = _tol_value(atol), _tol_value(rtol)
    if rtol is None:
        rtol = np.finfo(dtype).eps * max(m, n) if atol is None or np.all(np.asarray(atol) <= 0) \
            else 0.0
    # a tensor of tolerances holds one per matrix of the batch: (..., 1) against s_max
    tol = G.mul(s_max, Tensor._make(np.asarray(rtol, dtype)[..., None]))
    if atol is not None:
        tol = G.maximum(tol, Tensor._make(np.asarray(atol, dtype)[..., None]))
    return tol


def pinverse(input, rcond=1e-15):
    return G.linalg_pinv(input, rtol=rcond)


def linalg_matrix_rank(A, atol=None, rtol=None, hermitian=False):
    op = "linalg.matrix_rank"
    _need_float(A, op)
    _need_matrix(A, op, square=hermitian)
    m, n = A._data.shape[-2:]
    if A._data.size == 0:
        return Tensor._make(np.zeros(A._data.shape[:-2], np.int64))
    s = G.abs(linalg_eigvalsh(A)) if hermitian else linalg_svdvals(A)
    tol = _tolerance(G.amax(s, (-1,), True), m, n, A._data.dtype, atol, rtol)
    return G.sum(G.gt(s, tol), (-1,))


def linalg_lstsq(A, B, rcond=None, driver=None):
    """torch.linalg.lstsq: the solution is pinv(A) @ B (differentiable in A and B); residuals,
    rank and singular values as torch computes them for ``driver`` on CPU."""
    op = "linalg.lstsq"
    _need_float(A, op)
    _need_matrix(A, op)
    vector = B._data.ndim == A._data.ndim - 1
    res, rank, sv = G.linalg_lstsq_info(A, B, rcond, driver)
    P = G.linalg_pinv(A, rtol=rcond)
    X = G.squeeze(G.matmul(P, G.unsqueeze(B, -1)), [-1]) if vector else G.matmul(P, B)
    if res._data.size:   # the squared residuals, differentiable as in torch
        r = G.sub(G.matmul(A, X if not vector else G.unsqueeze(X, -1)),
                  B if not vector else G.unsqueeze(B, -1))
        res = G.sum(G.mul(r, r), (-2,))
        res = G.squeeze(res, [-1]) if vector else res
    else:                # torch's empty residuals are still an output of the graph
        res = G.narrow(G.reshape(X, (-1,)), 0, 0, 0)
    return G.clone(X), res, rank, sv


def svd(input, some=True, compute_uv=True):
    U, S, Vh = G.linalg_svd(input, not some)
    if not compute_uv:
        m, n = input._data.shape[-2:]
        batch = input._data.shape[:-2]
        dt = input._data.dtype
        return (Tensor._make(np.zeros(batch + (m, m), dt)), S,
                Tensor._make(np.zeros(batch + (n, n), dt)))
    V = _mT(Vh)
    return G.clone(U), S, V


def qr(input, some=True):
    return G.linalg_qr(input, "reduced" if some else "complete")


def linalg_cond(A, p=None):
    """Condition number: s_max / s_min for p in (None, 2) (s_min / s_max for -2), else
    norm(A, p) * norm(inv(A), p) (square invertible A)."""
    op = "linalg.cond"
    _need_float(A, op)
    _need_matrix(A, op, square=p not in (None, 2, -2))
    if p in (None, 2, -2):
        s = linalg_svdvals(A)
        hi, lo = G.amax(s, (-1,)), G.amin(s, (-1,))
        return G.div(hi, lo) if p != -2 else G.div(lo, hi)
    return G.mul(linalg_matrix_norm(A, p), linalg_matrix_norm(G.linalg_inv(A), p))


def linalg_tensorinv(A, ind=2):
    op = "linalg.tensorinv"
    shape = A._data.shape
    if ind <= 0:
        raise EmberRuntimeError(f"{op}: expected a strictly positive integer for 'ind', got {ind}")
    out_shape, in_shape = shape[:ind], shape[ind:]
    p, q = int(np.prod(out_shape)), int(np.prod(in_shape))
    if p != q:
        raise EmberRuntimeError(f"{op}: expected self to satisfy the requirement "
                                f"prod(self.shape[ind:]) == prod(self.shape[:ind]), but got {q} != "
                                f"{p} (shape {tuple(shape)}, ind={ind})")
    return G.reshape(G.linalg_inv(G.reshape(A, (p, q))), tuple(in_shape) + tuple(out_shape))


def linalg_tensorsolve(A, B, dims=None):
    op = "linalg.tensorsolve"
    nd = A._data.ndim
    if dims is not None:
        dims = [d % nd for d in dims]
        A = G.movedim(A, dims, list(range(nd - len(dims), nd)))
    b_shape = B._data.shape
    x_shape = A._data.shape[len(b_shape):]
    p, q = int(np.prod(A._data.shape[:len(b_shape)])), int(np.prod(x_shape))
    if p != q or int(np.prod(b_shape)) != p:
        raise EmberRuntimeError(f"{op}: expected prod(A.shape[B.ndim:]) == prod(A.shape[:B.ndim]) "
                                f"== B.numel(), got A {tuple(A._data.shape)} (after moving dims) "
                                f"and B {tuple(b_shape)}")
    return G.reshape(G.linalg_solve(G.reshape(A, (p, q)), G.reshape(B, (p,))), tuple(x_shape))


def linalg_vander(x, N=None):
    """(..., n, N): the powers x^0 .. x^(N-1) of each element (torch.linalg.vander)."""
    if x._data.ndim == 0:   # one point, as torch
        x = G.unsqueeze(x, 0)
    shape = x._data.shape
    n = shape[-1] if N is None else N
    if n <= 1:
        raise EmberRuntimeError(f"linalg.vander: N must be greater than 1, got {n}")
    return _powers(x, n)


def _powers(x, n):
    """(..., len, n): x^0 .. x^(n-1) of each element of ``x`` (n >= 1)."""
    col = G.unsqueeze(x, -1)
    ones = G.ones_like(col)
    return G.cumprod(G.cat([ones] + [col] * (n - 1), -1), -1)


def vander(x, N=None, increasing=False):
    """torch.vander: the (len(x), N) Vandermonde matrix of a 1-d ``x``, powers decreasing unless
    ``increasing`` (bool and integer inputs give int64, as torch)."""
    if x._data.ndim != 1:
        raise EmberRuntimeError(f"vander: x must be a one-dimensional tensor, got shape "
                                f"{list(x._data.shape)}")
    n = x._data.shape[0] if N is None else N
    if n < 0:
        raise EmberRuntimeError(f"vander: N must be non-negative, got {n}")
    if x._data.dtype.kind in "biu":
        x = G.to(x, np.dtype(np.int64), False)
    if n == 0:
        return G.narrow(_powers(x, 1), -1, 0, 0)
    out = _powers(x, n)
    return out if increasing else G.flip(out, (-1,))


def _lu_parts(LU, pivots, data=True, perm=True):
    """(P, L, U) from packed factors; P (a constant) comes last in the graph, as the first output."""
    from ember.kernels.linalg_decomp import lu_pivots_to_permutation
    m, n = LU._data.shape[-2:]
    k = min(m, n)
    dt = LU._data.dtype
    L = U = None
    if data:
        L = G.add(G.tril(G.narrow(LU, -1, 0, k), -1), Tensor._make(np.eye(m, k, dtype=dt)))
        U = G.triu(G.narrow(LU, -2, 0, k))
    if perm:   # P is built from the pivots' values in Python: a trace would freeze it
        from ember.ops.shape import _data_read
        _data_read(pivots, "lu_unpack", "the permutation follows the pivots")
    P = G.clone(Tensor._make(lu_pivots_to_permutation(pivots._data, m).astype(dt))) if perm \
        else None
    return P, L, U


def linalg_lu_factor(A, pivot=True):
    LU, pivots, _ = G.linalg_lu_factor_ex(A, pivot=pivot, check_errors=True)
    return LU, pivots


def linalg_lu(A, pivot=True):
    LU, pivots, _ = G.linalg_lu_factor_ex(A, pivot=pivot)
    return _lu_parts(LU, pivots)


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    if not unpack_data:   # torch's empty L and U are still outputs of the graph
        flat = G.reshape(LU_data, (-1,))
        L, U = G.narrow(flat, 0, 0, 0), G.narrow(flat, 0, 0, 0)
    P, L2, U2 = _lu_parts(LU_data, LU_pivots, unpack_data, unpack_pivots)
    if unpack_data:
        L, U = L2, U2
    if P is None:
        P = G.clone(Tensor._make(np.zeros((0,), LU_data._data.dtype)))
    return P, L, U


def linalg_lu_solve(LU, pivots, B, left=True, adjoint=False):
    """X with A X = B (A^T X = B when ``adjoint``; X A = B when not ``left``), A = P L U."""
    _need_matrix(LU, "linalg.lu_solve", square=True)
    if not left:   # X A = B  <=>  A^T X^T = B^T
        return _mT(linalg_lu_solve(LU, pivots, _mT(B), True, not adjoint))
    P, L, U = _lu_parts(LU, pivots)
    st = G.linalg_solve_triangular
    if not adjoint:
        Y = st(L, G.matmul(_mT(P), B), upper=False, unitriangular=True)
        return st(U, Y, upper=True)
    Y = st(_mT(U), B, upper=False)
    return G.matmul(P, st(_mT(L), Y, upper=True, unitriangular=True))


def lu_solve(input, LU_data, LU_pivots):
    return linalg_lu_solve(LU_data, LU_pivots, input)


def _singular_error(op, info, what):
    flat = info._data.reshape(-1)
    first = int(np.flatnonzero(flat)[0])
    return LinAlgError(f"{op}: (Batch element {first}): The diagonal element {flat[first]} is "
                             f"zero, the {what} could not be completed because the input matrix "
                             f"is singular")


def linalg_inv_ex(A, check_errors=False):
    """(inverse, info): info as lu_factor_ex's; a singular matrix's inverse holds inf/nan as in
    torch unless ``check_errors`` (which raises)."""
    from ember.kernels.linalg_decomp import lu_solve_unchecked
    _need_matrix(A, "linalg.inv_ex", square=True)
    LU, piv, info = G.linalg_lu_factor_ex(A)
    if not np.any(info._data):
        return G.linalg_inv(A), info
    if check_errors:
        raise _singular_error("linalg.inv_ex", info, "inversion")
    n = A._data.shape[-1]
    return Tensor._make(lu_solve_unchecked(LU._data, piv._data, np.eye(n, dtype=A._data.dtype))), \
        info


def linalg_solve_ex(A, B, left=True, check_errors=False):
    """(result, info) of linalg.solve; singular matrices as in linalg_inv_ex."""
    from ember.kernels.linalg_decomp import lu_solve_unchecked
    _need_matrix(A, "linalg.solve_ex", square=True)
    LU, piv, info = G.linalg_lu_factor_ex(A)
    if not np.any(info._data):
        return G.linalg_solve(A, B, left=left), info
    if check_errors:
        raise _singular_error("linalg.solve_ex", info, "solve")
    a, b = A._data, B._data
    vector = b.ndim == 1 or (b.ndim == a.ndim - 1 and b.shape == a.shape[:-1])
    if vector:
        x = lu_solve_unchecked(LU._data, piv._data, b[..., None])[..., 0]
    elif left:
        x = lu_solve_unchecked(LU._data, piv._data, b)
    else:   # X A = B: X^T = A^-T B^T
        LUt, pivt, _ = G.linalg_lu_factor_ex(_mT(A))
        x = np.swapaxes(lu_solve_unchecked(LUt._data, pivt._data, np.swapaxes(b, -1, -2)), -1, -2)
    return Tensor._make(np.ascontiguousarray(x)), info


# ---- products and older torch linear-algebra functions
def mv(input, vec):
    if input._data.ndim != 2 or vec._data.ndim != 1:
        raise EmberRuntimeError(f"mv: expected a 2-D matrix and a 1-D vector, got shapes "
                                f"{tuple(input._data.shape)} and {tuple(vec._data.shape)}")
    return G.matmul(input, vec)


def vdot(input, other):
    return G.dot(input, other)


def _same_dtype_for(op, a, b):
    """torch's "both inputs should have same dtype" of inner and tensordot, which never
    promote."""
    if a._data.dtype != b._data.dtype:
        raise EmberRuntimeError(f"{op}: both inputs should have same dtype (got "
                                f"{a.dtype.name} and {b.dtype.name})")


def inner(input, other):
    """torch.inner: the sum of products over the last dimensions (a product with a 0-d
    operand); operands of two dtypes raise torch's RuntimeError unless one is 0-d."""
    a, b = input._data.shape, other._data.shape
    if len(a) == 0 or len(b) == 0:
        return G.mul(input, other)
    _same_dtype_for("inner", input, other)
    if a[-1] != b[-1]:
        raise EmberRuntimeError(f"inner: last dimensions differ: {tuple(a)} and {tuple(b)}")
    k = a[-1]
    a2 = G.reshape(input, (int(np.prod(a[:-1])), k))
    b2 = G.reshape(other, (int(np.prod(b[:-1])), k))
    return G.reshape(G.matmul(a2, _mT(b2)), tuple(a[:-1]) + tuple(b[:-1]))


def kron(input, other):
    a, b = input._data.shape, other._data.shape
    nd = max(len(a), len(b))
    a = (1,) * (nd - len(a)) + tuple(a)
    b = (1,) * (nd - len(b)) + tuple(b)
    x = G.reshape(input, tuple(s for d in a for s in (d, 1)))
    y = G.reshape(other, tuple(s for d in b for s in (1, d)))
    return G.reshape(G.mul(x, y), tuple(p * q for p, q in zip(a, b)))


def tensordot(a, b, dims=2):
    """torch.tensordot: contracts dimensions ``dims`` of ``a`` and ``b``, which must have one
    dtype (torch's RuntimeError otherwise)."""
    _same_dtype_for("tensordot", a, b)
    na, nb = a._data.ndim, b._data.ndim
    if isinstance(dims, (int, np.integer)):
        if dims < 0:
            raise EmberRuntimeError(f"tensordot: expects dims >= 0, but got dims={dims}")
        da, db = list(range(na - dims, na)), list(range(dims))
    else:
        da, db = ([dims[0]] if isinstance(dims[0], int) else list(dims[0]),
                  [dims[1]] if isinstance(dims[1], int) else list(dims[1]))
    da, db = [d % na for d in da], [d % nb for d in db]
    if len(da) != len(db) or any(a._data.shape[i] != b._data.shape[j] and
                                 1 not in (a._data.shape[i], b._data.shape[j])
                                 for i, j in zip(da, db)):
        raise EmberRuntimeError(f"tensordot: contracted dimensions {da} of {tuple(a._data.shape)} "
                                f"and {db} of {tuple(b._data.shape)} do not match")
    for i, j in zip(da, db):   # size-1 contracted dimensions broadcast, as torch
        sa_, sb_ = a._data.shape[i], b._data.shape[j]
        if sa_ != sb_ and 1 in (sa_, sb_):
            if sa_ == 1:
                a = G.expand(a, *[sb_ if d == i else -1 for d in range(na)])
            else:
                b = G.expand(b, *[sa_ if d == j else -1 for d in range(nb)])
    fa = [d for d in range(na) if d not in da]
    fb = [d for d in range(nb) if d not in db]
    k = int(np.prod([a._data.shape[d] for d in da]))
    sa = [a._data.shape[d] for d in fa]
    sb = [b._data.shape[d] for d in fb]
    a2 = G.reshape(G.permute(a, *(fa + da)), (int(np.prod(sa)), k))
    b2 = G.reshape(G.permute(b, *(db + fb)), (k, int(np.prod(sb))))
    return G.reshape(G.matmul(a2, b2), tuple(sa + sb))


def _filled(x, value):
    """``x`` with every element ``value`` (NaN included), keeping x in the graph (zero gradient)."""
    return G.masked_fill(x, Tensor._make(np.ones(x._data.shape, bool)), value)


def _scaled_add(self, prod, beta, alpha):
    """beta * self + alpha * prod as torch: beta == 0 ignores self's values (NaN too); integer
    tensors take integer beta/alpha (truncated); bool tensors are or-ed."""
    kinds = {self._data.dtype.kind, prod._data.dtype.kind}
    if kinds == {"b"}:
        right = G.ne(prod, 0)
        return G.logical_or(self if beta else _filled(self, False),
                            right if alpha else _filled(right, False))
    if not kinds & {"f", "c"}:
        beta, alpha = int(beta), int(alpha)
    if alpha != 1:
        prod = G.mul(prod, alpha)
    if beta == 0:
        return G.add(prod, _filled(self, 0))   # a zero gradient for self
    return G.add(prod, self if beta == 1 else G.mul(self, beta))


def addmv(input, mat, vec, beta=1, alpha=1):
    """beta * input + alpha * (mat @ vec) for tensors of one dtype (torch.addmv)."""
    if not input._data.dtype == mat._data.dtype == vec._data.dtype:
        raise EmberRuntimeError("addmv: " + str(_K.addmv_dtype_error(input._data, mat._data,
                                                                      vec._data)))
    return _scaled_add(input, mv(mat, vec), beta, alpha)


def addr(input, vec1, vec2, beta=1, alpha=1):
    return _scaled_add(input, G.outer(vec1, vec2), beta, alpha)


def baddbmm(input, batch1, batch2, beta=1, alpha=1):
    """beta * input + alpha * (batch1 @ batch2) for tensors of one dtype (torch.baddbmm; its
    checks: input against batch1, then the batches against each other)."""
    if input._data.dtype != batch1._data.dtype:
        raise EmberRuntimeError(
            f"baddbmm: Input dtypes must be the same, got: input {_K.cpp_name(input._data.dtype)}"
            f", batch1: {_K.cpp_name(batch1._data.dtype)}, batch2: "
            f"{_K.cpp_name(batch2._data.dtype)}")
    return _scaled_add(input, G.bmm(batch1, batch2), beta, alpha)


def addbmm(input, batch1, batch2, beta=1, alpha=1):
    """beta * input + alpha * sum_i(batch1[i] @ batch2[i]) for tensors of one dtype
    (torch.addbmm, with addmm's dtype checks)."""
    try:
        _K.addmm_dtype_check(input._data, batch1._data, batch2._data)
    except _K.KernelError as e:
        raise EmberRuntimeError(f"addbmm: {e}") from None
    return _scaled_add(input, G.sum(G.bmm(batch1, batch2), (0,)), beta, alpha)


def triangular_solve(input, A, upper=True, transpose=False, unitriangular=False):
    """(solution, cloned_coefficient) of A X = b (A^T X = b when ``transpose``)."""
    batch = np.broadcast_shapes(input._data.shape[:-2], A._data.shape[:-2])
    coefficient = G.clone(G.broadcast_to(A, tuple(batch) + tuple(A._data.shape[-2:])))
    M = _mT(A) if transpose else A
    X = G.linalg_solve_triangular(M, input, upper=upper != transpose, left=True,
                                  unitriangular=unitriangular)
    return X, coefficient


def cholesky_inverse(input, upper=False):
    n = input._data.shape[-1]
    eye = Tensor._make(np.eye(n, dtype=input._data.dtype))
    return G.cholesky_solve(eye, input, upper)


# Pade approximant of degree 13 with scaling and squaring (Higham 2005)
_PADE13 = (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800.,
           129060195264000., 10559470521600., 670442572800., 33522128640., 1323241920.,
           40840800., 960960., 16380., 182., 1.)
_THETA13 = 5.371920351148152


def linalg_matrix_exp(A):
    _need_matrix(A, "linalg.matrix_exp", square=True)
    _need_float(A, "linalg.matrix_exp")
    n = A._data.shape[-1]
    if n == 0:
        return G.clone(A)
    from ember.ops.shape import _data_read
    _data_read(A, "linalg.matrix_exp", "the scaling follows the matrix's 1-norm")
    norm1 = float(np.max(np.sum(np.abs(A._data), axis=-2), initial=0.0))
    s = max(0, int(np.ceil(np.log2(norm1 / _THETA13)))) if norm1 > 0 else 0
    X = G.mul(A, 2.0 ** -s) if s else A
    b = _PADE13
    eye = Tensor._make(np.eye(n, dtype=A._data.dtype))
    X2 = G.matmul(X, X)
    X4 = G.matmul(X2, X2)
    X6 = G.matmul(X4, X2)

    def comb(c6, c4, c2, c0):
        return G.add(G.add(G.mul(X6, c6), G.mul(X4, c4)), G.add(G.mul(X2, c2), G.mul(eye, c0)))

    U = G.matmul(X, G.add(G.matmul(X6, G.add(G.add(G.mul(X6, b[13]), G.mul(X4, b[11])),
                                              G.mul(X2, b[9]))), comb(b[7], b[5], b[3], b[1])))
    V = G.add(G.matmul(X6, G.add(G.add(G.mul(X6, b[12]), G.mul(X4, b[10])), G.mul(X2, b[8]))),
              comb(b[6], b[4], b[2], b[0]))
    R = G.linalg_solve(G.sub(V, U), G.add(V, U))
    for _ in range(s):
        R = G.matmul(R, R)
    return R


def _householder(A, tau, ncols):
    """H_1 ... H_k I[:, :ncols], H_i = I - tau_i v_i v_i^T, v_i = (0.., 1, A[i+1:, i])."""
    m, n = A._data.shape[-2:]
    k = tau._data.shape[-1]
    if k > n or k > m:
        raise EmberRuntimeError(f"householder_product: tau has {k} scales for an input of shape "
                                f"{tuple(A._data.shape)} (expected at most min(m, n))")
    dt = A._data.dtype
    batch = np.broadcast_shapes(A._data.shape[:-2], tau._data.shape[:-1])
    Q = Tensor._make(np.broadcast_to(np.eye(m, ncols, dtype=dt), batch + (m, ncols)).copy())
    if k == 0:   # still an output of A's graph (a zero gradient), as torch
        Q = G.add(Q, _filled(G.sum(A, (-2, -1), True), 0.0))
    rows = np.arange(m)
    for i in range(k - 1, -1, -1):
        v = G.select(A, -1, i)
        v = G.where(Tensor._make(rows < i), 0.0, v)
        v = G.where(Tensor._make(rows == i), 1.0, v)
        w = G.matmul(G.unsqueeze(v, -2), Q)
        t = G.unsqueeze(G.unsqueeze(G.select(tau, -1, i), -1), -1)
        Q = G.sub(Q, G.mul(t, G.mul(G.unsqueeze(v, -1), w)))
    return Q


def linalg_householder_product(A, tau):
    _need_matrix(A, "linalg.householder_product")
    if A._data.shape[-2] < A._data.shape[-1]:
        raise EmberRuntimeError(f"linalg.householder_product: input must have at least as many "
                                f"rows as columns, got shape {tuple(A._data.shape)}")
    return _householder(A, tau, A._data.shape[-1])


def ormqr(input, input2, input3, left=True, transpose=False):
    """input3 multiplied by Q (Q^T when ``transpose``) of geqrf's (input, input2) factors."""
    Q = _householder(input, input2, input._data.shape[-2])
    if transpose:
        Q = _mT(Q)
    return G.matmul(Q, input3) if left else G.matmul(input3, Q)


def linalg_ldl_factor(A, hermitian=False):
    LD, pivots, _ = G.linalg_ldl_factor_ex(A, hermitian=hermitian, check_errors=True)
    return LD, pivots


# top-level torch functions returning named tuples (torch.slogdet, torch.qr, torch.svd)
def _top_slogdet(input):
    """(sign, logabsdet) of the determinants of ``input``."""
    return R.slogdet(*G.slogdet(input))


def _top_qr(input, some=True):
    """Q, R (reduced when ``some``, else complete)."""
    return R.qr(*G.qr(input, some))


def _top_svd(input, some=True, compute_uv=True):
    """U, S, V with input = U diag(S) V^T (torch.svd; note V, not Vh)."""
    return R.svd(*G.svd(input, some, compute_uv))


def _top_triangular_solve(input, A, upper=True, transpose=False, unitriangular=False):
    """(solution, cloned_coefficient) of A X = input (torch.triangular_solve)."""
    return R.triangular_solve(*G.triangular_solve(input, A, upper, transpose, unitriangular))


def _top_geqrf(input):
    """(a, tau): LAPACK geqrf's packed QR (torch.geqrf; not differentiable, as in torch)."""
    return R.geqrf(*G.geqrf(input))


def _top_lu(A, pivot=True, get_infos=False):
    """(LU, pivots), with the infos when ``get_infos`` (torch.lu; raises on a zero pivot
    otherwise)."""
    LU, pivots, info = G.linalg_lu_factor_ex(A, pivot=pivot, check_errors=not get_infos)
    return (LU, pivots, info) if get_infos else (LU, pivots)


def _top_lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    """P, L, U from packed LU factors and pivots."""
    return R.lu_unpack(*G.lu_unpack(LU_data, LU_pivots, unpack_data, unpack_pivots))


def _einsum_subscript(n):
    if n is Ellipsis:
        return "..."
    if isinstance(n, int) and 0 <= n < 26:
        return chr(ord("A") + n)
    if isinstance(n, int) and 26 <= n < 52:
        return chr(ord("a") + n - 26)
    raise EmberValueError("einsum(): subscript in subscript list is not within the valid range "
                          "[0, 52)")


def einsum(*args):
    """torch.einsum: ``einsum(equation, *operands)`` (the operands also as one list) or the
    sublist form ``einsum(op1, sublist1, op2, sublist2, ..., [sublist_out])``, whose subscripts
    are integers in [0, 52) (``A``-``Z``, then ``a``-``z``) and ``...``. Raises ValueError
    without an operand or for a subscript outside [0, 52)."""
    if len(args) < 2:
        raise EmberValueError("einsum(): must specify the equation string and at least one "
                              "operand, or at least one operand and its subscripts list")
    if not isinstance(args[0], Tensor):
        return G.einsum(args[0], *args[1:])
    equation = ",".join("".join(_einsum_subscript(s) for s in sub) for sub in args[1::2])
    if len(args) % 2 == 1:
        equation += "->" + "".join(_einsum_subscript(s) for s in args[-1])
        return G.einsum(equation, *args[:-1:2])
    return G.einsum(equation, *args[::2])


def chain_matmul(*matrices, out=None):
    """torch.chain_matmul (deprecated in torch, with its warning): the product of the matrices,
    as ``linalg.multi_dot``; one matrix is returned as a copy."""
    import warnings
    warnings.warn("torch.chain_matmul is deprecated and will be removed in a future PyTorch "
                  "release. Use torch.linalg.multi_dot instead, which accepts a list of two or "
                  "more tensors rather than multiple parameters.", UserWarning, stacklevel=3)
    if len(matrices) == 1 and isinstance(matrices[0], (list, tuple)):
        matrices = tuple(matrices[0])
    if not matrices:
        raise EmberRuntimeError("chain_matmul(): Expected one or more matrices")
    for i, m in enumerate(matrices):
        if m._data.ndim != 2:
            raise EmberRuntimeError(f"chain_matmul(): Tensor {i} must be 2D, got "
                                    f"{m._data.ndim}D (shape {list(m._data.shape)})")
    res = G.clone(matrices[0]) if len(matrices) == 1 else G.linalg_multi_dot(list(matrices))
    return res if out is None else out.resize_(tuple(res.shape)).copy_(res)


def frobenius_norm(input, dim, keepdim=False):
    """torch.frobenius_norm (deprecated in torch): the 2-norm over at most two ``dim``, as
    ``linalg.vector_norm(input, 2, dim, keepdim)``."""
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if len(dims) > 2:
        raise EmberRuntimeError(f"frobenius_norm: Expected at most 2 dimensions, but got "
                                f"{len(dims)} dimensions instead.")
    return G.linalg_vector_norm(input, 2.0, dims, keepdim)


def nuclear_norm(input, dim=None, keepdim=False):
    """torch.nuclear_norm (deprecated in torch): ``nuclear_norm(input, keepdim=False)`` over the
    last two dims or ``nuclear_norm(input, dim, keepdim=False)``, as ``linalg.matrix_norm(input,
    'nuc', dim, keepdim)``."""
    if isinstance(dim, bool):   # the nuclear_norm(input, keepdim) overload
        dim, keepdim = None, dim
    return G.linalg_matrix_norm(input, "nuc", (-2, -1) if dim is None else tuple(dim), keepdim)


def ger(input, vec2):
    """torch.ger: torch.outer's old name."""
    return G.outer(input, vec2)


_REMOVED = {
    "matrix_rank": "Please use the `torch.linalg.matrix_rank` function instead. The parameter "
                   "'symmetric' was renamed in `torch.linalg.matrix_rank()` to 'hermitian'.",
    "lstsq": "`torch.lstsq` is deprecated in favor of `torch.linalg.lstsq`. `torch.linalg.lstsq` "
             "has reversed arguments and does not return the QR decomposition in the returned "
             "tuple; X = torch.linalg.lstsq(A, B).solution",
    "eig": "`torch.linalg.eig` returns complex tensors of dtype `cfloat` or `cdouble` rather than "
           "real tensors mimicking complex tensors: L_complex = torch.linalg.eigvals(A), or "
           "L_complex, V_complex = torch.linalg.eig(A)",
    "symeig": "The default behavior has changed from using the upper triangular portion of the "
              "matrix by default to using the lower triangular portion: L = "
              "torch.linalg.eigvalsh(A, UPLO='U' if upper else 'L'), or L, V = "
              "torch.linalg.eigh(A, UPLO='U' if upper else 'L')",
    "solve": "`torch.solve` is deprecated in favor of `torch.linalg.solve`. `torch.linalg.solve` "
             "has its arguments reversed and does not return the LU factorization: X = "
             "torch.linalg.solve(A, B)",
}


def _removed(name):
    """torch.<name>, removed in torch 1.9 and kept only to raise (as torch does)."""
    def removed(*args, **kwargs):
        raise EmberRuntimeError(f"{name}: This function was deprecated since version 1.9 and is "
                                f"now removed. {_REMOVED[name]}")
    removed.__name__ = removed.__qualname__ = name
    removed.__doc__ = f"torch.{name}: removed in torch 1.9; raises, naming its replacement."
    return removed


TOPLEVEL = {"slogdet": _public(_top_slogdet, "slogdet"), "qr": _public(_top_qr, "qr"),
            "svd": _public(_top_svd, "svd"), "lu": _public(_top_lu, "lu"),
            "lu_unpack": _public(_top_lu_unpack, "lu_unpack"),
            "triangular_solve": _public(_top_triangular_solve, "triangular_solve"),
            "geqrf": _public(_top_geqrf, "geqrf")}


def _inplace(name):
    op = getattr(G, name)

    def method(self, *args, **kwargs):
        return self.copy_(op(self, *args, **kwargs))
    method.__name__ = method.__qualname__ = name + "_"
    method.__doc__ = f"In-place {name}: writes the result into ``self`` and returns it."
    return _public(method, name + "_")


def _basis(A, q, niter, M):
    """An orthonormal (..., m, q) basis approximating A's range (Halko et al., algorithm 4.4)."""
    n = A.shape[-1]
    R = G.randn(tuple(A.shape[:-2]) + (n, q), resolve(None), A._data.dtype)
    X = G.matmul(A, R)
    if M is not None:
        X = G.sub(X, G.matmul(M, R))
    Q = G.linalg_qr(X, "reduced")[0]
    At = G.transpose(A, -2, -1)
    Mt = None if M is None else G.transpose(M, -2, -1)
    for _ in builtins.range(niter):
        X = G.matmul(At, Q)
        if Mt is not None:
            X = G.sub(X, G.matmul(Mt, Q))
        Q = G.linalg_qr(X, "reduced")[0]
        X = G.matmul(A, Q)
        if M is not None:
            X = G.sub(X, G.matmul(M, Q))
        Q = G.linalg_qr(X, "reduced")[0]
    return Q


def _check_count(op, name, v):
    """``v`` is a non-negative int within int64 (a loop count or a rank)."""
    if isinstance(v, bool) or not isinstance(v, int):
        raise EmberTypeError(f"{op}: {name} must be an int, got {type(v).__name__} {v!r}")
    if not 0 <= v < 2 ** 63:
        raise EmberValueError(f"{op}: {name} must be a non-negative int64, got {v}")


def svd_lowrank(A, q=6, niter=2, M=None):
    """(U, S, V) of a rank-``q`` approximate SVD of ``A`` (or ``A - M``) by randomized subspace
    iteration (torch.svd_lowrank; ember's default generator draws the test matrix)."""
    q = 6 if q is None else q
    _check_count("svd_lowrank", "q", q)
    _check_count("svd_lowrank", "niter", niter)
    m, n = A.shape[-2], A.shape[-1]
    if not 0 <= q <= builtins.min(m, n):
        raise EmberValueError(f"svd_lowrank: q={q} must be in [0, min(m, n) = {builtins.min(m, n)}]"
                              f" for A of shape {tuple(A.shape)}")
    if M is not None:
        M = G.broadcast_to(M, tuple(A.shape))
    if m < n:  # work on the transpose, whose range is the smaller space
        A, M = G.transpose(A, -2, -1), None if M is None else G.transpose(M, -2, -1)
    Q = _basis(A, q, niter, M)
    B = G.matmul(G.transpose(Q, -2, -1), A)
    if M is not None:
        B = G.sub(B, G.matmul(G.transpose(Q, -2, -1), M))
    U, S, Vh = G.linalg_svd(B, False)
    U, V = G.matmul(Q, U), G.transpose(Vh, -2, -1)
    return (V, S, U) if m < n else (U, S, V)


def pca_lowrank(A, q=None, center=True, niter=2):
    """(U, S, V) of a principal component analysis of ``A``'s rows (torch.pca_lowrank): the
    low-rank SVD of ``A`` less its column means when ``center``."""
    m, n = A.shape[-2], A.shape[-1]
    q = builtins.min(6, m, n) if q is None else q
    _check_count("pca_lowrank", "q", q)
    _check_count("pca_lowrank", "niter", niter)
    if not 0 <= q <= builtins.min(m, n):
        raise EmberValueError(f"pca_lowrank: q={q} must be in [0, min(m, n) = {builtins.min(m, n)}]"
                              f" for A of shape {tuple(A.shape)}")
    if not center:
        return svd_lowrank(A, q, niter)
    C = G.mean(A, (-2,), True)
    return svd_lowrank(G.sub(A, C), q, niter)


def dist(input, other, p=2):
    """The p-norm of ``input - other`` (broadcast)."""
    return G.linalg_vector_norm(G.sub(input, other), p)


def renorm(input, p, dim, maxnorm):
    """Each slice along ``dim`` rescaled so that its p-norm is at most ``maxnorm``."""
    n = input._data.ndim
    d = _dim(input, dim, "renorm")
    if p <= 0:
        raise EmberRuntimeError(f"renorm: non-positive norm p={p} is not supported")
    if maxnorm < 0:
        raise EmberRuntimeError(f"renorm: non-negative maxnorm expected, got {maxnorm}")
    others = tuple(i for i in range(n) if i != d)
    norm = G.linalg_vector_norm(input, p, others, True)
    scale = G.where(G.gt(norm, maxnorm), maxnorm / G.add(norm, 1e-7), G.ones_like(norm))
    return G.mul(input, scale)


def cdist(x1, x2, p=2.0, compute_mode=None):
    """p-norm distances between each row of ``x1`` and each row of ``x2`` (batched)."""
    if x1._data.ndim < 2 or x2._data.ndim < 2:
        raise EmberRuntimeError(f"cdist: expected x1 and x2 with at least 2 dimensions, got "
                                f"shapes {tuple(x1._data.shape)} and {tuple(x2._data.shape)}")
    if x1._data.shape[-1] != x2._data.shape[-1]:
        raise EmberRuntimeError(f"cdist: x1 and x2 must have the same number of columns, got "
                                f"{x1._data.shape[-1]} and {x2._data.shape[-1]}")
    if p < 0:
        raise EmberRuntimeError(f"cdist: p must be non-negative, got {p}")
    if compute_mode not in (None, "use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                            "donot_use_mm_for_euclid_dist"):
        raise EmberValueError(f"cdist: {compute_mode} is not a valid value for compute_mode")
    r1, r2 = x1._data.shape[-2], x2._data.shape[-2]
    if p == 2 and x1._data.size and x2._data.size and (
            compute_mode == "use_mm_for_euclid_dist" or
            (compute_mode != "donot_use_mm_for_euclid_dist" and (r1 > 25 or r2 > 25))):
        return _euclidean_dist(x1, x2)
    diff = G.sub(G.unsqueeze(x1, -2), G.unsqueeze(x2, -3))
    return G.linalg_vector_norm(diff, p, (-1,))


def _euclidean_dist(x1, x2):
    """cdist's p = 2 by one matrix product, as torch computes it past 25 rows: [-2 x1, |x1|^2,
    1] @ [x2, 1, |x2|^2]^T, the square root of its positive part; the gradient 0 at a distance of
    0 (torch's subgradient there), not sqrt's infinity."""
    n1 = G.sum(G.pow(x1, 2), (-1,), True)
    n2 = G.sum(G.pow(x2, 2), (-1,), True)
    a = G.cat([G.mul(x1, -2), n1, G.ones_like(n1)], -1)
    b = G.cat([x2, G.ones_like(n2), n2], -1)
    d2 = G.matmul(a, G.transpose(b, -2, -1))
    pos = G.gt(d2, 0)
    return G.where(pos, G.sqrt(G.where(pos, d2, 1.0)), 0.0)


def trace(input):
    if input.ndim != 2:
        raise EmberRuntimeError(f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    return G.sum(G.diagonal(input, 0, 0, 1))


# these raise ember's errors naming them (ember.errors.public)
for _n in ("trace",):
    globals()[_n] = _public(globals()[_n])
del _n
