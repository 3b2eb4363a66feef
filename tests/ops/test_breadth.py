"""op_db breadth ops (issue 12) beyond the spec tests: windows, factories, random fills,
histograms, statistics with weights, the real-dtype complex accessors, low-rank SVD; edge cases
and errors."""
import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.errors import EmberError

torch = pytest.importorskip("torch")


def _t(x):
    return torch.from_numpy(np.ascontiguousarray(x.detach().numpy()))


WINDOWS = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "hamming", "hann",
           "kaiser", "nuttall", "general_hamming"]


@pytest.mark.parametrize("name", WINDOWS)
def test_windows_match_torch(name):
    for M in (0, 1, 2, 5, 8):
        for sym in (True, False):
            e = getattr(ember.signal.windows, name)(M, sym=sym, dtype=ember.float64)
            t = getattr(torch.signal.windows, name)(M, sym=sym, dtype=torch.float64)
            np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-12, atol=1e-12)
    e = ember.signal.windows.general_cosine(7, a=[0.46, 0.23, 0.31])
    t = torch.signal.windows.general_cosine(7, a=[0.46, 0.23, 0.31])
    assert e.dtype == ember.float32
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-6)


def test_window_errors():
    with pytest.raises(EmberError, match="non-negative"):
        ember.signal.windows.hann(-1)
    with pytest.raises(EmberError, match="float32 or float64"):
        ember.signal.windows.hann(4, dtype=ember.int64)
    with pytest.raises(EmberError, match="center must be None"):
        ember.signal.windows.exponential(4, center=1.0)


def test_factories():
    assert ember.logspace(0, 1.9, 3, dtype=ember.int64).tolist() == \
        torch.logspace(0, 1.9, 3, dtype=torch.int64).tolist()
    np.testing.assert_allclose(ember.logspace(-1, 2, 4, base=2.0).numpy(),
                               torch.logspace(-1, 2, 4, base=2.0).numpy())
    assert ember.logspace(ember.tensor(0), ember.tensor(2), 3).tolist() == [1.0, 10.0, 100.0]
    s = ember.scalar_tensor(3)
    assert s.shape == () and s.dtype == ember.float32 and s.item() == 3.0
    assert ember.empty_strided((2, 3), (3, 1), dtype=ember.float64).shape == (2, 3)
    assert ember.randn(2).new_empty_strided((4,), (1,)).dtype == ember.float32
    assert ember.empty_permuted((2, 3, 4), (0, 2, 1)).shape == (2, 3, 4)
    with pytest.raises(EmberError, match="strides"):
        ember.empty_strided((2, 3), (1,))
    with pytest.raises(EmberError, match="permutation"):
        ember.empty_permuted((2, 3), (0, 0))
    r = ember.randint_like(ember.zeros(50, 4), 3, 7)
    assert r.dtype == ember.float32 and 3 <= r.min().item() and r.max().item() < 7
    x = ember.randn(3, requires_grad=True)
    y = ember.fill(x, 2.5)
    assert y.tolist() == [2.5] * 3 and y.requires_grad


def test_random_fills():
    x = ember.empty(2000, dtype=ember.float64)
    ember.manual_seed(3)
    a = x.exponential_(2.0).clone()
    assert a.min().item() > 0 and abs(a.mean().item() - 0.5) < 0.05
    ember.manual_seed(3)
    assert x.exponential_(lambd=2.0).equal(a)  # seeded: reproducible
    g = x.geometric_(0.25)
    assert g is x and (g >= 1).all().item() and g.equal(g.round())
    assert abs(g.mean().item() - 4.0) < 0.4
    assert (x.log_normal_(0.0, 0.5) > 0).all().item()
    c = x.cauchy_(median=3.0, sigma=0.1)
    assert abs(c.median().item() - 3.0) < 0.05
    with pytest.raises(EmberError, match="p to be in"):
        x.geometric_(1.5)
    with pytest.raises(EmberError, match="floating point"):
        ember.zeros(3, dtype=ember.int64).exponential_()


def test_bincount_histogram():
    x = ember.tensor([0, 3, 3, 1])
    assert ember.bincount(x, minlength=6).tolist() == [1, 1, 0, 2, 0, 0]
    w = ember.tensor([0.5, 1.0, 2.0, 1.0], dtype=ember.float64)
    assert x.bincount(w).tolist() == [0.5, 1.0, 0.0, 3.0]
    with pytest.raises(EmberError, match="non-negative"):
        ember.bincount(ember.tensor([1, -1]))
    v = np.random.default_rng(0).standard_normal(50).astype(np.float32)
    for args, kw in [((7,), {}), ((4,), {"range": (-1.0, 1.0), "density": True}),
                     ((torch.tensor([-2.0, 0.0, 0.5, 3.0]),), {})]:
        t = torch.histogram(torch.from_numpy(v), *args, **kw)
        eargs = [ember.tensor(a.numpy()) if isinstance(a, torch.Tensor) else a for a in args]
        e = ember.histogram(ember.tensor(v), *eargs, **kw)
        np.testing.assert_allclose(e.hist.numpy(), t.hist.numpy(), rtol=1e-6)
        np.testing.assert_allclose(e.bin_edges.numpy(), t.bin_edges.numpy(), rtol=1e-6)
    e = ember.histogram(ember.zeros(0), 2)
    assert e.bin_edges.tolist() == [0.0, 0.5, 1.0] and e.hist.tolist() == [0.0, 0.0]
    with pytest.raises(EmberError, match="same dtype"):
        ember.histogram(ember.tensor(v), ember.tensor([0.0, 1.0], dtype=ember.float64))


def test_cov_weights_and_gradients():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 5))
    fw = np.array([1, 2, 1, 3, 1], dtype=np.int32)
    aw = rng.uniform(0.5, 2, 5).astype(np.float32)
    ex, ea = ember.tensor(x, requires_grad=True), ember.tensor(aw, requires_grad=True)
    tx, ta = torch.tensor(x, requires_grad=True), torch.tensor(aw, requires_grad=True)
    e = ember.cov(ex, correction=1, fweights=ember.tensor(fw), aweights=ea)
    t = torch.cov(tx, correction=1, fweights=torch.tensor(fw), aweights=ta)
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-6)
    e.sum().backward()
    t.sum().backward()
    assert ea.grad.dtype == ember.float32
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-5)
    np.testing.assert_allclose(ea.grad.numpy(), ta.grad.numpy(), rtol=1e-4, atol=1e-6)
    with pytest.raises(EmberError, match="two or fewer"):
        ember.cov(ember.zeros(2, 2, 2))


def test_integration_and_distances_noncontiguous():
    y = ember.randn(4, 6, dtype=ember.float64)[:, ::2]
    x = ember.randn(3, dtype=ember.float64).cumsum(0)
    assert not y.is_contiguous()
    np.testing.assert_allclose(ember.trapezoid(y, x).numpy(), torch.trapezoid(_t(y), _t(x)))
    np.testing.assert_allclose(ember.cumulative_trapezoid(y, dx=0.5, dim=0).numpy(),
                               torch.cumulative_trapezoid(_t(y), dx=0.5, dim=0))
    with pytest.raises(EmberError, match="either x or dx"):
        ember.trapezoid(y, x, dx=1.0)
    a, b = ember.randn(2, 5, 3, dtype=ember.float64), ember.randn(2, 4, 3, dtype=ember.float64)
    for p in (0.0, 1.0, 2.0, float("inf")):
        np.testing.assert_allclose(ember.cdist(a, b, p).numpy(), torch.cdist(_t(a), _t(b), p),
                                   rtol=1e-10, atol=1e-12)
    with pytest.raises(EmberError, match="same number of columns"):
        ember.cdist(a, ember.randn(2, 4, 2))
    r = ember.randn(3, 4, dtype=ember.float64)
    np.testing.assert_allclose(r.renorm(2, 0, 0.5).numpy(), _t(r).renorm(2, 0, 0.5).numpy())


def test_native_norms_outputs():
    x = ember.randn(2, 3, 4, requires_grad=True)
    out, mean, rstd = ember.native_layer_norm(x, [4], None, None, 1e-5)
    assert out.requires_grad and not mean.requires_grad and not rstd.requires_grad
    assert mean.shape == (2, 3, 1)
    out, mean, rstd = ember.native_group_norm(x, None, None, 2, 3, 4, 3, 1e-5)
    assert mean.shape == (2, 3) and rstd.shape == (2, 3)
    with pytest.raises(EmberError, match="divisible"):
        ember.native_group_norm(x, None, None, 2, 3, 4, 2, 1e-5)


def test_grid_sampler_entry_points():
    x, g = ember.randn(1, 2, 4, 5), ember.rand(1, 3, 3, 2) * 2 - 1
    for i, mode in enumerate(("bilinear", "nearest", "bicubic")):
        for j, pad in enumerate(("zeros", "border", "reflection")):
            assert ember.allclose(ember.grid_sampler_2d(x, g, i, j, True),
                                  F.grid_sample(x, g, mode, pad, True))
    with pytest.raises(EmberError, match="4-d"):
        ember.grid_sampler_2d(ember.randn(1, 1, 2, 2, 2), ember.rand(1, 1, 1, 1, 3), 0, 0, False)


def test_real_dtype_complex_accessors():
    x = ember.randn(4, 6)[:, ::2].requires_grad_(True)
    for y in (x.conj(), ember.resolve_conj(x), x.resolve_neg(), x.real, ember.real(x),
              ember.conj_physical(x)):
        assert y.equal(x) and y.requires_grad
    assert ember.angle(ember.tensor([-2, 0, 3])).tolist() == pytest.approx([np.pi, 0.0, 0.0])
    a = ember.angle(ember.tensor([-1.0, float("nan"), 1.0], requires_grad=True))
    assert np.isnan(a[1].item())
    (g,) = ember.autograd.grad(x.angle().sum(), x)
    assert (g == 0).all().item()


def test_svd_lowrank_reconstructs_low_rank():
    ember.manual_seed(0)
    for m, n in ((6, 4), (3, 7)):
        A = ember.randn(m, 2, dtype=ember.float64) @ ember.randn(2, n, dtype=ember.float64)
        U, S, V = ember.svd_lowrank(A, q=2)
        assert U.shape == (m, 2) and S.shape == (2,) and V.shape == (n, 2)
        assert ember.allclose(U @ ember.diag(S) @ V.mT, A, atol=1e-10)
        np.testing.assert_allclose(S.numpy(), torch.linalg.svdvals(_t(A))[:2].numpy())
        U, S, V = ember.pca_lowrank(A, q=2)
        C = A - A.mean(-2, keepdim=True)
        np.testing.assert_allclose(S.numpy(), torch.linalg.svdvals(_t(C))[:2].numpy(),
                                   rtol=1e-8)
    with pytest.raises(EmberError, match="q=5"):
        ember.svd_lowrank(ember.randn(3, 4), q=5)


def test_gradient_matches_torch():
    rng = np.random.default_rng(4)
    f = rng.standard_normal((4, 6))
    x = np.cumsum(rng.uniform(0.5, 1.5, 6))
    for kw, ekw in [({}, {}), ({"spacing": 2.0, "edge_order": 2}, {"spacing": 2.0, "edge_order": 2}),
                    ({"spacing": (torch.tensor(x),), "dim": 1, "edge_order": 2},
                     {"spacing": (ember.tensor(x),), "dim": 1, "edge_order": 2}),
                    ({"spacing": [0.5, 2.0], "dim": [1, 0]}, {"spacing": [0.5, 2.0], "dim": [1, 0]})]:
        t = torch.gradient(torch.tensor(f), **kw)
        e = ember.gradient(ember.tensor(f), **ekw)
        assert len(e) == len(t)
        for a, b in zip(e, t):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)
    with pytest.raises(EmberError, match="edge_order"):
        ember.gradient(ember.zeros(2, 2), edge_order=2)


def test_histogramdd_matches_torch():
    rng = np.random.default_rng(5)
    v = rng.standard_normal((40, 2))
    w = rng.uniform(0.5, 2.0, 40)
    for bins, kw in [((3, 4), {}), (2, {"range": [-1.0, 1.0, -2.0, 2.0], "density": True}),
                     ([np.array([-1.0, 0.0, 2.0]), np.array([-0.5, 0.5])], {"weight": w})]:
        tb = [torch.tensor(b) for b in bins] if isinstance(bins, list) else bins
        eb = [ember.tensor(b) for b in bins] if isinstance(bins, list) else bins
        tkw = {k: torch.tensor(x) if isinstance(x, np.ndarray) else x for k, x in kw.items()}
        ekw = {k: ember.tensor(x) if isinstance(x, np.ndarray) else x for k, x in kw.items()}
        t, e = torch.histogramdd(torch.tensor(v), tb, **tkw), ember.histogramdd(ember.tensor(v), eb, **ekw)
        np.testing.assert_allclose(e.hist.numpy(), t.hist.numpy(), rtol=1e-12)
        for a, b in zip(e.bin_edges, t.bin_edges):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)
    with pytest.raises(EmberError, match="same dtype"):
        ember.histogramdd(ember.tensor(v), [ember.tensor([0.0, 1.0], dtype=ember.float32)] * 2)


def test_resize_():
    x = ember.arange(6.0)
    assert x.resize_(2, 2) is x and x.tolist() == [[0.0, 1.0], [2.0, 3.0]]
    v = x._version
    y = ember.arange(4.0).reshape(2, 2).t()  # non-contiguous: row-major order of its values
    assert y.resize_((4,)).tolist() == [0.0, 2.0, 1.0, 3.0]
    z = ember.zeros(2).resize_as_(ember.ones(3, 1))
    assert z.shape == (3, 1) and z[:2].flatten().tolist() == [0.0, 0.0]
    assert ember.resize_as_(ember.zeros(4), ember.ones(2, 2)).shape == (2, 2)
    assert x.resize_(1, 2)._version == v + 1
    with pytest.raises(EmberError, match="requires grad"):
        ember.zeros(3, requires_grad=True).resize_(2)


@pytest.mark.parametrize("name,args", [("trapezoid", "y"), ("trapezoid", "yx"),
                                       ("trapezoid", "yr"), ("cumulative_trapezoid", "y"),
                                       ("cumulative_trapezoid", "yx"), ("cov", "y"),
                                       ("corrcoef", "y")])
def test_complex_integration_and_statistics_match_torch(name, args):
    """trapezoid/cumulative_trapezoid kept only the real part of a complex y, cov did not
    conjugate and corrcoef clipped complex values as reals (found by tests/differential):
    values and complex gradients against torch."""
    rng = np.random.default_rng(1)
    y = rng.standard_normal((3, 5)) + 1j * rng.standard_normal((3, 5))
    x = rng.standard_normal((3, 5)).cumsum(1) + 0.5j
    arrays = [y] + ([x] if args == "yx" else [x.real.copy()] if args == "yr" else [])
    es = [ember.from_numpy(a.copy()).requires_grad_(True) for a in arrays]
    ts = [torch.from_numpy(a.copy()).requires_grad_(True) for a in arrays]
    out, want = getattr(ember, name)(*es), getattr(torch, name)(*ts)
    assert out.dtype.name == str(want.dtype).replace("torch.", "")
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=1e-10,
                               atol=1e-12)
    seed = rng.standard_normal(tuple(want.shape))
    grads = ember.autograd.grad(out, es, ember.from_numpy(seed.astype(out._data.dtype)))
    tgrads = torch.autograd.grad(want, ts, torch.from_numpy(seed).to(want.dtype))
    for g, tg in zip(grads, tgrads):
        np.testing.assert_allclose(g.numpy(), tg.resolve_conj().numpy(), rtol=1e-8, atol=1e-10)


def test_trapezoid_keeps_bfloat16_like_torch():
    y = torch.tensor([0.5, 1.25, -2.0, 3.5]).bfloat16()
    got = ember.trapezoid(ember.tensor([0.5, 1.25, -2.0, 3.5]).to(ember.bfloat16), dx=0.5)
    assert got.dtype == ember.bfloat16
    assert got.float().item() == torch.trapezoid(y, dx=0.5).float().item()
