"""ember.linalg beyond the spec tests: gradchecks through a symmetrising wrapper for the ops that
read one triangle (torch's convention), named tuples, broadcasting, singular and rank-deficient
inputs, empty batches, errors naming the op."""
import warnings

import numpy as np
import pytest

import ember
from ember.autograd.gradcheck import gradcheck, gradgradcheck
from ember.errors import EmberError

L = ember.linalg


def _t(a, grad=False):
    return ember.from_numpy(np.array(a, dtype=np.float64)).requires_grad_(grad)


def _spd(rng, *shape):
    x = rng.standard_normal(shape)
    return x @ np.swapaxes(x, -1, -2) / shape[-1] + np.eye(shape[-1])


def _sym(a):
    return (a + ember.transpose(a, -2, -1)) * 0.5


SYMMETRIC = {
    "cholesky": lambda a: L.cholesky(_sym(a)),
    "cholesky_upper": lambda a: L.cholesky(_sym(a), upper=True),
    "eigh": lambda a: tuple(L.eigh(_sym(a))),
    "eigh_U": lambda a: tuple(L.eigh(_sym(a), UPLO="U")),
    "eigvalsh": lambda a: L.eigvalsh(_sym(a)),
    "pinv_hermitian": lambda a: L.pinv(_sym(a), hermitian=True),
    "cholesky_solve": lambda a: ember.cholesky_solve(_t(np.arange(6.0).reshape(3, 2)),
                                                     L.cholesky(_sym(a))),
}


@pytest.mark.parametrize("name", sorted(SYMMETRIC))
def test_symmetric_input_ops_gradcheck(name):
    a = _t(_spd(np.random.default_rng(0), 2, 3, 3)[0 if name == "cholesky_solve" else slice(None)],
           True)
    assert gradcheck(SYMMETRIC[name], [a], eps=1e-6, atol=1e-6, rtol=1e-4)
    assert gradgradcheck(SYMMETRIC[name], [a], eps=1e-6, atol=1e-5, rtol=1e-3)


def _both(fn_e, fn_t, *arrays):
    torch = pytest.importorskip("torch")
    e = [_t(a, True) for a in arrays]
    t = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    oe, ot = fn_e(*e), fn_t(*t)
    np.testing.assert_allclose(oe._data, ot.detach().numpy(), rtol=1e-10, atol=1e-10)
    seed = np.random.default_rng(5).standard_normal(ot.shape)
    ge = ember.autograd.grad([oe], e, [ember.from_numpy(seed)])
    gt = torch.autograd.grad([ot], t, [torch.from_numpy(seed)], allow_unused=True)
    for x, y, a in zip(ge, gt, arrays):
        y = np.zeros_like(a) if y is None else y.numpy()
        np.testing.assert_allclose(x._data, y, rtol=1e-8, atol=1e-10)


def _cofactors(a):
    """The cofactor matrix of each float64 matrix in ``a``, exact (rational arithmetic on the
    floats' values) then rounded: the gradient of det wherever A is, singular or not."""
    from fractions import Fraction

    def det(m):
        if len(m) == 1:
            return m[0][0]
        return sum((-1) ** j * m[0][j] * det([r[:j] + r[j + 1:] for r in m[1:]])
                   for j in range(len(m)))

    def one(m):
        m = [[Fraction(float(v)) for v in r] for r in m]
        n = len(m)
        return [[float((-1) ** (i + j) * det([r[:j] + r[j + 1:] for k, r in enumerate(m) if k != i]))
                 if n > 1 else 1.0 for j in range(n)] for i in range(n)]
    flat = a.reshape((-1,) + a.shape[-2:])
    return np.array([one(m) for m in flat]).reshape(a.shape)


_RANK3 = np.array([[2.0, -1, 0, 3], [1, 1, 1, 1], [3, 0, 1, 4], [0, 5, -2, 1]])  # row 3 = 1 + 2
SINGULAR = {  # (matrix, rank deficiency): exact zeros make LU's pivot exactly 0, scaled by 0.1 or
    # 1/3 the same matrices are singular only up to rounding, and LU leaves a tiny nonzero pivot
    "ones3": np.ones((3, 3)), "rank2": np.array([[1.0, 2, 3], [2, 4, 6], [0, 1, 5]]),
    "rank2_tenth": 0.1 * np.array([[1.0, 2, 3], [2, 4, 6], [0, 1, 5]]),
    "rank2_third": np.array([[1.0, 2, 3], [2, 4, 6], [0, 1, 5]]) / 3,
    "zeros2": np.zeros((2, 2)), "batch": np.stack([np.ones((3, 3)), 2 * np.eye(3)]),
    "rank3_of_4": _RANK3, "rank3_of_4_tenth": 0.1 * _RANK3,
    "rank2_of_4": np.outer([1.0, 2, 0, 1], [1.0, 0, 2, 1]) + np.outer([0, 1.0, 1, 3], [2, 1, 0, 1]),
}


@pytest.mark.parametrize("name", sorted(SINGULAR))
def test_det_gradient_of_singular_matrices_is_the_cofactor_matrix(name):
    """At a singular A the gradient of det is still the cofactor matrix (nonzero at rank n-1,
    zero at rank <= n-2): checked against exact cofactors and central differences (det is
    affine in each entry), not against torch, whose answer here depends on how LAPACK rounds
    the singular pivot (torch 2.13 gives zeros for the rank-2 3x3 on some hosts)."""
    a = SINGULAR[name]
    seed = np.random.default_rng(5).standard_normal(a.shape[:-2])
    x = _t(a, True)
    (g,) = ember.autograd.grad([L.det(x)], [x], [ember.from_numpy(seed)])
    cof = _cofactors(a)
    scale = max(1.0, np.abs(cof).max())
    np.testing.assert_allclose(g._data, seed[..., None, None] * cof, rtol=0, atol=1e-12 * scale)
    fd = np.empty_like(a)
    h = 1e-3
    for idx in np.ndindex(a.shape):
        e = np.zeros_like(a)
        e[idx] = h
        fd[idx] = ((seed * (np.linalg.det(a + e) - np.linalg.det(a - e))).sum() / (2 * h))
    np.testing.assert_allclose(g._data, fd, rtol=0, atol=1e-9 * scale)


@pytest.mark.parametrize("name", sorted(SINGULAR))
def test_both_det_gradient_paths_give_the_cofactors_at_singular_matrices(name):
    """Whichever path the rounding of LU's last pivot selects (an exact zero: the SVD; a tiny
    nonzero: det(A) A^-T), the gradient is the cofactor matrix."""
    from ember.autograd import formulas
    a = SINGULAR[name]
    x, one = _t(a), ember.ones(a.shape[:-2], dtype=ember.float64)
    cof = _cofactors(a)
    atol = 1e-12 * max(1.0, np.abs(cof).max())
    np.testing.assert_allclose(formulas._det_grad_svd(one, x)._data, cof, rtol=0, atol=atol)
    d = L.det(x)
    if np.all(d._data):  # LU left nonzero pivots: the det(A) A^-T path must hold as well
        np.testing.assert_allclose(formulas._det_grad_inv(one, x, d)._data, cof, rtol=0, atol=atol)


def test_det_gradient_where_the_inverse_overflows_is_the_cofactor_matrix():
    """det(A) = 1e-10 is finite but A^-1 overflows (a pivot below 1/DBL_MAX): det(A) A^-T would be
    0 * inf = NaN; the gradient is still the cofactor matrix diag(1e-310, 1e300)."""
    x = _t(np.diag([1e300, 1e-310]), True)
    (g,) = ember.autograd.grad([L.det(x)], [x])
    np.testing.assert_allclose(g._data, np.diag([1e-310, 1e300]), rtol=1e-12, atol=1e-300)


def test_pinv_rank_deficient_gradient_matches_torch():
    a = np.outer([1.0, 2.0, -1.0], [0.5, 1.0, 3.0, 1.0])
    _both(L.pinv, lambda x: __import__("torch").linalg.pinv(x), a)
    _both(L.pinv, lambda x: __import__("torch").linalg.pinv(x), a.T)


@pytest.mark.parametrize("sa,sb", [((2, 1, 3, 3), (4, 3, 2)), ((3, 3), (3,)), ((2, 3, 3), (2, 3)), ((2, 3, 3), (3,)),
                                   ((3, 3), (5, 3, 1))])
def test_solve_broadcasts_batches_and_vectors_like_torch(sa, sb):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    a = rng.standard_normal(sa) + 3 * np.eye(sa[-1])
    b = rng.standard_normal(sb)
    _both(L.solve, torch.linalg.solve, a, b)


def test_named_tuples_and_methods_match_torch():
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(2).standard_normal((4, 3))
    s = _spd(np.random.default_rng(3), 3, 3)
    e, t = _t(a), torch.from_numpy(a)
    pairs = [(L.qr(e), torch.linalg.qr(t)), (L.svd(e, False), torch.linalg.svd(t, False)),
             (L.eigh(_t(s)), torch.linalg.eigh(torch.from_numpy(s))),
             (L.slogdet(_t(s)), torch.linalg.slogdet(torch.from_numpy(s))),
             (L.lstsq(e, _t(a[:, :2]), driver="gelsd"), torch.linalg.lstsq(t, t[:, :2],
                                                                            driver="gelsd")),
             (ember.slogdet(_t(s)), torch.slogdet(torch.from_numpy(s))),
             (e.qr(), t.qr()), (ember.svd(e), torch.svd(t)), (_t(s).slogdet(), torch.from_numpy(s).slogdet())]
    for got, exp in pairs:
        assert type(got).__name__ == type(exp).__name__
        assert got._fields == tuple(exp._fields if hasattr(exp, "_fields") else exp.n_fields * [""]) \
            or len(got) == len(exp)
        for field in got._fields:
            g, x = getattr(got, field), getattr(exp, field)
            if field in ("U", "V", "Vh", "eigenvectors"):   # compare up to column signs
                g = np.abs(g._data)
                x = np.abs(x.numpy())
            else:
                g = g._data
                x = x.numpy()
            np.testing.assert_allclose(g, x, rtol=1e-8, atol=1e-10, err_msg=field)


def test_vector_norm_dtype_and_matrix_rank_like_torch():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(4).standard_normal((3, 4)).astype(np.float32)
    out = L.vector_norm(ember.from_numpy(x), 3, dim=1, dtype=ember.float64)
    exp = torch.linalg.vector_norm(torch.from_numpy(x), 3, dim=1, dtype=torch.float64)
    assert out.dtype == ember.float64
    np.testing.assert_allclose(out._data, exp.numpy(), rtol=1e-12)
    r = np.stack([np.outer([1.0, 2, 3], [1.0, 0, 1]), np.eye(3), np.zeros((3, 3))])
    got = L.matrix_rank(_t(r))
    assert got.dtype == ember.int64
    np.testing.assert_array_equal(got._data, torch.linalg.matrix_rank(torch.from_numpy(r)).numpy())
    np.testing.assert_array_equal(L.matrix_rank(_t(r), hermitian=True)._data[1:], [3, 0])


def test_empty_and_0x0_matrices_like_torch():
    torch = pytest.importorskip("torch")
    for shape in [(0, 0), (0, 3, 3), (2, 0, 0)]:
        z = np.zeros(shape)
        for e_fn, t_fn in [(L.det, torch.linalg.det), (L.inv, torch.linalg.inv),
                           (L.matrix_norm, torch.linalg.matrix_norm)]:
            got, exp = e_fn(_t(z)), t_fn(torch.from_numpy(z))
            assert tuple(got.shape) == tuple(exp.shape), (e_fn, shape)
            np.testing.assert_allclose(got._data, exp.numpy())


def test_top_level_cross_default_dim_is_first_of_size_3():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((3, 4, 3)), rng.standard_normal((3, 4, 3))
    with warnings.catch_warnings():  # torch warns about the default dim once per process
        warnings.simplefilter("ignore")
        exp = torch.cross(torch.from_numpy(a), torch.from_numpy(b))
    np.testing.assert_allclose(ember.cross(_t(a), _t(b))._data, exp.numpy(), rtol=1e-12)
    np.testing.assert_allclose(_t(a).cross(_t(b), dim=2)._data,
                               torch.linalg.cross(torch.from_numpy(a), torch.from_numpy(b)).numpy(),
                               rtol=1e-12)


@pytest.mark.parametrize("call,op,words", [
    (lambda: L.det(_t(np.ones((2, 3)))), "det", "square"),
    (lambda: L.inv(_t(np.ones((3,)))), "inv", "square"),
    (lambda: L.inv(_t(np.ones((2, 2)))), "inv", "singular"),
    (lambda: L.solve(_t(np.zeros((2, 2))), _t(np.ones(2))), "solve", "singular"),
    (lambda: L.solve(_t(np.eye(3)), _t(np.ones((2, 2)))), "solve", "incompatible"),
    (lambda: L.cholesky(_t(-np.eye(2))), "cholesky", "positive-definite"),
    (lambda: L.eigh(_t(np.ones((2, 3)))), "eigh", "square"),
    (lambda: L.det(ember.ones(2, 2, dtype=ember.int64)), "det", "floating point"),
    (lambda: L.qr(_t(np.eye(2)), mode="thin"), "qr", "mode"),
    (lambda: L.multi_dot([_t(np.eye(2))]), "multi_dot", "at least 2"),
    (lambda: L.matrix_norm(_t(np.eye(2)), ord=3), "matrix_norm", "not supported"),
    (lambda: L.norm(_t(np.ones((2, 2, 2))), ord=2), "norm", "1D or 2D"),
    (lambda: L.cross(_t(np.ones((2, 3))), _t(np.ones(3))), "cross", "same number of dimensions"),
    (lambda: L.lstsq(_t(np.eye(2)), _t(np.ones((2, 1))), driver="x"), "lstsq", "driver"),
])
def test_errors_name_the_op(call, op, words):
    with pytest.raises(EmberError) as info:
        call()
    msg = str(info.value)
    assert op in msg and words in msg, msg


def test_qr_backward_errors_like_torch():
    a = _t(np.random.default_rng(7).standard_normal((4, 3)), True)
    with pytest.raises(EmberError, match="mode='r'"):
        L.qr(a, mode="r").R.sum().backward()
    with pytest.raises(EmberError, match="complete"):
        L.qr(a, mode="complete").Q.sum().backward()


@pytest.mark.parametrize("ord", [0, 0.5, 3.5, -0.5, 1, 2, float("inf")])
@pytest.mark.parametrize("x", [np.zeros(5), np.array([0.0, 1.0, -2.0])])
def test_vector_norm_subgradients_at_zero_like_torch(ord, x):
    torch = pytest.importorskip("torch")
    out = L.vector_norm(_t(x, True), ord)
    assert out.grad_fn is not None    # torch differentiates ord=0 too (a zero gradient)
    _both(lambda a: L.vector_norm(a, ord), lambda a: torch.linalg.vector_norm(a, ord), x)


@pytest.mark.parametrize("ord", ["nuc", 2, -2, "fro"])
def test_matrix_norm_of_zero_matrix_has_torch_subgradient(ord):
    torch = pytest.importorskip("torch")
    _both(lambda a: L.matrix_norm(a, ord), lambda a: torch.linalg.matrix_norm(a, ord),
          np.zeros((4, 4)))


def test_tolerance_tensors_hold_one_value_per_matrix():
    torch = pytest.importorskip("torch")
    a = np.stack([np.diag([1.0, 0.5, 0.01]), np.diag([2.0, 1.0, 0.3])])
    rtol = np.array([0.1, 0.2])
    got = L.matrix_rank(_t(a), rtol=_t(rtol))
    exp = torch.linalg.matrix_rank(torch.from_numpy(a), rtol=torch.from_numpy(rtol))
    np.testing.assert_array_equal(got._data, exp.numpy())
    np.testing.assert_allclose(L.pinv(_t(a), rtol=_t(rtol))._data,
                               torch.linalg.pinv(torch.from_numpy(a),
                                                 rtol=torch.from_numpy(rtol)).numpy(), rtol=1e-12)


@pytest.mark.parametrize("p", ["fro", "nuc", float("inf"), -float("inf"), 1, -1])
def test_cond_with_matrix_norms_like_torch(p):
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(8).standard_normal((2, 3, 3)) + 3 * np.eye(3)
    np.testing.assert_allclose(L.cond(_t(a), p)._data,
                               torch.linalg.cond(torch.from_numpy(a), p).numpy(), rtol=1e-10)
    # torch's own backward fails here (an in-place write in its graph); ember's is gradchecked
    assert gradcheck(lambda x: L.cond(x, p), [_t(a, True)], eps=1e-6, atol=1e-6, rtol=1e-4)


def test_lu_family_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(9)
    a, b = rng.standard_normal((2, 4, 4)), rng.standard_normal((2, 4, 3))
    e, t = _t(a), torch.from_numpy(a)
    got, exp = L.lu_factor_ex(e), torch.linalg.lu_factor_ex(t)
    assert type(got).__name__ == "linalg_lu_factor_ex" and got._fields == ("LU", "pivots", "info")
    np.testing.assert_allclose(got.LU._data, exp.LU.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(got.pivots._data, exp.pivots.numpy())
    assert got.pivots.dtype == ember.int32 and got.info.dtype == ember.int32
    for g, x in zip(L.lu(e), torch.linalg.lu(t)):
        np.testing.assert_allclose(g._data, x.numpy(), rtol=1e-12, atol=1e-12)
    for g, x in zip(ember.lu_unpack(got.LU, got.pivots), torch.lu_unpack(exp.LU, exp.pivots)):
        np.testing.assert_allclose(g._data, x.numpy(), rtol=1e-12, atol=1e-12)
    LU, piv = e.lu()
    np.testing.assert_allclose(_t(b).lu_solve(LU, piv)._data,
                               torch.from_numpy(b).lu_solve(exp.LU, exp.pivots).numpy(), rtol=1e-10)
    _, _, info = ember.lu(_t([[1.0, 2.0], [2.0, 4.0]]), get_infos=True)
    assert int(info._data) == 2


def test_lu_factor_of_singular_matrix_raises_naming_the_op():
    with pytest.raises(EmberError, match="lu_factor.*U\\[2,2\\] is zero"):
        L.lu_factor(_t([[1.0, 2.0], [2.0, 4.0]]))
    with pytest.raises(EmberError, match="pivoting"):
        L.lu_factor(_t(np.eye(2)), pivot=False)


def test_ex_variants_report_info_like_torch():
    torch = pytest.importorskip("torch")
    sing = np.stack([np.eye(2), [[1.0, 2.0], [2.0, 4.0]]])
    for got, exp in [(L.inv_ex(_t(sing)), torch.linalg.inv_ex(torch.from_numpy(sing))),
                     (L.solve_ex(_t(sing), _t(np.ones((2, 2)))),
                      torch.linalg.solve_ex(torch.from_numpy(sing), torch.ones(2, 2,
                                                                             dtype=torch.float64)))]:
        assert type(got).__name__ == type(exp).__name__
        np.testing.assert_array_equal(got.info._data, exp.info.numpy())
        np.testing.assert_allclose(got[0]._data[0], exp[0].numpy()[0])
        assert not np.all(np.isfinite(got[0]._data[1]))
    notpd = np.stack([np.eye(3), [[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]]])
    got, exp = L.cholesky_ex(_t(notpd)), torch.linalg.cholesky_ex(torch.from_numpy(notpd))
    np.testing.assert_array_equal(got.info._data, exp.info.numpy())
    np.testing.assert_allclose(got.L._data[0], exp.L.numpy()[0])
    with pytest.raises(EmberError, match="inv_ex.*Batch element 1"):
        L.inv_ex(_t(sing), check_errors=True)
    with pytest.raises(EmberError, match="cholesky_ex.*Batch element 1"):
        L.cholesky_ex(_t(notpd), check_errors=True)


def test_lu_and_ex_variants_on_empty_batches_like_torch():
    torch = pytest.importorskip("torch")
    for shape in [(0, 0), (2, 0, 0), (0, 3, 3)]:
        z = np.zeros(shape)
        for e_fn, t_fn in [(L.inv_ex, torch.linalg.inv_ex), (L.cholesky_ex, torch.linalg.cholesky_ex),
                           (L.lu_factor_ex, torch.linalg.lu_factor_ex)]:
            for g, x in zip(e_fn(_t(z)), t_fn(torch.from_numpy(z))):
                assert tuple(g.shape) == tuple(x.shape), (e_fn, shape)


def test_products_beta_zero_ignore_nan_and_integer_scalars_truncate_like_torch():
    torch = pytest.importorskip("torch")
    m, v = np.arange(6.0).reshape(2, 3), np.ones(3)
    got = ember.addmv(_t([np.nan, np.inf]), _t(m), _t(v), beta=0)
    np.testing.assert_array_equal(got._data, [3.0, 12.0])
    s, mi, vi = np.arange(2), np.ones((2, 3), np.int64), np.arange(3)
    got = ember.addmv(ember.from_numpy(s), ember.from_numpy(mi), ember.from_numpy(vi), beta=0.2,
                      alpha=2.6)
    exp = torch.addmv(torch.from_numpy(s), torch.from_numpy(mi), torch.from_numpy(vi), beta=0.2,
                      alpha=2.6)
    assert got.dtype == ember.int64
    np.testing.assert_array_equal(got._data, exp.numpy())
    b = np.array([True, False])
    got = ember.addr(ember.from_numpy(b), ember.from_numpy(b), ember.from_numpy(b), beta=0)
    exp = torch.addr(torch.from_numpy(b), torch.from_numpy(b), torch.from_numpy(b), beta=0)
    np.testing.assert_array_equal(got._data, exp.numpy())


def test_tensordot_broadcasts_size_one_contracted_dims_and_matrix_exp_scales():
    torch = pytest.importorskip("torch")
    a, b = np.ones((1, 1, 1)), np.arange(4.0).reshape(2, 1, 2)
    np.testing.assert_allclose(ember.tensordot(_t(a), _t(b), dims=((0, 1), (2, 0)))._data,
                               torch.tensordot(torch.from_numpy(a), torch.from_numpy(b),
                                               dims=((0, 1), (2, 0))).numpy())
    big = 20 * np.random.default_rng(10).standard_normal((2, 3, 3))
    _both(L.matrix_exp, lambda x: __import__("torch").linalg.matrix_exp(x), big / 10)
    np.testing.assert_allclose(L.matrix_exp(_t(big))._data,
                               torch.linalg.matrix_exp(torch.from_numpy(big)).numpy(), rtol=1e-9)


def test_geqrf_householder_product_and_ormqr_rebuild_qr_like_torch():
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(11).standard_normal((2, 5, 3))
    got, exp = ember.geqrf(_t(a)), torch.geqrf(torch.from_numpy(a))
    assert type(got).__name__ == "geqrf" and got._fields == ("a", "tau")
    np.testing.assert_allclose(got.a._data, exp.a.numpy(), rtol=1e-10, atol=1e-12)
    Q = L.householder_product(got.a, got.tau)
    np.testing.assert_allclose(Q._data, torch.linalg.qr(torch.from_numpy(a)).Q.numpy(),
                               rtol=1e-10, atol=1e-12)
    c = np.random.default_rng(12).standard_normal((2, 5, 2))
    np.testing.assert_allclose(ember.ormqr(got.a, got.tau, _t(c), True, True)._data,
                               torch.ormqr(exp.a, exp.tau, torch.from_numpy(c), True, True).numpy(),
                               rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("call", [
    lambda: L.inv(_t(np.ones((2, 2)))), lambda: L.solve(_t(np.zeros((2, 2))), _t(np.ones(2))),
    lambda: L.cholesky(_t(-np.eye(2))), lambda: L.lu_factor(_t(np.zeros((2, 2)))),
    lambda: L.inv_ex(_t(np.zeros((2, 2))), check_errors=True),
    lambda: L.cholesky_ex(_t(-np.eye(2)), check_errors=True),
    lambda: ember.cholesky_solve(_t(np.ones((2, 1))), _t(np.zeros((2, 2)))),
])
def test_singular_and_indefinite_matrices_raise_linalg_error(call):
    with pytest.raises(L.LinAlgError) as info:
        call()
    assert isinstance(info.value, RuntimeError)


def test_tensorsolve_moves_dims_and_vander_takes_a_point_like_torch():
    torch = pytest.importorskip("torch")
    a = (np.random.default_rng(13).standard_normal((6, 6)) + 3 * np.eye(6)).reshape(2, 3, 6)
    b = np.arange(6.0).reshape(2, 3)
    got = L.tensorsolve(_t(a), _t(b), dims=(0, 2))
    exp = torch.linalg.tensorsolve(torch.from_numpy(a), torch.from_numpy(b), dims=(0, 2))
    np.testing.assert_allclose(got._data, exp.numpy(), rtol=1e-10)
    np.testing.assert_array_equal(L.vander(_t(2.0), N=3)._data,
                                  torch.linalg.vander(torch.tensor(2.0), N=3).numpy())


def test_ldl_factor_and_solve_with_2x2_pivots_like_torch():
    torch = pytest.importorskip("torch")
    pytest.importorskip("scipy")
    a = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 3.0], [2.0, 3.0, 1.0]])
    got, exp = L.ldl_factor(_t(a)), torch.linalg.ldl_factor(torch.from_numpy(a))
    assert type(got).__name__ == "linalg_ldl_factor"
    np.testing.assert_allclose(got.LD._data, exp.LD.numpy(), rtol=1e-12)
    np.testing.assert_array_equal(got.pivots._data, exp.pivots.numpy())
    b = np.arange(6.0).reshape(3, 2)
    np.testing.assert_allclose(L.ldl_solve(got.LD, got.pivots, _t(b))._data, np.linalg.solve(a, b),
                               rtol=1e-10)
    with pytest.raises(L.LinAlgError, match="ldl_factor"):
        L.ldl_factor(_t(np.zeros((2, 2))))


def test_inplace_products_write_self_and_keep_gradients_like_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(14)
    s, m, v = rng.standard_normal(3), rng.standard_normal((3, 4)), rng.standard_normal(4)
    e = [_t(x, True) for x in (s, m, v)]
    t = [torch.tensor(x, requires_grad=True) for x in (s, m, v)]
    oe = e[0] * 1
    oe.addmv_(e[1], e[2], beta=0.5, alpha=2.0)
    ot = t[0] * 1
    ot.addmv_(t[1], t[2], beta=0.5, alpha=2.0)
    np.testing.assert_allclose(oe._data, ot.detach().numpy(), rtol=1e-12)
    oe.sum().backward()
    ot.sum().backward()
    for x, y in zip(e, t):
        np.testing.assert_allclose(x.grad._data, y.grad.numpy(), rtol=1e-12)
    c = _t(np.zeros((3, 4)))
    assert c.addr_(_t(np.ones(3)), _t(np.ones(4))) is c and float(c._data.sum()) == 12.0


def test_svd_driver_is_cuda_only_as_in_torch():
    a = _t(np.eye(2))
    assert L.svd(a, driver=None).S.shape == (2,)
    assert L.svdvals(a, driver=None).shape == (2,)
    with pytest.raises(EmberError, match="svd.*driver"):
        L.svd(a, driver="gesvd")


def test_vecdot_conjugates_x_and_checks_dtypes_like_torch():
    """linalg.vecdot is sum(conj(x) * y) (it multiplied without conjugating); integer inputs and
    mixed dtypes raise as in torch (found by tests/differential)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))
    y = rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))
    ex, ey = (ember.from_numpy(a.copy()).requires_grad_(True) for a in (x, y))
    tx, ty = (torch.from_numpy(a.copy()).requires_grad_(True) for a in (x, y))
    out, want = L.vecdot(ex, ey), torch.linalg.vecdot(tx, ty)
    np.testing.assert_allclose(out._data, want.detach().numpy(), rtol=1e-12)
    grads = ember.autograd.grad(out.abs().sum(), [ex, ey])
    tgrads = torch.autograd.grad(want.abs().sum(), [tx, ty])
    for g, tg in zip(grads, tgrads):
        np.testing.assert_allclose(g._data, tg.resolve_conj().numpy(), rtol=1e-10)
    assert gradcheck(lambda a, b: L.vecdot(a, b, dim=0), [_t(x.real, True), _t(y.real, True)])
    with pytest.raises(RuntimeError, match="linalg.vecdot: expected a floating point"):
        L.vecdot(ember.ones(3, dtype=ember.int64), ember.ones(3, dtype=ember.int64))
    with pytest.raises(RuntimeError, match="same dtype"):
        L.vecdot(ember.ones(3), ember.ones(3, dtype=ember.float64))


def test_svd_family_gives_nan_for_non_finite_matrices_instead_of_hanging():
    """OpenBLAS's gesdd never returns on a 3x4 matrix holding one inf: svd, svdvals, pinv,
    matrix_rank, the nuclear norm and lstsq hung; they give what torch gives there (NaN, rank 0;
    found by tests/differential). Run in a subprocess so that a regression fails instead of
    hanging the suite."""
    import json
    import subprocess
    import sys
    torch = pytest.importorskip("torch")
    code = (
        "import json, numpy as np, ember\n"
        "a = np.random.default_rng(0).standard_normal((3, 4)); a[0, 1] = np.inf\n"
        "A = ember.from_numpy(a)\n"
        "u, s, vh = ember.linalg.svd(A)\n"
        "out = [u.shape == (3, 3) and vh.shape == (4, 4), ember.linalg.svdvals(A).tolist(),\n"
        "       ember.linalg.pinv(A).shape == (4, 3) and bool(ember.linalg.pinv(A).isnan().all()),\n"
        "       int(ember.linalg.matrix_rank(A)), float(ember.linalg.matrix_norm(A, 'nuc')),\n"
        "       int(ember.linalg.lstsq(ember.from_numpy(a.T.copy()), ember.ones(4, 2,\n"
        "           dtype=ember.float64)).rank)]\n"
        "print(json.dumps(out))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    shapes, svals, pinv_nan, rank, nuc, lstsq_rank = json.loads(done.stdout)
    a = np.random.default_rng(0).standard_normal((3, 4))
    a[0, 1] = np.inf
    ta = torch.from_numpy(a)
    assert shapes and pinv_nan and np.isnan(svals).all() and np.isnan(nuc)
    assert np.isnan(torch.linalg.svdvals(ta).numpy()).all()
    assert rank == int(torch.linalg.matrix_rank(ta)) == 0
    assert lstsq_rank == 0  # torch's gelsy reports what LAPACK left there (1 here)


def test_svd_lowrank_reconstructs_low_rank():
    torch = pytest.importorskip("torch")
    ember.manual_seed(0)
    for m, n in ((6, 4), (3, 7)):
        A = ember.randn(m, 2, dtype=ember.float64) @ ember.randn(2, n, dtype=ember.float64)
        U, S, V = ember.svd_lowrank(A, q=2)
        assert U.shape == (m, 2) and S.shape == (2,) and V.shape == (n, 2)
        assert ember.allclose(U @ ember.diag(S) @ V.mT, A, atol=1e-10)
        np.testing.assert_allclose(S.numpy(), torch.linalg.svdvals(torch.from_numpy(A.numpy()))[:2].numpy())
        U, S, V = ember.pca_lowrank(A, q=2)
        C = A - A.mean(-2, keepdim=True)
        np.testing.assert_allclose(S.numpy(), torch.linalg.svdvals(torch.from_numpy(C.detach().numpy()))[:2].numpy(),
                                   rtol=1e-8)
    with pytest.raises(EmberError, match="q=5"):
        ember.svd_lowrank(ember.randn(3, 4), q=5)


def test_trace_of_a_matrix_only():
    assert ember.trace(_t(np.arange(6.0).reshape(2, 3))).item() == 4.0
    with pytest.raises(EmberError, match="trace: expected a matrix"):
        ember.trace(_t(np.ones(3)))


def test_lu_permutation_is_not_frozen_when_compiled():
    # P was built from the pivots' values in Python: ember.compile froze the first matrix's
    # permutation, and linalg.lu of another matrix returned a P with P L U != A, silently
    # (lu_unpack/lu_solve likewise); the read is reported to the tracer: a named graph break
    from ember.compiler.frontend import GraphBreakWarning
    g = np.random.default_rng(0)
    f = ember.compile(lambda a: ember.linalg.lu(a))
    s = ember.compile(lambda lu, piv, b: ember.linalg.lu_solve(lu, piv, b))
    with pytest.warns(GraphBreakWarning, match="lu_unpack: the permutation follows the pivots"):
        for _ in range(3):
            a = ember.tensor(g.standard_normal((4, 4)))
            b = ember.tensor(g.standard_normal((4, 2)))
            P, L, U = f(a)
            np.testing.assert_allclose((P @ L @ U).numpy(), a.numpy(), rtol=0, atol=1e-12)
            lu, piv = ember.linalg.lu_factor(a)
            np.testing.assert_allclose((a @ s(lu, piv, b)).numpy(), b.numpy(), rtol=0,
                                       atol=1e-10)


def test_matrix_exp_scaling_is_not_frozen_when_compiled():
    # the scaling-and-squaring power follows the matrix's 1-norm, read in Python: a compiled
    # matrix_exp kept the first matrix's (none for a small one) and exp of a matrix of norm
    # ~100 came out wrong (relative error 1.0), silently; now a named graph break
    from ember.compiler.frontend import GraphBreakWarning
    g = np.random.default_rng(0)
    f = ember.compile(lambda a: ember.linalg.matrix_exp(a))
    with pytest.warns(GraphBreakWarning, match="matrix_exp: the scaling follows"):
        for scale in (0.01, 30.0):
            a = ember.tensor(g.standard_normal((4, 4)) * scale)
            want = ember.linalg.matrix_exp(a).numpy()
            np.testing.assert_allclose(f(a).numpy(), want, rtol=1e-12, atol=0)


def _products_of_two_dtypes(m):
    f, d, i = m.float32, m.float64, m.int64
    o = m.ones
    return {
        "mm f32 f64": lambda: m.mm(o(2, 3), o(3, 2, dtype=d)),
        "mm i64 f32": lambda: m.mm(o(2, 3, dtype=i), o(3, 2)),
        "matmul 2d": lambda: m.matmul(o(2, 3, dtype=d), o(3, 2)),
        "@ 1d 1d": lambda: o(3) @ o(3, dtype=d),
        "@ 2d 1d": lambda: o(2, 3) @ o(3, dtype=d),
        "@ 1d 2d": lambda: o(2) @ o(2, 3, dtype=d),
        "@ 3d 3d": lambda: o(2, 2, 3) @ o(2, 3, 2, dtype=d),
        "@ 3d 2d": lambda: o(2, 2, 3) @ o(3, 2, dtype=d),
        "@ 3d 1d": lambda: o(2, 2, 3) @ o(3, dtype=d),
        "Tensor.mm": lambda: o(2, 3, dtype=d).mm(o(3, 2)),
        "bmm": lambda: m.bmm(o(2, 2, 3, dtype=d), o(2, 3, 2)),
        "addmm self": lambda: m.addmm(o(2, 2, dtype=d), o(2, 3), o(3, 2)),
        "addmm mat1": lambda: m.addmm(o(2, 2), o(2, 3, dtype=d), o(3, 2)),
        "addmm mat2": lambda: m.addmm(o(2, 2), o(2, 3), o(3, 2, dtype=d)),
        "baddbmm batch2": lambda: m.baddbmm(o(2, 2, 2), o(2, 2, 3), o(2, 3, 2, dtype=d)),
        "baddbmm input": lambda: m.baddbmm(o(2, 2, 2, dtype=d), o(2, 2, 3), o(2, 3, 2)),
        "addbmm self": lambda: m.addbmm(o(2, 2, dtype=d), o(2, 2, 3), o(2, 3, 2)),
        "addbmm batch1": lambda: m.addbmm(o(2, 2), o(2, 2, 3, dtype=d), o(2, 3, 2)),
        "mv": lambda: m.mv(o(2, 3), o(3, dtype=d)),
        "addmv vec": lambda: m.addmv(o(2), o(2, 3), o(3, dtype=d)),
        "addmv input": lambda: m.addmv(o(2, dtype=d), o(2, 3), o(3)),
        "dot": lambda: m.dot(o(3), o(3, dtype=d)),
        "dot int": lambda: m.dot(o(3), o(3, dtype=i)),
        "vdot": lambda: m.vdot(o(3, dtype=d), o(3)),
        "inner": lambda: m.inner(o(2, 3), o(2, 3, dtype=d)),
        "tensordot": lambda: m.tensordot(o(2, 3), o(3, 2, dtype=d), dims=1),
        "multi_dot": lambda: m.linalg.multi_dot([o(2, 2), o(2, 2), o(2, 2, dtype=d)]),
        "vecdot": lambda: m.linalg.vecdot(o(2), o(2, dtype=d)),
        "mm bf16 f32": lambda: m.mm(o(2, 3, dtype=m.bfloat16), o(3, 2, dtype=f)),
    }


@pytest.mark.parametrize("case", sorted(_products_of_two_dtypes(ember)))
def test_products_of_two_dtypes_raise_torchs_error(case):
    """torch's matrix and vector products never promote: float32 with float64 (or an integer
    tensor) raises RuntimeError with the product's own words, as ember now does."""
    torch = pytest.importorskip("torch")
    if case.endswith("bf16 f32"):
        pytest.importorskip("ml_dtypes")
    with pytest.raises(RuntimeError) as theirs:
        _products_of_two_dtypes(torch)[case]()
    with pytest.raises(RuntimeError) as ours:
        _products_of_two_dtypes(ember)[case]()
    assert str(theirs.value).splitlines()[0] in str(ours.value)


def test_products_of_one_dtype_and_a_zero_d_inner_still_compute_as_torch():
    """What torch does compute stays: inner with a 0-d operand promotes (a product by a
    scalar), integer matrices multiply in their dtype, outer and addr promote."""
    torch = pytest.importorskip("torch")
    pairs = [(lambda m: m.inner(m.ones(()), m.ones(2, 3, dtype=m.float64) * 2)),
             (lambda m: m.mm(m.ones(2, 3, dtype=m.int64), m.ones(3, 2, dtype=m.int64))),
             (lambda m: m.outer(m.ones(3), m.ones(2, dtype=m.float64)))]
    for fn in pairs:
        t, e = fn(torch), fn(ember)
        assert str(t.dtype).split(".")[1] == str(e.dtype).split(".")[1]
        np.testing.assert_array_equal(e.numpy(), t.numpy())


@pytest.mark.parametrize("shapes, mode", [
    (((30, 4), (20, 4)), None),                                 # past 25 rows: torch's mm path
    (((2, 1, 27, 3), (4, 5, 3)), None),                         # broadcast batches
    (((5, 3), (6, 3)), "use_mm_for_euclid_dist"),
    (((30, 3), (28, 3)), "donot_use_mm_for_euclid_dist")])
def test_cdist_matches_torch_on_its_matrix_product_path(shapes, mode):
    """cdist(p=2) past 25 rows (or asked to) is one matrix product, as torch's: values and
    gradients as torch's, float64 gradcheck, and gradient 0 at a distance of 0."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    a, b = (rng.standard_normal(s) for s in shapes)
    kw = {} if mode is None else {"compute_mode": mode}
    ea, eb = _t(a, True), _t(b, True)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    ye, yt = ember.cdist(ea, eb, **kw), torch.cdist(ta, tb, **kw)
    np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), rtol=1e-10, atol=1e-12)
    g = rng.standard_normal(tuple(yt.shape))
    ye.backward(ember.tensor(g))
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(ea.grad.numpy(), ta.grad.numpy(), rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(eb.grad.numpy(), tb.grad.numpy(), rtol=1e-9, atol=1e-10)
    assert gradcheck(lambda x, y: ember.cdist(x, y, **kw), (_t(a[..., :27, :], True),
                                                             _t(b[..., :3, :], True)))
    same = _t(np.ones((26, 2)), True)
    ember.cdist(same, _t(np.ones((3, 2)))).sum().backward()
    assert np.all(same.grad.numpy() == 0)
