"""Reductions of ember/ops/reduction.py against torch: histograms, statistics with weights,
integration, ``gradient``; edge cases and errors."""
import numpy as np
import pytest

import ember
from ember.errors import EmberError

torch = pytest.importorskip("torch")


def _to_torch(x):
    return torch.from_numpy(np.ascontiguousarray(x.detach().numpy()))


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
    np.testing.assert_allclose(ember.trapezoid(y, x).numpy(), torch.trapezoid(_to_torch(y), _to_torch(x)))
    np.testing.assert_allclose(ember.cumulative_trapezoid(y, dx=0.5, dim=0).numpy(),
                               torch.cumulative_trapezoid(_to_torch(y), dx=0.5, dim=0))
    with pytest.raises(EmberError, match="either x or dx"):
        ember.trapezoid(y, x, dx=1.0)
    a, b = ember.randn(2, 5, 3, dtype=ember.float64), ember.randn(2, 4, 3, dtype=ember.float64)
    for p in (0.0, 1.0, 2.0, float("inf")):
        np.testing.assert_allclose(ember.cdist(a, b, p).numpy(), torch.cdist(_to_torch(a), _to_torch(b), p),
                                   rtol=1e-10, atol=1e-12)
    with pytest.raises(EmberError, match="same number of columns"):
        ember.cdist(a, ember.randn(2, 4, 2))
    r = ember.randn(3, 4, dtype=ember.float64)
    np.testing.assert_allclose(r.renorm(2, 0, 0.5).numpy(), _to_torch(r).renorm(2, 0, 0.5).numpy())


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


def test_norm_p0_has_zero_gradient():
    x = ember.tensor([[1.0, 0.0, -2.0]], dtype=ember.float64, requires_grad=True)
    (g,) = ember.autograd.grad(ember.norm(x, 0), [x])
    assert g.tolist() == [[0.0, 0.0, 0.0]]


def test_norm_nuc_matches_torch_and_needs_a_matrix():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(1).standard_normal((2, 3, 4))
    np.testing.assert_allclose(ember.norm(ember.tensor(x), "nuc", dim=(1, 2)).numpy(),
                               torch.norm(torch.tensor(x), "nuc", dim=(1, 2)).numpy(), rtol=1e-12)
    np.testing.assert_allclose(ember.tensor(x[0]).norm("nuc").numpy(),
                               torch.tensor(x[0]).norm("nuc").numpy(), rtol=1e-12)
    with pytest.raises(ember.EmberError, match="norm: p='nuc' with dim=None needs a 2-D input"):
        ember.norm(ember.tensor(x), "nuc")


def test_aminmax_of_nothing_raises_torchs_errors():
    for make, kwargs, cls in ((lambda m: m.zeros(0), {}, RuntimeError),
                              (lambda m: m.zeros(0, 3), {"dim": 0}, IndexError)):
        with pytest.raises(cls) as want:
            torch.aminmax(make(torch), **kwargs)
        with pytest.raises(cls) as got:
            ember.aminmax(make(ember), **kwargs)
        assert str(want.value).split(": ", 1)[-1] in str(got.value)
