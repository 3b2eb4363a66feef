"""Decomposition and solver kernels on ndarrays against torch.linalg in float64 (batched):
det / slogdet / inv / solve (left and right) / solve_triangular / cholesky and cholesky_solve /
cross / qr in its three modes / svd (reconstruction, singular values) / eigh / eig (eigenvalues)
/ pinv / lu_factor_ex and lu_solve / cholesky_ex's info / ldl_factor_ex and ldl_solve; errors as
KernelError."""
import numpy as np
import pytest

from ember.kernels import linalg_decomp as L
from ember.kernels.errors import KernelError

torch = pytest.importorskip("torch")
rng = np.random.default_rng(79)
A = rng.standard_normal((2, 4, 4))
SPD = A @ A.transpose(0, 2, 1) + 4 * np.eye(4)
B = rng.standard_normal((2, 4, 3))
TA, TSPD, TB = torch.tensor(A), torch.tensor(SPD), torch.tensor(B)


def _close(ours, theirs, tol=1e-10):
    theirs = theirs.numpy() if isinstance(theirs, torch.Tensor) else np.asarray(theirs)
    ours = np.asarray(ours)
    assert ours.shape == theirs.shape, (ours.shape, theirs.shape)
    np.testing.assert_allclose(ours, theirs, rtol=tol, atol=tol)


def test_det_slogdet_inv_solve():
    _close(L.det(A), torch.linalg.det(TA))
    sign, lad = L.slogdet(A)
    ts, tl = torch.linalg.slogdet(TA)
    _close(sign, ts)
    _close(lad, tl)
    _close(L.inv(A), torch.linalg.inv(TA))
    _close(L.solve(A, B, True), torch.linalg.solve(TA, TB))
    Bt = B.transpose(0, 2, 1)
    _close(L.solve(A, Bt, False), torch.linalg.solve(TA, torch.tensor(Bt), left=False))


@pytest.mark.parametrize("upper, left, unit", [(True, True, False), (False, False, True)])
def test_solve_triangular(upper, left, unit):
    tri = np.triu(A) if upper else np.tril(A)
    b = B if left else B.transpose(0, 2, 1)
    _close(L.solve_triangular(tri, b, upper, left, unit),
           torch.linalg.solve_triangular(torch.tensor(tri), torch.tensor(b), upper=upper,
                                         left=left, unitriangular=unit))


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_and_cholesky_solve(upper):
    c = L.cholesky(SPD, upper)
    _close(c, torch.linalg.cholesky(TSPD, upper=upper))
    _close(L.cholesky_solve(B, c, upper), torch.cholesky_solve(TB, torch.tensor(c), upper))
    factor, info = L.cholesky_ex(SPD, upper, False)
    _close(factor, c)
    assert (np.asarray(info) == 0).all()
    bad = SPD.copy()
    bad[1, 2, 2] = -50.0
    _, info = L.cholesky_ex(bad, upper, False)
    _, tinfo = torch.linalg.cholesky_ex(torch.tensor(bad), upper=upper)
    np.testing.assert_array_equal(info, tinfo.numpy())


def test_cross():
    a, b = rng.standard_normal((5, 3)), rng.standard_normal((5, 3))
    _close(L.cross(a, b, -1), torch.linalg.cross(torch.tensor(a), torch.tensor(b)))


@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr_modes(mode):
    m = rng.standard_normal((2, 5, 3))
    q, r = L.qr(m, mode)
    tq, tr = torch.linalg.qr(torch.tensor(m), mode=mode)
    _close(r, tr)
    if mode != "r":
        _close(q, tq)
    with pytest.raises(KernelError, match="unrecognized mode 'full'"):
        L.qr(m, "full")


@pytest.mark.parametrize("full", [False, True])
def test_svd_reconstructs_and_matches_singular_values(full):
    m = rng.standard_normal((2, 5, 3))
    u, s, vh = L.svd(m, full)
    tu, ts, tvh = torch.linalg.svd(torch.tensor(m), full_matrices=full)
    assert u.shape == tuple(tu.shape) and vh.shape == tuple(tvh.shape)
    _close(s, ts)
    k = s.shape[-1]
    _close(u[..., :k] * s[..., None, :] @ vh[..., :k, :], m)


def test_eigh_and_eig():
    w, v = L.eigh(SPD, "L")
    tw, _ = torch.linalg.eigh(TSPD)
    _close(w, tw)
    _close(v @ (w[..., None] * v.transpose(0, 2, 1)), SPD)      # V diag(w) V^T
    ew, ev = L.eig(A)
    tew = torch.linalg.eigvals(TA).numpy()
    np.testing.assert_allclose(np.sort_complex(ew.reshape(-1)), np.sort_complex(tew.reshape(-1)),
                               rtol=1e-10, atol=1e-10)
    _close(A.astype(complex) @ ev, ev * ew[..., None, :])


def test_pinv():
    m = rng.standard_normal((2, 5, 3))
    _close(L.pinv(m, None, None, False), torch.linalg.pinv(torch.tensor(m)))
    _close(L.pinv(SPD, None, None, True), torch.linalg.pinv(TSPD, hermitian=True))


def test_lu_factor_and_solve():
    lu, piv, info = L.lu_factor_ex(A, True, False)
    tlu, tpiv, tinfo = torch.linalg.lu_factor_ex(TA)
    _close(lu, tlu)
    np.testing.assert_array_equal(piv, tpiv.numpy())
    np.testing.assert_array_equal(info, tinfo.numpy())
    _close(L.lu_solve_unchecked(lu, piv, B), torch.linalg.lu_solve(tlu, tpiv, TB))
    P, lower, upper = torch.lu_unpack(tlu, tpiv)          # A = P L U
    np.testing.assert_array_equal(L.lu_pivots_to_permutation(piv, 4), P.numpy())


def test_ldl_factor_and_solve():
    ld, piv, info = L.ldl_factor_ex(SPD, False, False)
    assert (np.asarray(info) == 0).all()
    _close(L.ldl_solve(ld, piv, B, False), torch.linalg.solve(TSPD, TB), tol=1e-9)


@pytest.mark.parametrize("call", [lambda: L.det(np.zeros((2, 3))), lambda: L.inv(np.zeros(3)),
                                  lambda: L.qr(np.zeros(3), "reduced")])
def test_shape_errors(call):
    with pytest.raises(KernelError):
        call()
