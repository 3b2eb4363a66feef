"""``ember.linalg``: torch.linalg's functions over the spec ops (``linalg_*``),
with torch's names, arguments, batching ``(..., m, n)`` and gradients; decompositions return
``ember.return_types`` named tuples as torch does.

Conventions: singular vectors and eigenvectors are returned with each column of ``U`` (of the
eigenvectors) having its largest-magnitude entry positive (``v_i`` flips with ``u_i``), so results
do not depend on the LAPACK build. The gradient of ``det`` needs an invertible matrix (torch also
differentiates singular ones); ``eigh``/``cholesky`` read one triangle and, as in torch, return
symmetric gradients."""
from ember import return_types as _R
from ember.autograd._generated import functions as _G
from ember.errors import LinAlgError
from ember.errors import public as _public

# torch.linalg name -> spec op (a plain tensor result)
_OPS = {
    "vector_norm": "linalg_vector_norm", "matrix_norm": "linalg_matrix_norm",
    "norm": "linalg_norm", "det": "linalg_det", "inv": "linalg_inv", "solve": "linalg_solve",
    "solve_triangular": "linalg_solve_triangular", "cholesky": "linalg_cholesky",
    "cross": "linalg_cross", "multi_dot": "linalg_multi_dot",
    "matrix_power": "linalg_matrix_power", "vecdot": "linalg_vecdot",
    "diagonal": "linalg_diagonal", "eigvalsh": "linalg_eigvalsh",
    "pinv": "linalg_pinv", "matrix_rank": "linalg_matrix_rank", "matmul": "matmul",
    "cond": "linalg_cond", "tensorinv": "linalg_tensorinv", "tensorsolve": "linalg_tensorsolve",
    "vander": "linalg_vander", "lu_solve": "linalg_lu_solve", "matrix_exp": "linalg_matrix_exp",
    "householder_product": "linalg_householder_product", "ldl_solve": "linalg_ldl_solve",
}

for _name, _op in _OPS.items():
    globals()[_name] = _public(getattr(_G, _op), _name)
del _name, _op


def slogdet(A):
    """(sign, logabsdet) of the determinants of ``A`` (..., n, n)."""
    return _R.linalg_slogdet(*_G.linalg_slogdet(A))


def qr(A, mode="reduced"):
    """Q, R with A = Q R; ``mode`` 'reduced', 'complete' or 'r' (Q empty)."""
    return _R.linalg_qr(*_G.linalg_qr(A, mode))


def _no_driver(name, driver):
    if driver is not None:
        from ember.errors import EmberRuntimeError
        raise EmberRuntimeError(f"{name}: keyword argument `driver=` is only supported on CUDA "
                                f"inputs with cuSOLVER backend (torch), got {driver!r}")


def svd(A, full_matrices=True, *, driver=None):
    """U, S, Vh with A = U diag(S) Vh, S descending (``driver`` is CUDA-only in torch: None)."""
    _no_driver("svd", driver)
    return _R.linalg_svd(*_G.linalg_svd(A, full_matrices))


def svdvals(A, *, driver=None):
    """The singular values of ``A``, descending."""
    _no_driver("svdvals", driver)
    return _G.linalg_svdvals(A)


def eig(A):
    """Eigenvalues and eigenvectors (columns, unit norm) of general square ``A`` (..., n, n),
    complex as torch's; the gradient needs distinct eigenvalues and a loss that does not depend
    on the eigenvectors' phases."""
    return _R.linalg_eig(*_G.linalg_eig(A))


def eigvals(A):
    """The eigenvalues of general square ``A`` (complex)."""
    return _G.linalg_eig(A)[0]


def eigh(A, UPLO="L"):
    """Eigenvalues (ascending) and eigenvectors of symmetric ``A``, from its ``UPLO`` triangle."""
    return _R.linalg_eigh(*_G.linalg_eigh(A, UPLO))


def lstsq(A, B, rcond=None, *, driver=None):
    """Least-squares solution of A X = B with torch's (residuals, rank, singular_values) for the
    CPU ``driver`` ('gelsy' default, 'gels', 'gelsd', 'gelss')."""
    return _R.linalg_lstsq(*_G.linalg_lstsq(A, B, rcond, driver=driver))


def lu_factor(A, *, pivot=True):
    """Packed LU factors and LAPACK's 1-based pivots (raises where U has a zero diagonal)."""
    return _R.linalg_lu_factor(*_G.linalg_lu_factor(A, pivot=pivot))


def lu_factor_ex(A, *, pivot=True, check_errors=False):
    """lu_factor with ``info`` (the first zero pivot, 1-based, per matrix; 0 if none)."""
    return _R.linalg_lu_factor_ex(*_G.linalg_lu_factor_ex(A, pivot=pivot,
                                                           check_errors=check_errors))


def lu(A, *, pivot=True):
    """P, L, U with A = P L U (L unit lower triangular)."""
    return _R.linalg_lu(*_G.linalg_lu(A, pivot=pivot))


def inv_ex(A, *, check_errors=False):
    """(inverse, info); info is lu_factor_ex's (0 for invertible matrices)."""
    return _R.linalg_inv_ex(*_G.linalg_inv_ex(A, check_errors=check_errors))


def solve_ex(A, B, *, left=True, check_errors=False):
    """(result, info) of solve; info is lu_factor_ex's."""
    return _R.linalg_solve_ex(*_G.linalg_solve_ex(A, B, left=left, check_errors=check_errors))


def cholesky_ex(A, *, upper=False, check_errors=False):
    """(L, info); info is the order of the first leading minor not positive-definite, else 0."""
    return _R.linalg_cholesky_ex(*_G.linalg_cholesky_ex(A, upper=upper,
                                                         check_errors=check_errors))


def ldl_factor(A, *, hermitian=False):
    """(LD, pivots): LAPACK sytrf's Bunch-Kaufman LDL^T factors of symmetric ``A`` (lower
    triangle); raises where D is singular. Not differentiable, as in torch. Needs SciPy."""
    return _R.linalg_ldl_factor(*_G.linalg_ldl_factor(A, hermitian=hermitian))


def ldl_factor_ex(A, *, hermitian=False, check_errors=False):
    """ldl_factor with LAPACK's ``info`` per matrix."""
    return _R.linalg_ldl_factor_ex(*_G.linalg_ldl_factor_ex(A, hermitian=hermitian,
                                                             check_errors=check_errors))


_NAMED = ("eig", "eigvals", "svdvals", "ldl_factor", "ldl_factor_ex", "slogdet", "qr", "svd", "eigh", "lstsq", "lu_factor", "lu_factor_ex", "lu", "inv_ex",
          "solve_ex", "cholesky_ex")
for _name in _NAMED:
    globals()[_name] = _public(globals()[_name], _name)
del _name


__all__ = sorted(list(_OPS) + list(_NAMED) + ["LinAlgError"])
