"""Tensor factory kernels against torch: filled arrays, arange (float and integer steps, torch's
element count), linspace (integer truncation), logspace, eye, bincount, histogram (equal bins
computed as torch's linspace, given edges, weights, density), histogramdd; the random factories'
distributions from a seeded NumPy Generator (moments and supports); errors as KernelError."""
import numpy as np
import pytest

from ember.kernels import creation as C
from ember.kernels.errors import KernelError

torch = pytest.importorskip("torch")


def _eq(ours, theirs, tol=0):
    t = theirs.numpy()
    assert ours.shape == t.shape and ours.dtype == t.dtype, (ours.shape, t.shape, ours.dtype,
                                                              t.dtype)
    np.testing.assert_allclose(ours, t, rtol=tol, atol=tol)


def test_filled_arrays_and_eye():
    _eq(C.zeros((2, 3), np.float32), torch.zeros(2, 3))
    _eq(C.ones((0, 2), np.int64), torch.ones(0, 2, dtype=torch.int64))
    _eq(C.full((2, 2), 7, np.int32), torch.full((2, 2), 7, dtype=torch.int32))
    a = np.zeros((3, 1), np.float64)
    _eq(C.full_like(a, 2.5), torch.full_like(torch.tensor(a), 2.5))
    assert C.empty((4,), np.float32).shape == (4,) and C.empty_like(a).dtype == np.float64
    _eq(C.eye(3, None, np.float64), torch.eye(3, dtype=torch.float64))
    _eq(C.eye(2, 4, np.int64), torch.eye(2, 4, dtype=torch.int64))
    with pytest.raises(KernelError, match="negative dimension -1"):
        C.zeros((2, -1), np.float32)


@pytest.mark.parametrize("start, end, step, dtype", [
    (0, 5, 1, np.int64), (1, 10, 3, np.int64), (5, -3, -2, np.int64), (0.0, 1.0, 0.1, np.float64),
    (-1.0, 1.0, 0.3, np.float32), (0, 7.5, 2.5, np.float64),
])
def test_arange_matches_torch(start, end, step, dtype):
    _eq(C.arange(start, end, step, dtype),
        torch.arange(start, end, step, dtype=getattr(torch, np.dtype(dtype).name)), 1e-6)


@pytest.mark.parametrize("start, end, steps, dtype", [(0.0, 1.0, 5, np.float64),
                                                      (-3, 7, 4, np.int64), (2, 2, 1, np.int32),
                                                      (0.0, 1.0, 0, np.float32)])
def test_linspace_matches_torch(start, end, steps, dtype):
    _eq(C.linspace(start, end, steps, dtype),
        torch.linspace(start, end, steps, dtype=getattr(torch, np.dtype(dtype).name)), 1e-6)


def test_logspace_matches_torch():
    _eq(C.logspace(0.0, 2.0, 5, 10.0, np.float64),
        torch.logspace(0.0, 2.0, 5, 10.0, dtype=torch.float64), 1e-12)
    _eq(C.logspace(-1.0, 3.0, 4, 2.0, np.float32),
        torch.logspace(-1.0, 3.0, 4, 2.0, dtype=torch.float32), 1e-6)


def test_arange_errors():
    with pytest.raises(KernelError, match="step must be nonzero"):
        C.arange(0, 3, 0, np.float64)
    with pytest.raises(KernelError, match="inconsistent with step sign"):
        C.arange(0, 3, -1, np.int64)


def test_bincount_matches_torch():
    a = np.array([0, 3, 3, 1, 5])
    _eq(C.bincount(a, None, 0), torch.bincount(torch.tensor(a)))
    w = np.array([0.5, 1.0, 2.0, -1.0, 3.0])
    _eq(C.bincount(a, w, 8), torch.bincount(torch.tensor(a), torch.tensor(w), 8), 1e-15)


@pytest.mark.parametrize("density", [False, True])
def test_histogram_matches_torch(density):
    rng = np.random.default_rng(89)
    x = rng.standard_normal(200).astype(np.float32)
    w = rng.random(200).astype(np.float32)
    hist, edges = C.histogram(x, None, w, 7, None, density)
    th, te = torch.histogram(torch.tensor(x), 7, weight=torch.tensor(w), density=density)
    _eq(edges, te, 1e-6)     # torch's middle edges can differ by one float32 ulp
    _eq(hist, th, 1e-5)
    given = np.array([-1.0, 0.0, 0.5, 2.0], np.float32)
    hist, _ = C.histogram(x, given, None, None, None, density)
    _eq(hist, torch.histogram(torch.tensor(x), torch.tensor(given), density=density)[0], 1e-6)
    with pytest.raises(KernelError, match="floating point input"):
        C.histogram(np.arange(3), None, None, 3, None, False)


def test_histogramdd_matches_torch():
    rng = np.random.default_rng(97)
    a = rng.random((50, 2))
    e0, e1 = np.array([0.0, 0.3, 1.0]), np.array([0.0, 0.5, 0.7, 1.0])
    hist = C.histogramdd([a, e0, e1], False, False)
    th = torch.histogramdd(torch.tensor(a), [torch.tensor(e0), torch.tensor(e1)])
    got = hist[0] if isinstance(hist, tuple) else hist
    np.testing.assert_array_equal(got, th.hist.numpy())


def test_random_factories_have_their_distributions():
    g = np.random.default_rng(101)
    n = 200_000
    u = C.rand((n,), g, np.float32)
    assert u.dtype == np.float32 and 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.01
    z = C.randn((n,), g, np.float64)
    assert abs(z.mean()) < 0.01 and abs(z.std() - 1) < 0.01
    c = C.randn((n,), g, np.complex64)
    assert c.dtype == np.complex64 and abs(np.mean(np.abs(c) ** 2) - 1) < 0.02   # E|z|^2 = 1
    i = C.randint(-2, 3, (n,), g, np.int64)
    assert set(np.unique(i)) == {-2, -1, 0, 1, 2}
    p = C.randperm(10, g, np.int64)
    assert sorted(p) == list(range(10))
    nm = C.normal(3.0, 2.0, (n,), g, np.float64)
    assert abs(nm.mean() - 3) < 0.03 and abs(nm.std() - 2) < 0.03
    like = np.zeros(n, np.float32)
    assert abs(C.exponential_like(like, 2.0, g).mean() - 0.5) < 0.01
    geo = C.geometric_like(like, 0.25, g)
    assert geo.min() >= 1 and abs(geo.mean() - 4) < 0.1
    b = C.bernoulli(np.full(n, 0.3), g)
    assert set(np.unique(b)) == {0.0, 1.0} and abs(b.mean() - 0.3) < 0.01
    cau = C.cauchy_like(like, 1.0, 2.0, g)
    assert abs(np.median(cau) - 1.0) < 0.05
    m = C.multinomial(np.array([[0.0, 1.0, 3.0]]), 4, True, g)
    assert m.shape == (1, 4) and m.dtype == np.int64 and 0 not in m
