"""LowRankMultivariateNormal (ember/distributions/lowrank_multivariate_normal.py) against
torch.distributions: values and gradients of the moments, the matrices (scale_tril,
covariance_matrix, precision_matrix through the capacitance matrix), log_prob and entropy at
float64 and float32; rsample through the same noise; sampling shapes, dtypes and moments;
batch broadcasting and expand; its KL divergences (with MultivariateNormal both ways); and the
validate_args errors."""
import numpy as np
import pytest

import ember
import ember.distributions as ED
from tests.distributions.family_cases import (CASES, INVALID_PARAMETERS, MOMENT_CASES,
                                              OUTSIDE_SUPPORT, build, cases,
                                              check_float32_matches_torch, check_matches_torch,
                                              check_invalid_parameters_raise_as_torch,
                                              check_log_prob_outside_support_raises_as_torch,
                                              check_sample_and_expand, check_sample_moments,
                                              torch)

FAMILIES = ("LowRankMultivariateNormal",)
TD = torch.distributions
LOWRANK_CASES = cases(list(CASES), FAMILIES)
PARAMS = ("loc", "cov_factor", "cov_diag")
TOL = {"float64": 1e-10, "float32": 1e-5}


@pytest.mark.parametrize("case", LOWRANK_CASES)
def test_matches_torch(case):
    check_matches_torch(case)


@pytest.mark.parametrize("case", LOWRANK_CASES)
def test_float32_matches_torch(case):
    check_float32_matches_torch(case)


@pytest.mark.parametrize("case", LOWRANK_CASES)
def test_sample_and_expand(case):
    check_sample_and_expand(case)


@pytest.mark.parametrize("case", cases(list(MOMENT_CASES), FAMILIES))
def test_sample_moments(case):
    check_sample_moments(case)


@pytest.mark.parametrize("ctor,kw", cases(INVALID_PARAMETERS, FAMILIES))
def test_invalid_parameters_raise_as_torch(ctor, kw):
    check_invalid_parameters_raise_as_torch(ctor, kw)


@pytest.mark.parametrize("case,bad", cases(OUTSIDE_SUPPORT, FAMILIES))
def test_log_prob_outside_support_raises_as_torch(case, bad):
    check_log_prob_outside_support_raises_as_torch(case, bad)


def _np(t):
    return t.detach().numpy()


def _weights(shape, seed):
    return np.random.default_rng(seed).uniform(0.5, 1.5, tuple(shape))


def _close(e, t, dtype, what):
    tol = TOL[dtype]
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], what
    np.testing.assert_allclose(_np(e), _np(t), rtol=tol, atol=tol * 1e-2, err_msg=what)


def _grads_close(pe, pt, dtype):
    tol = 1e-8 if dtype == "float64" else 1e-4
    for k in pe:
        np.testing.assert_allclose(pe[k].grad.numpy(), pt[k].grad.numpy(), rtol=tol,
                                   atol=tol * 1e-2, err_msg=k)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", LOWRANK_CASES)
def test_all_properties_and_their_gradients_match_torch(case, dtype):
    """mean, mode, variance, stddev, scale_tril, covariance_matrix, precision_matrix,
    log_prob and entropy (values at 1e-10 / 1e-5, dtypes, shapes) and the gradients of a
    weighted sum of all of them w.r.t. loc, cov_factor and cov_diag."""
    e, pe = build(case, "e", True, dtype)
    t, pt = build(case, "t", True, dtype)
    value = CASES[case][4].astype(dtype)
    loss_e, loss_t = 0.0, 0.0
    props = ("mean", "mode", "variance", "stddev", "scale_tril", "covariance_matrix",
             "precision_matrix")
    results = [(p, getattr(e, p), getattr(t, p)) for p in props]
    results += [("log_prob", e.log_prob(ember.tensor(value)), t.log_prob(torch.tensor(value))),
                ("entropy", e.entropy(), t.entropy())]
    for i, (what, ev, tv) in enumerate(results):
        assert tuple(ev.shape) == tuple(tv.shape), what
        _close(ev, tv, dtype, what)
        w = _weights(tv.shape, i).astype(dtype)
        loss_e = loss_e + (ev * ember.tensor(w)).sum()
        loss_t = loss_t + (tv * torch.tensor(w)).sum()
    loss_e.backward()
    loss_t.backward()
    _grads_close(pe, pt, dtype)


def test_matrices_are_consistent():
    """covariance = W W^T + diag(D) = scale_tril scale_tril^T, precision its inverse."""
    e, _ = build("LowRankMultivariateNormal", "e")
    cov, L, P = _np(e.covariance_matrix), _np(e.scale_tril), _np(e.precision_matrix)
    assert cov.shape == (2, 3, 4, 4)
    np.testing.assert_allclose(L @ np.swapaxes(L, -1, -2), cov, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.triu(L, 1), 0.0)
    np.testing.assert_allclose(cov @ P, np.broadcast_to(np.eye(4), cov.shape), atol=1e-12)
    mvn = ED.MultivariateNormal(e.loc, covariance_matrix=e.covariance_matrix)
    v = ember.tensor(CASES["LowRankMultivariateNormal"][4])
    np.testing.assert_allclose(_np(e.log_prob(v)), _np(mvn.log_prob(v)), rtol=1e-12)
    np.testing.assert_allclose(_np(e.entropy()), _np(mvn.entropy()), rtol=1e-12)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", LOWRANK_CASES)
def test_rsample_matches_torch_through_the_same_noise(case, dtype, monkeypatch):
    """torch's own rsample, fed (by monkeypatching its _standard_normal) the eps_W and eps_D
    ember drew, gives the same draws and the same gradients of sum(w * x^2)."""
    ember.manual_seed(0)
    e, pe = build(case, "e", True, dtype)
    x = e.rsample((5,))
    shape = (5,) + tuple(e.batch_shape) + tuple(e.event_shape)
    assert tuple(x.shape) == shape and x.requires_grad and x.dtype == getattr(ember, dtype)
    ember.manual_seed(0)  # the same two draws, eps_W first
    eps_W = ember.randn(*(shape[:-1] + (e.cov_factor.shape[-1],)), dtype=getattr(ember, dtype))
    eps_D = ember.randn(*shape, dtype=getattr(ember, dtype))
    noise = iter([torch.tensor(eps_W.numpy()), torch.tensor(eps_D.numpy())])
    import torch.distributions.lowrank_multivariate_normal as tlr
    monkeypatch.setattr(tlr, "_standard_normal", lambda shape, dtype, device: next(noise))
    t, pt = build(case, "t", True, dtype)
    tx = t.rsample((5,))
    _close(x, tx, dtype, "rsample")
    w = _weights(shape, 3).astype(dtype)
    (ember.tensor(w) * x * x).sum().backward()
    (torch.tensor(w) * tx * tx).sum().backward()
    _grads_close(pe, pt, dtype)


def test_sample_shapes_and_dtypes():
    ember.manual_seed(1)
    for dtype in (ember.float32, ember.float64):
        d = ED.LowRankMultivariateNormal(ember.zeros(2, 3, 4, dtype=dtype),
                                         ember.ones(4, 2, dtype=dtype),
                                         ember.ones(3, 4, dtype=dtype))
        assert tuple(d.batch_shape) == (2, 3) and tuple(d.event_shape) == (4,)
        for sample_shape, want in (((), (2, 3, 4)), ((5,), (5, 2, 3, 4)),
                                   ((2, 1), (2, 1, 2, 3, 4))):
            s = d.sample(sample_shape)
            assert tuple(s.shape) == want and s.dtype == dtype and not s.requires_grad
            assert tuple(d.rsample(sample_shape).shape) == want
        assert tuple(d.sample_n(3).shape) == (3, 2, 3, 4)
    assert ED.LowRankMultivariateNormal.has_rsample
    assert not ED.LowRankMultivariateNormal.has_enumerate_support


def test_sample_covariance():
    """The covariance of 40k draws is W W^T + diag(D) within 5 standard errors."""
    ember.manual_seed(2)
    W = np.array([[1.0, 0.5], [-0.3, 0.8], [0.0, 1.2]])
    D = np.array([0.5, 1.0, 0.2])
    # (one dtype: torch's rsample multiplies the float64 factor by noise of loc's dtype, and a
    # float32 loc with float64 factors raises there, as in ember)
    d = ED.LowRankMultivariateNormal(ember.tensor([1.0, -1.0, 0.5], dtype=ember.float64),
                                     ember.tensor(W), ember.tensor(D))
    n = 40000
    x = d.sample((n,)).numpy()
    cov = W @ W.T + np.diag(D)
    se = np.sqrt((cov ** 2 + np.outer(np.diag(cov), np.diag(cov))) / n)
    assert np.all(np.abs(np.cov(x.T) - cov) < 5 * se)


BROADCASTS = [  # (loc, cov_factor, cov_diag) shapes
    ((4,), (4, 2), (4,)), ((2, 3, 4), (4, 2), (4,)), ((4,), (2, 3, 4, 2), (4,)),
    ((4,), (4, 2), (2, 3, 4)), ((2, 1, 4), (3, 4, 2), (1, 3, 4)), ((3, 4), (2, 1, 4, 2), (4,)),
]


@pytest.mark.parametrize("shapes", BROADCASTS)
def test_batch_broadcasting_matches_torch(shapes):
    """batch_shape, the broadcast attributes and log_prob / entropy / the matrices for
    parameters broadcast from different batch shapes."""
    rng = np.random.default_rng(len(shapes[0]) + 3 * len(shapes[1]) + 9 * len(shapes[2]))
    loc = rng.standard_normal(shapes[0])
    W = rng.standard_normal(shapes[1])
    D = rng.uniform(0.5, 2.0, shapes[2])
    value = rng.standard_normal((2,) + (1,) * 2 + (4,))
    e = ED.LowRankMultivariateNormal(ember.tensor(loc), ember.tensor(W), ember.tensor(D))
    t = TD.LowRankMultivariateNormal(torch.tensor(loc), torch.tensor(W), torch.tensor(D))
    assert tuple(e.batch_shape) == tuple(t.batch_shape)
    assert tuple(e.event_shape) == (4,)
    for name in PARAMS + ("scale_tril", "covariance_matrix", "precision_matrix", "variance"):
        ev, tv = getattr(e, name), getattr(t, name)
        assert tuple(ev.shape) == tuple(tv.shape), name
        np.testing.assert_allclose(_np(ev), _np(tv), rtol=1e-10, atol=1e-12, err_msg=name)
    for ev, tv in ((e.log_prob(ember.tensor(value)), t.log_prob(torch.tensor(value))),
                   (e.entropy(), t.entropy())):
        assert tuple(ev.shape) == tuple(tv.shape)
        np.testing.assert_allclose(_np(ev), _np(tv), rtol=1e-10)


def test_expand_matches_torch():
    e, _ = build("LowRankMultivariateNormal-unbatched", "e")
    t, _ = build("LowRankMultivariateNormal-unbatched", "t")
    x, y = e.expand((2, 3)), t.expand((2, 3))
    assert type(x) is ED.LowRankMultivariateNormal
    assert tuple(x.batch_shape) == tuple(y.batch_shape) == (2, 3)
    for name in PARAMS + ("covariance_matrix", "precision_matrix", "scale_tril", "variance"):
        assert tuple(getattr(x, name).shape) == tuple(getattr(y, name).shape), name
        np.testing.assert_allclose(_np(getattr(x, name)), _np(getattr(y, name)), rtol=1e-10,
                                   atol=1e-12, err_msg=name)
    np.testing.assert_allclose(_np(x.entropy()), _np(y.entropy()), rtol=1e-10)
    assert x._validate_args == e._validate_args
    assert tuple(x.sample((4,)).shape) == (4, 2, 3, 4)

    class Sub(ED.LowRankMultivariateNormal):
        pass
    s = Sub(ember.zeros(2), ember.ones(2, 1), ember.ones(2)).expand((3,))
    assert type(s) is Sub and tuple(s.batch_shape) == (3,)


def test_constraints_and_repr():
    c = ED.LowRankMultivariateNormal.arg_constraints
    tc = TD.LowRankMultivariateNormal.arg_constraints
    assert set(c) == set(tc)
    for k in c:
        assert c[k].event_dim == tc[k].event_dim, k
    assert c["cov_factor"].event_dim == 2 and c["cov_diag"].event_dim == 1
    assert ED.LowRankMultivariateNormal.support.event_dim == 1
    d = ED.LowRankMultivariateNormal(ember.zeros(4), ember.ones(4, 2), ember.ones(4))
    t = TD.LowRankMultivariateNormal(torch.zeros(4), torch.ones(4, 2), torch.ones(4))
    assert repr(d) == repr(t).replace("torch.", "ember.")


# KL divergences: (p family, p params, q family, q params); p batch (2, 3), q batch (3,)
_RK = np.random.default_rng(13)


def _spd(shape, n):
    a = _RK.standard_normal(shape + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


_LR_P = dict(loc=_RK.standard_normal((2, 3, 4)), cov_factor=_RK.standard_normal((3, 4, 2)),
             cov_diag=_RK.uniform(0.5, 2.0, (2, 1, 4)))
_LR_Q = dict(loc=_RK.standard_normal((3, 4)), cov_factor=_RK.standard_normal((4, 1)),
             cov_diag=_RK.uniform(0.5, 2.0, (3, 4)))
KL_PAIRS = {
    "LowRank-LowRank": ("LowRankMultivariateNormal", _LR_P, "LowRankMultivariateNormal", _LR_Q),
    "LowRank-LowRank-unbatched": ("LowRankMultivariateNormal",
                                  {k: v[0, 0] if k != "cov_factor" else v[0]
                                   for k, v in _LR_P.items()},
                                  "LowRankMultivariateNormal",
                                  {k: v[0] if k != "cov_factor" else v
                                   for k, v in _LR_Q.items()}),
    "LowRank-MVN": ("LowRankMultivariateNormal",
                    dict(loc=_RK.standard_normal((2, 3, 4)),
                         cov_factor=_RK.standard_normal((2, 3, 4, 2)),
                         cov_diag=_RK.uniform(0.5, 2.0, (3, 4))),
                    "MultivariateNormal",
                    dict(loc=_RK.standard_normal((3, 4)), covariance_matrix=_spd((3,), 4))),
    "LowRank-MVN-tril": ("LowRankMultivariateNormal", _LR_Q, "MultivariateNormal",
                         dict(loc=_RK.standard_normal((2, 1, 4)),
                              scale_tril=np.linalg.cholesky(_spd((2, 3), 4)))),
    "MVN-LowRank": ("MultivariateNormal",
                    dict(loc=_RK.standard_normal((2, 3, 4)), covariance_matrix=_spd((3,), 4)),
                    "LowRankMultivariateNormal", _LR_Q),
    "MVN-LowRank-tril": ("MultivariateNormal",
                         dict(loc=_RK.standard_normal(4),
                              scale_tril=np.linalg.cholesky(_spd((), 4))),
                         "LowRankMultivariateNormal", _LR_P),
    # cov_diag with batch dimensions beyond cov_factor's and q's: torch's KL raises
    "LowRank-MVN-wide": ("LowRankMultivariateNormal", _LR_P, "MultivariateNormal",
                         dict(loc=_RK.standard_normal((3, 4)), covariance_matrix=_spd((3,), 4))),
    "LowRank-MVN-wide-tril": ("LowRankMultivariateNormal", _LR_Q, "MultivariateNormal",
                              dict(loc=_RK.standard_normal((2, 3, 4)),
                                   scale_tril=np.linalg.cholesky(_spd((2, 1), 4)))),
}
TORCH_RAISES = ("LowRank-MVN-wide", "LowRank-MVN-wide-tril")


def _kl_pair(lib, name, dtype):
    fp, pp, fq, qp = KL_PAIRS[name]
    mk = ember.tensor if lib is ED else torch.tensor
    lp = {k: mk(np.asarray(v, dtype=dtype), requires_grad=True) for k, v in pp.items()}
    lq = {k: mk(np.asarray(v, dtype=dtype), requires_grad=True) for k, v in qp.items()}
    return getattr(lib, fp)(**lp), getattr(lib, fq)(**lq), lp, lq


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", [n for n in KL_PAIRS if n not in TORCH_RAISES])
def test_kl_divergence_matches_torch(name, dtype):
    """Values (1e-10 / 1e-5) and the gradients w.r.t. both distributions' parameters."""
    p, q, lp, lq = _kl_pair(ED, name, dtype)
    tp, tq, mp, mq = _kl_pair(TD, name, dtype)
    ke, kt = ED.kl_divergence(p, q), TD.kl_divergence(tp, tq)
    assert tuple(ke.shape) == tuple(kt.shape)
    _close(ke, kt, dtype, "kl")
    assert np.all(_np(ke) > 0)
    w = _weights(kt.shape, 4).astype(dtype)
    (ke * ember.tensor(w)).sum().backward()
    (kt * torch.tensor(w)).sum().backward()
    _grads_close(lp, mp, dtype)
    _grads_close(lq, mq, dtype)


@pytest.mark.parametrize("name", list(KL_PAIRS))
def test_kl_divergence_agrees_with_the_full_covariance_form(name):
    """Each pair equals MultivariateNormal-MultivariateNormal on the covariance matrices, and
    KL(p || p) is zero."""
    p, q, _, _ = _kl_pair(ED, name, "float64")

    def full(d):
        return ED.MultivariateNormal(d.loc, covariance_matrix=d.covariance_matrix)
    np.testing.assert_allclose(_np(ED.kl_divergence(p, q)), _np(ED.kl_divergence(full(p),
                                                                                 full(q))),
                               rtol=1e-10)
    np.testing.assert_allclose(_np(ED.kl_divergence(p, p)), 0.0, atol=1e-10)


@pytest.mark.parametrize("name", TORCH_RAISES)
def test_kl_lowrank_mvn_takes_the_batch_of_cov_diag(name):
    """Where torch's KL(LowRankMultivariateNormal || MultivariateNormal) fails to expand
    cov_diag (it broadcasts only cov_factor's and q's batch shapes), ember's gives the
    divergence, with gradients equal to those of the full-covariance form."""
    tp, tq, _, _ = _kl_pair(TD, name, "float64")
    with pytest.raises(RuntimeError):
        TD.kl_divergence(tp, tq)
    p, q, lp, lq = _kl_pair(ED, name, "float64")
    p2, q2, lp2, lq2 = _kl_pair(ED, name, "float64")
    ke = ED.kl_divergence(p, q)
    kf = ED.kl_divergence(ED.MultivariateNormal(p2.loc, p2.covariance_matrix), q2)
    assert tuple(ke.shape) == tuple(kf.shape) == (2, 3)
    np.testing.assert_allclose(_np(ke), _np(kf), rtol=1e-10)
    ke.sum().backward()
    kf.sum().backward()
    for a, b in ((lp, lp2), (lq, lq2)):
        for k in a:
            np.testing.assert_allclose(a[k].grad.numpy(), b[k].grad.numpy(), rtol=1e-8,
                                       atol=1e-10, err_msg=k)


def test_kl_with_different_event_shapes_raises_as_torch():
    pairs = [
        (lambda D, t: D.LowRankMultivariateNormal(t(np.zeros(2)), t(np.ones((2, 1))),
                                                  t(np.ones(2)))),
        (lambda D, t: D.LowRankMultivariateNormal(t(np.zeros(3)), t(np.ones((3, 1))),
                                                  t(np.ones(3)))),
        (lambda D, t: D.MultivariateNormal(t(np.zeros(3)), t(np.eye(3)))),
        (lambda D, t: D.MultivariateNormal(t(np.zeros(2)), t(np.eye(2)))),
    ]
    for i, j in ((0, 1), (0, 2), (3, 1)):
        with pytest.raises(ValueError) as te:
            TD.kl_divergence(pairs[i](TD, torch.tensor), pairs[j](TD, torch.tensor))
        with pytest.raises(ValueError) as ee:
            ED.kl_divergence(pairs[i](ED, ember.tensor), pairs[j](ED, ember.tensor))
        assert isinstance(ee.value, ember.errors.EmberError)
        assert str(ee.value).split(" with")[0] == str(te.value).split(" with")[0]
        assert " ".join(str(ee.value).split()) == " ".join(str(te.value).split())


SHAPE_ERRORS = [  # (loc, cov_factor, cov_diag) shapes torch rejects before any validation
    ((), (2, 1), (2,)), ((2,), (2,), (2,)), ((2,), (3, 1), (2,)), ((2,), (2, 1), (3,)),
    ((2,), (2, 1), ()), ((3, 2), (4, 2, 1), (2,)), ((2, 2), (3, 2, 1), (2,)),
    ((3, 2), (2, 1), (2, 2)),
]


@pytest.mark.parametrize("shapes", SHAPE_ERRORS)
def test_shape_errors_raise_as_torch(shapes):
    """An EmberValueError with torch's text (torch.Size shown as ember.Size), raised also with
    validate_args=False."""
    for flag in (None, False):
        with pytest.raises(ValueError) as te:
            TD.LowRankMultivariateNormal(*(torch.ones(s, dtype=torch.float64) for s in shapes),
                                         validate_args=flag)
        with pytest.raises(ValueError) as ee:
            ED.LowRankMultivariateNormal(*(ember.ones(*s, dtype=ember.float64)
                                           for s in shapes), validate_args=flag)
        assert isinstance(ee.value, ember.errors.EmberValueError)
        assert str(ee.value) == str(te.value).replace("torch.", "ember.")


def test_a_capacitance_that_is_not_positive_definite_raises_as_torch():
    """A negative cov_diag can make I + W^T D^-1 W indefinite: both raise a LinAlgError (a
    RuntimeError) from the Cholesky factorisation before validating the arguments."""
    args = (np.zeros(2), np.ones((2, 1)), np.array([1.0, -0.1]))
    with pytest.raises(RuntimeError):
        TD.LowRankMultivariateNormal(*(torch.tensor(a) for a in args))
    with pytest.raises(ember.errors.LinAlgError):
        ED.LowRankMultivariateNormal(*(ember.tensor(a) for a in args))


def test_nan_cov_factor_is_rejected():
    """ember raises the validate_args error naming cov_factor (torch's Cholesky of the NaN
    capacitance raises its LinAlgError first)."""
    args = (np.zeros(2), np.array([[1.0], [np.nan]]), np.ones(2))
    with pytest.raises(RuntimeError):
        TD.LowRankMultivariateNormal(*(torch.tensor(a) for a in args))
    with pytest.raises(ValueError, match="Expected parameter cov_factor "):
        ED.LowRankMultivariateNormal(*(ember.tensor(a) for a in args))


def test_log_prob_value_shape_errors_raise_as_torch():
    e, _ = build("LowRankMultivariateNormal", "e")
    t, _ = build("LowRankMultivariateNormal", "t")
    for bad in (np.zeros((2, 3, 5)), np.zeros((4, 3, 4))):
        with pytest.raises(ValueError) as te:
            t.log_prob(torch.tensor(bad))
        with pytest.raises(ValueError) as ee:
            e.log_prob(ember.tensor(bad))
        assert str(ee.value).split(":")[0] == str(te.value).split(":")[0]
