"""Kernels of ``ember.linalg``: determinants, inverses, solves and decompositions on NumPy's LAPACK
(``np.linalg`` works on batches ``(..., m, n)``)."""
import numpy as np

from ember._optional import require
from ember.errors import LinAlgError
from ember.kernels.dtypes import promote
from ember.kernels.errors import KernelError
from ember.kernels.runtime.threads import FREE, blas_mode


def _float(a, complex_ok=False):
    """``a`` if floating (or complex, for the kernels that support it: solve, eig)."""
    if a.dtype.kind not in ("fc" if complex_ok else "f"):
        raise KernelError(f"expected a floating point tensor as input, got {a.dtype}")
    return a


def _square(a, name="A", complex_ok=False):
    _float(a, complex_ok)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise KernelError(f"{name} must be a batch of square matrices (..., n, n), got shape "
                          f"{tuple(a.shape)}")
    return a


def _matrix(a, name="A"):
    _float(a)
    if a.ndim < 2:
        raise KernelError(f"{name} must have at least 2 dimensions (..., m, n), got shape "
                          f"{tuple(a.shape)}")
    return a


def _singular(what="the input matrix is singular"):
    return LinAlgError(f"{what}, the computation could not be completed")


def _solve_broadcast(a, b, pair, singular="the input matrix is singular"):
    """``np.linalg.solve(a, b)`` over the broadcast batch dims of ``a`` and ``b``: a
    KernelError "batch dimensions of <pair> cannot be broadcast" when they do not, a
    LinAlgError ``_singular(singular)`` when a matrix is singular."""
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise KernelError(f"batch dimensions of {pair} cannot be broadcast") from None
    a = np.broadcast_to(a, batch + a.shape[-2:])
    b = np.broadcast_to(b, batch + b.shape[-2:])
    try:
        with blas_mode(FREE):
            return np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        raise _singular(singular) from None


def det(a):
    _square(a)
    with blas_mode(FREE):
        return np.asarray(np.linalg.det(a), dtype=a.dtype)


def slogdet(a):
    _square(a)
    with blas_mode(FREE):
        sign, lad = np.linalg.slogdet(a)
    return np.asarray(sign, dtype=a.dtype), np.asarray(lad, dtype=a.dtype)


def inv(a):
    _square(a)
    try:
        with blas_mode(FREE):
            return np.linalg.inv(a)
    except np.linalg.LinAlgError:
        raise _singular() from None


def _solve_is_vector(a, b):
    return b.ndim == 1 or (b.ndim == a.ndim - 1 and b.shape == a.shape[:-1])


def solve(a, b, left):
    _square(a, complex_ok=True)
    _float(b, complex_ok=True)
    a, b = promote(a, b)
    vector = _solve_is_vector(a, b)
    n = a.shape[-1]
    if vector:
        if not left:
            raise KernelError(f"left=False needs B with at least 2 dimensions "
                              f"(..., k, n), got shape {tuple(b.shape)}")
        if b.shape[-1] != n:
            raise KernelError(f"incompatible shapes of A {tuple(a.shape)} and "
                              f"B {tuple(b.shape)}")
        b = b[..., None]
    else:
        if b.ndim < 2 or b.shape[-2 if left else -1] != n:
            raise KernelError(f"incompatible shapes of A {tuple(a.shape)} and "
                              f"B {tuple(b.shape)}")
        if not left:
            a, b = np.swapaxes(a, -1, -2), np.swapaxes(b, -1, -2)
    x = _solve_broadcast(a, b, f"A {tuple(a.shape)} and B {tuple(b.shape)}")
    if vector:
        return x[..., 0]
    return x if left else np.ascontiguousarray(np.swapaxes(x, -1, -2))


def solve_triangular(a, b, upper, left, unitriangular):
    _square(a)
    _matrix(b, "B")
    a, b = promote(a, b)
    n = a.shape[-1]
    if b.shape[-2 if left else -1] != n:
        raise KernelError(f"incompatible shapes of A {tuple(a.shape)} and B {tuple(b.shape)}")
    t = np.triu(a) if upper else np.tril(a)
    if unitriangular:
        t = t.copy()
        idx = np.arange(n)
        t[..., idx, idx] = 1
    if not left:
        t, b = np.swapaxes(t, -1, -2), np.swapaxes(b, -1, -2)
    x = _solve_broadcast(t, b, f"A {tuple(a.shape)} and B {tuple(b.shape)}")
    return x if left else np.ascontiguousarray(np.swapaxes(x, -1, -2))


def cholesky(a, upper):
    _square(a)
    try:
        with blas_mode(FREE):
            low = np.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        raise LinAlgError("the input is not positive-definite") from None
    return np.ascontiguousarray(np.swapaxes(low, -1, -2)) if upper else low


def cholesky_solve(b, l, upper):
    """X with A X = B for A = L L^T (U^T U when ``upper``), reading that triangle of ``l``."""
    _square(l, "input2")
    _matrix(b, "input")
    b, l = promote(b, l)
    if b.shape[-2] != l.shape[-1]:
        raise KernelError(f"incompatible shapes of input {tuple(b.shape)} and input2 "
                          f"{tuple(l.shape)}")
    t = np.triu(l) if upper else np.tril(l)
    a = np.swapaxes(t, -1, -2) @ t if upper else t @ np.swapaxes(t, -1, -2)
    return _solve_broadcast(a, b, f"input {tuple(b.shape)} and input2 {tuple(l.shape)}",
                            "the factor is singular")


def cross(a, b, dim):
    a, b = promote(a, b)
    nd = max(a.ndim, b.ndim)
    if a.ndim != b.ndim:
        raise KernelError(f"inputs must have the same number of dimensions, got shapes "
                          f"{tuple(a.shape)} and {tuple(b.shape)}")
    if nd == 0 or not -nd <= dim < nd:
        raise KernelError(f"dim {dim} out of range for inputs of shapes "
                          f"{tuple(a.shape)} and {tuple(b.shape)}")
    a = a.reshape((1,) * (nd - a.ndim) + a.shape)
    b = b.reshape((1,) * (nd - b.ndim) + b.shape)
    if a.shape[dim] != 3 or b.shape[dim] != 3:
        raise KernelError(f"inputs must have size 3 in dimension {dim}, got shapes "
                          f"{tuple(a.shape)} and {tuple(b.shape)}")
    try:
        return np.ascontiguousarray(np.cross(a, b, axis=dim))
    except ValueError:
        raise KernelError(f"shapes {tuple(a.shape)} and {tuple(b.shape)} cannot be "
                          f"broadcast") from None


def qr(a, mode):
    _matrix(a)
    if mode not in ("reduced", "complete", "r"):
        raise KernelError(f"qr received unrecognized mode '{mode}' but expected one of "
                          f"'reduced' (default), 'r', or 'complete'")
    with blas_mode(FREE):
        if mode == "r":
            r = np.linalg.qr(a, mode="r")
            return np.zeros((0,), a.dtype), np.ascontiguousarray(r)
        q, r = np.linalg.qr(a, mode=mode)
    return np.ascontiguousarray(q), np.ascontiguousarray(r)


def _column_signs(x):
    """+-1 per column of ``x`` (..., m, k) making each column's largest-magnitude entry positive,
    so that the decomposition's signs do not depend on the LAPACK build."""
    if x.shape[-2] == 0:
        return np.ones(x.shape[:-2] + (1,) + x.shape[-1:], x.dtype)
    idx = np.argmax(np.abs(x), axis=-2)[..., None, :]
    sgn = np.sign(np.take_along_axis(x, idx, axis=-2))
    sgn[sgn == 0] = 1
    return sgn


def _nan_svd(a, full_matrices):
    """(U, S, Vh) all NaN, for a matrix holding inf or NaN: OpenBLAS's gesdd may never return on
    one (a 3x4 matrix with one inf), and torch's SVD gives NaN there."""
    m, n = a.shape[-2:]
    k = min(m, n)
    batch = a.shape[:-2]
    real = np.zeros((), a.dtype).real.dtype
    return (np.full(batch + (m, m if full_matrices else k), np.nan, a.dtype),
            np.full(batch + (k,), np.nan, real),
            np.full(batch + (n if full_matrices else k, n), np.nan, a.dtype))


def svd(a, full_matrices):
    _matrix(a)
    if not np.isfinite(a).all():
        return _nan_svd(a, full_matrices)
    with blas_mode(FREE):
        try:
            u, s, vh = np.linalg.svd(a, full_matrices=full_matrices)
        except np.linalg.LinAlgError:
            raise LinAlgError("the algorithm failed to converge") from None
    k = s.shape[-1]
    su = _column_signs(u)                                  # (..., 1, m or k)
    u = u * su
    sv = np.swapaxes(_column_signs(np.swapaxes(vh, -1, -2)), -1, -2)   # (..., n or k, 1)
    sv[..., :k, :] = np.swapaxes(su[..., :, :k], -1, -2)  # the pair (u_i, v_i) flips together
    vh = vh * sv
    return u, s.astype(a.dtype, copy=False), vh


def eig(a):
    """Eigenvalues and unit-norm eigenvectors of general square ``a`` (LAPACK geev, as torch),
    always complex: complex64 for float32 input, complex128 for float64."""
    _square(a, complex_ok=True)
    out = np.complex64 if a.dtype in (np.float32, np.complex64) else np.complex128
    with blas_mode(FREE):
        try:
            w, v = np.linalg.eig(a)
        except np.linalg.LinAlgError:
            raise LinAlgError("the algorithm failed to converge") from None
    return w.astype(out, copy=False), v.astype(out, copy=False)


def eigh(a, UPLO):
    _square(a)
    if UPLO not in ("L", "U"):
        raise KernelError(f"UPLO must be 'L' or 'U', got {UPLO!r}")
    with blas_mode(FREE):
        try:
            w, v = np.linalg.eigh(a, UPLO=UPLO)
        except np.linalg.LinAlgError:
            raise LinAlgError("the algorithm failed to converge") from None
    return w.astype(a.dtype, copy=False), v * _column_signs(v)


def lstsq_info(a, b, rcond, driver):
    """(residuals, rank, singular_values) of torch.linalg.lstsq, as torch computes them on CPU:
    rank for every driver but 'gels', singular values for 'gelsd'/'gelss' only, residuals when
    m > n and every matrix is full rank (not for 'gelsy')."""
    _matrix(a)
    _float(b)
    if driver not in (None, "gels", "gelsy", "gelsd", "gelss"):
        raise KernelError(f"parameter `driver` should be one of (gels, gelsy, gelsd, gelss), "
                          f"got {driver!r}")
    driver = driver or "gelsy"
    m, n = a.shape[-2:]
    vector = b.ndim == a.ndim - 1
    bm = b[..., None] if vector else b
    if bm.shape[-2] != m:
        raise KernelError(f"incompatible shapes of A {tuple(a.shape)} and B {tuple(b.shape)}")
    with blas_mode(FREE):
        s = np.linalg.svd(a, compute_uv=False) if np.isfinite(a).all() else \
            _nan_svd(a, False)[1]  # rank 0, as torch's gelsy
        if rcond is None:
            rcond = np.finfo(a.dtype).eps * max(m, n)
        tol = rcond * (s[..., :1] if s.shape[-1] else 0)
        rank = np.sum(s > tol, axis=-1).astype(np.int64)
        if m > n and driver != "gelsy" and bool(np.all(rank == n)):
            x = np.linalg.pinv(a) @ bm
            res = np.sum((a @ x - bm) ** 2, axis=-2)
            res = res[..., 0] if vector else res
        else:
            res = np.zeros((0,), a.dtype)
    if driver == "gels":
        rank = np.zeros((0,), np.int64)
    sv = s.astype(a.dtype) if driver in ("gelsd", "gelss") else np.zeros((0,), a.dtype)
    return res.astype(a.dtype, copy=False), np.asarray(rank), sv


def pinv(a, atol, rtol, hermitian):
    """Pseudo-inverse dropping singular values (|eigenvalues| when ``hermitian``) <= max(atol,
    rtol * largest); torch's default rtol is eps * max(m, n) when atol is unset or zero."""
    (_square if hermitian else _matrix)(a)
    m, n = a.shape[-2:]
    # tolerances: floats, or tensors holding one per matrix of the batch
    atol = None if atol is None else np.asarray(getattr(atol, "_data", atol), np.float64)[..., None]
    rtol = None if rtol is None else np.asarray(getattr(rtol, "_data", rtol), np.float64)[..., None]
    if rtol is None:
        rtol = np.finfo(a.dtype).eps * max(m, n) if atol is None or np.all(atol <= 0) else 0.0
    atol = 0.0 if atol is None else atol
    with blas_mode(FREE):
        if hermitian:
            w, v = np.linalg.eigh(a)
            aw = np.abs(w)
            tol = np.maximum(atol, rtol * aw.max(axis=-1, keepdims=True, initial=0.0))
            winv = np.where(aw > tol, 1 / np.where(aw > tol, w, 1), 0)
            return np.ascontiguousarray((v * winv[..., None, :]) @ np.swapaxes(v, -1, -2)).astype(
                a.dtype, copy=False)
        if not np.isfinite(a).all():
            return np.full(a.shape[:-2] + (n, m), np.nan, a.dtype)
        u, s, vh = np.linalg.svd(a, full_matrices=False)
        tol = np.maximum(atol, rtol * s.max(axis=-1, keepdims=True, initial=0.0))
        sinv = np.where(s > tol, 1 / np.where(s > tol, s, 1), 0)
        out = np.swapaxes(vh, -1, -2) * sinv[..., None, :] @ np.swapaxes(u, -1, -2)
    return np.ascontiguousarray(out).astype(a.dtype, copy=False)


def lu_factor_ex(a, pivot, check_errors):
    """Partial-pivoting LU as LAPACK getrf: (LU packed, 1-based int32 pivots, int32 info = the
    first zero pivot, 1-based, else 0), batched over the leading dimensions."""
    _matrix(a)
    if not pivot:
        raise KernelError("LU without pivoting is not implemented on the CPU")
    m, n = a.shape[-2:]
    k = min(m, n)
    batch = a.shape[:-2]
    b = int(np.prod(batch))
    lu = np.array(a, dtype=a.dtype, copy=True).reshape((b, m, n))
    piv = np.zeros((b, k), np.int32)
    info = np.zeros(b, np.int32)
    rows = np.arange(b)
    for j in range(k):
        p = j + np.argmax(np.abs(lu[:, j:, j]), axis=1)
        piv[:, j] = p + 1
        top = lu[rows, j, :].copy()
        lu[rows, j, :] = lu[rows, p, :]
        lu[rows, p, :] = top
        d = lu[:, j, j]
        zero = d == 0
        info[(info == 0) & zero] = j + 1
        lu[:, j + 1:, j] /= np.where(zero, 1, d)[:, None]
        lu[:, j + 1:, j + 1:] -= lu[:, j + 1:, j:j + 1] * lu[:, j:j + 1, j + 1:]
    info = info.reshape(batch)
    if check_errors and np.any(info):
        first = int(np.flatnonzero(info.reshape(-1))[0])
        raise LinAlgError(f"(Batch element {first}): U[{info.reshape(-1)[first]},"
                          f"{info.reshape(-1)[first]}] is zero")
    return lu.reshape(batch + (m, n)), piv.reshape(batch + (k,)), info


def lu_pivots_to_permutation(pivots, m):
    """The permutation matrices P (..., m, m) with A = P L U for LAPACK's 1-based pivots."""
    batch, k = pivots.shape[:-1], pivots.shape[-1]
    nb = int(np.prod(batch))
    perm = np.broadcast_to(np.arange(m), batch + (m,)).copy().reshape(nb, m)
    pv = pivots.reshape(nb, k).astype(np.int64) - 1
    rows = np.arange(perm.shape[0])
    for j in range(k):
        p = pv[:, j]
        if np.any((p < j) | (p >= m)):
            raise KernelError(f"pivots must be in [{j + 1}, {m}] at position {j}")
        a, c = perm[rows, j].copy(), perm[rows, p].copy()
        perm[rows, j], perm[rows, p] = c, a
    P = np.zeros((perm.shape[0], m, m))
    P[rows[:, None], perm, np.arange(m)[None, :]] = 1   # column j of P selects row perm[j]
    return P.reshape(batch + (m, m))


def lu_solve_unchecked(lu, pivots, b):
    """X = A^-1 B from packed LU factors by substitution, batched; a zero pivot gives inf/nan as
    LAPACK's getrs does (for inv_ex/solve_ex on singular matrices)."""
    n = lu.shape[-1]
    x = np.array(np.broadcast_to(b, np.broadcast_shapes(lu.shape[:-2], b.shape[:-2]) + b.shape[-2:]),
                 dtype=lu.dtype)
    lu = np.broadcast_to(lu, x.shape[:-2] + (n, n))
    pv = np.broadcast_to(pivots, x.shape[:-2] + pivots.shape[-1:]).astype(np.int64) - 1
    idx = np.indices(x.shape[:-2])
    for j in range(pv.shape[-1]):      # row interchanges P^T B
        p = pv[..., j]
        top = x[(*idx, np.full_like(p, j))].copy()
        x[(*idx, np.full_like(p, j))] = x[(*idx, p)]
        x[(*idx, p)] = top
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in range(n):             # L y = P^T B (unit diagonal)
            x[..., i, :] -= np.einsum("...k,...kj->...j", lu[..., i, :i], x[..., :i, :])
        for i in range(n - 1, -1, -1):  # U x = y
            x[..., i, :] -= np.einsum("...k,...kj->...j", lu[..., i, i + 1:], x[..., i + 1:, :])
            x[..., i, :] /= lu[..., i, i][..., None]
    return x


def cholesky_ex(a, upper, check_errors):
    """(factor, info): info is the order of the first leading minor that is not positive-definite
    (0 if none); a failing matrix holds LAPACK potrf's partial factor up to that column."""
    _square(a)
    n = a.shape[-1]
    batch = a.shape[:-2]
    flat = a.reshape((int(np.prod(batch)), n, n))
    out = np.zeros_like(flat)
    info = np.zeros(flat.shape[0], np.int32)
    with blas_mode(FREE):
        for i, m in enumerate(flat):
            try:
                out[i] = np.linalg.cholesky(m)
                continue
            except np.linalg.LinAlgError:
                pass
            low = np.tril(m).astype(m.dtype)
            for j in range(n):   # unblocked Cholesky-Crout until the failing pivot
                d = low[j, j] - low[j, :j] @ low[j, :j]
                if not d > 0:
                    low[j, j] = d
                    info[i] = j + 1
                    break
                low[j, j] = np.sqrt(d)
                low[j + 1:, j] = (low[j + 1:, j] - low[j + 1:, :j] @ low[j, :j]) / low[j, j]
            out[i] = low
    info = info.reshape(batch)
    if check_errors and np.any(info):
        first = int(np.flatnonzero(info.reshape(-1))[0])
        raise LinAlgError(f"(Batch element {first}): The factorization could not be completed "
                          f"because the input is not positive-definite (the leading minor of order "
                          f"{info.reshape(-1)[first]} is not positive-definite)")
    out = out.reshape(a.shape)
    return (np.ascontiguousarray(np.swapaxes(out, -1, -2)) if upper else out), info


def geqrf(a):
    """LAPACK geqrf: R above the diagonal, the Householder vectors below, and their scales tau."""
    _matrix(a)
    m, n = a.shape[-2:]
    if a.size == 0:
        return np.array(a, copy=True), np.zeros(a.shape[:-2] + (min(m, n),), a.dtype)
    with blas_mode(FREE):
        h, tau = np.linalg.qr(a, mode="raw")
    return np.ascontiguousarray(np.swapaxes(h, -1, -2)).astype(a.dtype, copy=False), \
        tau.astype(a.dtype, copy=False)


def _lapack(name, a):
    lapack = require("scipy.linalg.lapack", feature=f"LDL factorisation (LAPACK {name})",
                     extra="fast")
    return lapack.get_lapack_funcs(name, (a,))


def ldl_factor_ex(a, hermitian, check_errors):
    """LAPACK sytrf (Bunch-Kaufman): the compact lower LD, LAPACK's 1-based pivots (negative
    for 2x2 blocks) and info, batched."""
    _square(a)
    n = a.shape[-1]
    batch = a.shape[:-2]
    flat = a.reshape((int(np.prod(batch)), n, n))
    ld = np.zeros_like(flat)
    piv = np.zeros(flat.shape[:1] + (n,), np.int32)
    info = np.zeros(flat.shape[0], np.int32)
    if flat.size:
        sytrf = _lapack("sytrf", flat)
        for i, m in enumerate(flat):
            out, p, inf = sytrf(m, lower=1)
            ld[i], piv[i], info[i] = np.tril(out), p, inf
    info = info.reshape(batch)
    if check_errors and np.any(info):
        first = int(np.flatnonzero(info.reshape(-1))[0])
        raise LinAlgError(f"(Batch element {first}): the factorization could not be completed: "
                          f"D[{info.reshape(-1)[first]},{info.reshape(-1)[first]}] is zero")
    return ld.reshape(a.shape), piv.reshape(batch + (n,)), info


def ldl_solve(ld, pivots, b, hermitian):
    """X with A X = B from ldl_factor's (LD, pivots) (LAPACK sytrs)."""
    _square(ld, "LD")
    _matrix(b, "B")
    n = ld.shape[-1]
    if b.shape[-2] != n or pivots.shape[-1] != n:
        raise KernelError(f"incompatible shapes of LD {tuple(ld.shape)}, pivots "
                          f"{tuple(pivots.shape)} and B {tuple(b.shape)}")
    ld, b = promote(ld, b)
    batch = np.broadcast_shapes(ld.shape[:-2], pivots.shape[:-1], b.shape[:-2])
    nb = int(np.prod(batch))
    lds = np.broadcast_to(ld, batch + (n, n)).reshape((nb, n, n))
    ps = np.broadcast_to(pivots, batch + (n,)).reshape((nb, n))
    bs = np.broadcast_to(b, batch + b.shape[-2:]).reshape((nb,) + b.shape[-2:])
    out = np.zeros(bs.shape, ld.dtype)
    if out.size:
        sytrs = _lapack("sytrs", lds)
        for i in range(nb):
            out[i], inf = sytrs(lds[i], ps[i], bs[i], lower=1)
            if inf < 0:
                raise KernelError(f"LAPACK sytrs rejected argument {-inf}")
    return out.reshape(batch + b.shape[-2:])
