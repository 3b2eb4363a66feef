"""Sorting and selection kernels on ndarrays against torch: sort / argsort (stable, NaN last),
topk, kthvalue, median and nanmedian, mode, cummax / cummin, logcumsumexp, unique and
unique_consecutive, searchsorted / bucketize, isin, histc; errors as KernelError."""
import numpy as np
import pytest

from ember.kernels import sorting as S
from ember.kernels.errors import KernelError

torch = pytest.importorskip("torch")
rng = np.random.default_rng(73)
A = rng.integers(-3, 4, (4, 7)).astype(np.float64)      # ties
A[1, 2] = np.nan
T = torch.tensor(A)
B = rng.permutation(28).reshape(4, 7).astype(np.float64)    # distinct: tie order is torch's own
TB = torch.tensor(B)


def _eq(ours, theirs):
    if not isinstance(theirs, torch.Tensor):              # a tuple or torch's named tuples
        theirs = tuple(theirs)
        assert len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            _eq(o, t)
        return
    t = theirs.numpy()
    o = np.asarray(ours)
    assert o.shape == t.shape and o.dtype == t.dtype, (o.shape, t.shape, o.dtype, t.dtype)
    np.testing.assert_allclose(o, t, rtol=1e-12, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("ours, theirs", [
    (lambda: S.sort(A, 1, False, True), lambda: T.sort(dim=1, descending=False, stable=True)),
    (lambda: S.sort(A, 0, True, True), lambda: T.sort(dim=0, descending=True, stable=True)),
    (lambda: S.argsort(A, -1, False, True), lambda: T.argsort(dim=-1, descending=False, stable=True)),
    (lambda: S.topk(B, 3, 1), lambda: TB.topk(3, 1)),
    (lambda: S.topk(B, 2, 0, False), lambda: TB.topk(2, 0, False)),
    (lambda: S.kthvalue(B, 3, 1), lambda: TB.kthvalue(3, 1)),
    (lambda: S.median_dim(A, 1), lambda: T.median(1)),
    (lambda: S.nanmedian_dim(A, 1, True), lambda: T.nanmedian(1, True)),
    (lambda: S.median_all(A[[0, 2]]), lambda: T[[0, 2]].median()),
    (lambda: S.nanmedian_all(A), lambda: T.nanmedian()),
    (lambda: S.mode(A[[0, 2, 3]], 1), lambda: T[[0, 2, 3]].mode(1)),
    (lambda: S.cummax(A, 1), lambda: T.cummax(1)),
    (lambda: S.cummin(A, 0), lambda: T.cummin(0)),
    (lambda: S.logcumsumexp(A, 1), lambda: T.logcumsumexp(1)),
])
@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")   # NaN through logaddexp
def test_matches_torch(ours, theirs):
    _eq(ours(), theirs())


def test_unique_and_unique_consecutive_match_torch():
    a = np.array([3, 1, 1, 2, 3, 3, 0, 1])
    t = torch.tensor(a)
    _eq(S.unique(a, True, True, True), torch.unique(t, True, True, True))
    _eq(S.unique_consecutive(a, True, True), torch.unique_consecutive(t, True, True))
    m = np.array([[1, 2], [0, 5], [1, 2], [0, 5], [0, 4]])
    _eq(S.unique(m, True, True, True, 0), torch.unique(torch.tensor(m), True, True, True, 0))
    _eq(S.unique_consecutive(m, True, True, 0),
        torch.unique_consecutive(torch.tensor(m), True, True, 0))


@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_bucketize_isin_histc_match_torch(right):
    seq = np.sort(rng.integers(0, 10, (3, 6)).astype(np.float64), -1)
    vals = rng.integers(-1, 12, (3, 4)).astype(np.float64)
    _eq(S.searchsorted(seq, vals, right=right),
        torch.searchsorted(torch.tensor(seq), torch.tensor(vals), right=right))
    _eq(S.searchsorted(seq[0], vals, out_int32=True, right=right),
        torch.searchsorted(torch.tensor(seq[0]), torch.tensor(vals), out_int32=True, right=right))
    _eq(S.bucketize(vals, seq[0], False, right),
        torch.bucketize(torch.tensor(vals), torch.tensor(seq[0]), right=right))
    _eq(S.isin(vals, seq[0], invert=right),
        torch.isin(torch.tensor(vals), torch.tensor(seq[0]), invert=right))
    x = rng.standard_normal(100)
    _eq(S.histc(x, 7, -1.0, 1.0), torch.histc(torch.tensor(x), 7, -1.0, 1.0))
    _eq(S.histc(x, 5), torch.histc(torch.tensor(x), 5))


@pytest.mark.parametrize("call", [
    lambda: S.topk(A, 8, 1),
    lambda: S.kthvalue(A, 0, 1),
    lambda: S.mode(np.zeros((2, 0)), 1),
])
def test_errors(call):
    with pytest.raises(KernelError):
        call()
    with pytest.raises(IndexError, match=r"sort\(\): dimension 2 out of range"):
        S.sort(A, 2)


import ember  # noqa: E402

EMPTY_SELECTIONS = {
    "median dim0": lambda m, e, e2: m.median(e2, 0), "nanmedian dim0": lambda m, e, e2: m.nanmedian(e2, 0),
    "median method": lambda m, e, e2: e2.median(0),
    "kthvalue": lambda m, e, e2: m.kthvalue(e, 1), "kthvalue k=2": lambda m, e, e2: m.kthvalue(e, 2),
    "kthvalue dim1 of (3, 0)": lambda m, e, e2: e2.t().kthvalue(1, 1),
    "mode": lambda m, e, e2: m.mode(e), "mode dim0": lambda m, e, e2: m.mode(e2, 0),
    "mode method dim1 of (3, 0)": lambda m, e, e2: e2.t().mode(1),
}


@pytest.mark.parametrize("case", sorted(EMPTY_SELECTIONS))
def test_selection_over_an_empty_dim_raises_torchs_index_error(case):
    fn = EMPTY_SELECTIONS[case]
    with pytest.raises(IndexError) as want:
        fn(torch, torch.zeros(0), torch.zeros(0, 3))
    with pytest.raises(IndexError) as got:
        fn(ember, ember.zeros(0), ember.zeros(0, 3))
    assert str(want.value).split("median")[-1] in str(got.value)   # nanmedian: torch says median


def test_k_out_of_range_has_torchs_words():
    for args in ((torch.ones(3), 5), (torch.ones(2, 3), 4, 1)):
        with pytest.raises(RuntimeError) as want:
            torch.kthvalue(*args)
        with pytest.raises(RuntimeError) as got:
            ember.kthvalue(ember.tensor(args[0].numpy()), *args[1:])
        assert str(want.value) in str(got.value)
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        ember.topk(ember.zeros(0), 1)


SEARCH_WITH_NAN = [([1.0, 2.0, np.nan], [np.nan, 1.5]), ([1.0, np.nan, 2.0], [0.0, 1.0, 1.5, 2.0, 3.0, np.nan]),
                   ([np.nan, np.nan], [1.0, np.nan]), ([1.0, 2.0, 3.0], [np.nan, 2.0]),
                   ([[1.0, np.nan, 3.0], [np.nan, 2.0, 5.0]], [[np.nan, 2.0], [1.0, 6.0]])]


@pytest.mark.parametrize("right", [False, True])
@pytest.mark.parametrize("seq,vals", SEARCH_WITH_NAN)
def test_searchsorted_with_nan_is_torchs_binary_search(seq, vals, right):
    """A NaN value goes after every element (NumPy: before the first NaN); a NaN boundary
    reads as below every value, as torch's bisection compares."""
    want = torch.searchsorted(torch.tensor(seq), torch.tensor(vals), right=right)
    np.testing.assert_array_equal(S.searchsorted(np.array(seq), np.array(vals), right=right),
                                  want.numpy())


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("shape,dim", [((1000,), 0), ((3, 1000), -1), ((1000, 3), 0),
                                       ((2, 600, 2), 1)])
@pytest.mark.parametrize("ties", [False, True])
def test_topk_by_partition_equals_the_first_k_of_a_stable_sort(shape, dim, dtype, ties):
    """Long slices with few picks are selected by partition: the same values and indices as the
    stable sort (equal values by index, at the k-th value too), and torch's values; NaN slices
    keep the sort (NaN above every number)."""
    x = rng.standard_normal(shape)
    x = (np.round(x * 2) if ties else x).astype(dtype)
    for k in (1, 7, 250):
        for largest in (True, False):
            want = np.take(np.argsort(-x if largest else x, axis=dim, kind="stable"),
                           np.arange(k), axis=dim)
            v, i = S.topk(x, k, dim, largest)
            np.testing.assert_array_equal(i, want)
            tv, _ = torch.topk(torch.tensor(x), k, dim=dim, largest=largest)
            np.testing.assert_array_equal(v, tv.numpy())
    if dtype != np.int64:
        x = x.copy()
        x[(0,) * x.ndim] = np.nan
        v, _ = S.topk(x, 3, dim, True)
        assert np.isnan(v[(0,) * x.ndim])
