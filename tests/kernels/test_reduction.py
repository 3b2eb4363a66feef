"""ember.kernels.reduction: the log-sum-exp sequence, written once (``shifted_log_sum_exp``) and
used by logsumexp, log_softmax, the cross entropy's NumPy path and CTC."""
import os
import re

import numpy as np
import pytest
import torch

import ember
from ember.kernels import ctc, nn, reduction

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_log_sum_exp_sequence_written_once():
    """No module restates log(sum(exp(...))): it lives in reduction.shifted_log_sum_exp."""
    pattern = re.compile(r"np\.log\(\s*np\.(sum|add\.reduce)\(\s*np\.exp\(")
    found = []
    for dirpath, _, files in os.walk(os.path.join(ROOT, "ember")):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(dirpath, f)
                with open(path) as fh:
                    if pattern.search(fh.read()):
                        found.append(os.path.relpath(path, ROOT))
    assert found == [] or found == [os.path.join("ember", "kernels", "reduction.py")], found


SLICES = [[0.0, 1.0, -2.0], [-np.inf, -np.inf, -np.inf], [np.inf, 1.0, -np.inf], [np.nan, 1.0, 2.0],
          [1e30, 1e30, -1e30], [-1e30, -3e30, -2e30]]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_logsumexp_and_ctc_lse_match_torch(dtype):
    x = np.array(SLICES, dtype)
    want = torch.logsumexp(torch.from_numpy(x), 1).numpy()
    got = ember.logsumexp(ember.tensor(x), 1).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, equal_nan=True)
    # CTC's elementwise lse over several arrays: the same function over a stacked axis
    np.testing.assert_allclose(ctc._lse(x[:, 0], x[:, 1], x[:, 2]), want, rtol=1e-6, equal_nan=True)


def test_log_softmax_and_cross_entropy_rows_match_torch():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((6, 70)) * 5).astype(np.float32)
    want = torch.log_softmax(torch.from_numpy(x), 1).numpy()
    np.testing.assert_allclose(nn.log_softmax(x, 1), want, rtol=1e-5, atol=1e-6)
    out = np.empty_like(x)
    nn._log_softmax_rows(out, x)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    lse = nn._lse_numpy(x)
    assert lse.dtype == np.float64
    np.testing.assert_allclose(lse, torch.logsumexp(torch.from_numpy(x).double(), 1).numpy(), rtol=1e-6)


def test_shifted_log_sum_exp_log_dtype():
    x = np.array([[1.0, 2.0, 3.0]], np.float32)
    s, log_sum = reduction.shifted_log_sum_exp(x, 1, np.max(x, 1, keepdims=True), log_dtype=np.float64)
    assert s.dtype == np.float32 and log_sum.dtype == np.float64 and log_sum.shape == (1, 1)


@pytest.mark.parametrize("values,dim,correction", [
    ([1.0], None, 1), ([[1.0], [2.0]], 1, 1), ([1.0, 2.0], None, 3), ([2.0, 2.0], None, 2),
    ([1.0, 2.0], None, 2.5), ([[]], 1, 1), ([np.inf, 1.0], None, 2), ([1 + 0j, 1 + 3j], None, 2),
    ([1 + 1j, 2 + 2j], None, 2), ([[1 + 1j, 1 + 1j]], 1, 2)])
def test_var_std_without_degrees_of_freedom_warn_as_torch(values, dim, correction):
    """A correction of at least the element count: torch's value (inf, NaN where there is no
    spread; a complex input's real and imaginary parts apart, NaN where one has no spread,
    where np.var gave inf) and torch's UserWarning for the caller's line, not NumPy's
    RuntimeWarning "Degrees of freedom <= 0 for slice"."""
    kw = {} if dim is None else {"dim": dim}
    for name in ("var", "std"):
        with pytest.warns(UserWarning) as log:
            want = getattr(torch, name)(torch.tensor(values), correction=correction, **kw)
        with pytest.warns(UserWarning) as got_log:
            got = getattr(ember, name)(ember.tensor(values), correction=correction, **kw)
        assert {str(w.message) for w in got_log} == {   # (torch: once per part of a complex)
            str(w.message).split(" (Triggered internally")[0] for w in log}
        assert [w.filename for w in got_log] == [__file__]
        assert not [w for w in got_log if issubclass(w.category, RuntimeWarning)]
        assert str(got.dtype)[6:] == str(want.dtype)[6:]
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_mean_of_no_elements_is_nan_silently():
    """torch's mean of no elements is NaN (NaN + NaN j for complex) without a warning; NumPy's
    warned "Mean of empty slice"."""
    import warnings
    for dtype in ("float32", "float16", "complex64"):
        for shape, dim in (((0,), None), ((0, 3), 0), ((2, 0), 1), ((2, 0), 0)):
            want = torch.zeros(shape, dtype=getattr(torch, dtype)).mean(*(() if dim is None
                                                                          else (dim,)))
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                got = ember.zeros(shape, dtype=getattr(ember, dtype)).mean(
                    *(() if dim is None else (dim,)))
            assert str(got.dtype)[6:] == str(want.dtype)[6:]
            np.testing.assert_array_equal(got.numpy(), want.numpy())


EMPTY_REDUCTIONS = {
    "max": lambda m, e, e2: m.max(e), "max dim0": lambda m, e, e2: m.max(e2, 0),
    "max method": lambda m, e, e2: e2.max(0), "max dim1 of (3, 0)": lambda m, e, e2: m.max(e2.t(), 1),
    "min": lambda m, e, e2: m.min(e), "min dim0": lambda m, e, e2: m.min(e2, 0),
    "amax": lambda m, e, e2: m.amax(e), "amax dim0": lambda m, e, e2: m.amax(e2, 0),
    "amax dims (0, 1)": lambda m, e, e2: m.amax(e2, (0, 1)), "amax dims ()": lambda m, e, e2: m.amax(e2, ()),
    "amin": lambda m, e, e2: e.amin(), "amin dim0": lambda m, e, e2: m.amin(e2, 0),
    "argmax": lambda m, e, e2: m.argmax(e), "argmax keepdim": lambda m, e, e2: m.argmax(e, keepdim=True),
    "argmax dim0": lambda m, e, e2: m.argmax(e2, 0), "argmin": lambda m, e, e2: e.argmin(),
    "argmin dim0": lambda m, e, e2: e2.argmin(0),
    "max dim0 out": lambda m, e, e2: m.max(e2, 0, out=(m.empty(0), m.empty(0, dtype=m.int64))),
}


@pytest.mark.parametrize("case", sorted(EMPTY_REDUCTIONS))
def test_reduction_without_identity_over_nothing_raises_torchs_error(case):
    """Over an empty dim: torch's IndexError "Expected reduction dim 0 to have non-zero size."
    (ember's DimensionError); over every element of an empty tensor: its RuntimeError (an
    IndexError for argmax/argmin), in its words."""
    fn = EMPTY_REDUCTIONS[case]
    with pytest.raises(Exception) as want:
        fn(torch, torch.zeros(0), torch.zeros(0, 3))
    with pytest.raises(Exception) as got:
        fn(ember, ember.zeros(0), ember.zeros(0, 3))
    builtin = next(c for c in type(want.value).__mro__ if c.__module__ == "builtins")
    assert isinstance(got.value, builtin)
    assert isinstance(got.value, IndexError) == isinstance(want.value, IndexError)
    assert str(want.value) in str(got.value)
    assert "float32[" in str(got.value)     # the input's dtype and shape


def test_reductions_over_a_nonempty_dim_of_an_empty_tensor_are_empty():
    for name in ("max", "amax", "argmax"):
        for lib in (torch, ember):
            r = getattr(lib, name)(lib.zeros(0, 3), 1)
            r = r[0] if isinstance(r, tuple) else r
            assert list(r.shape) == [0]


@pytest.mark.parametrize("shape,dim", [((256, 512), 1), ((256, 512), 0), ((4, 3000), -1),
                                       ((6, 7, 5), 1), ((5,), 0), ((3, 0, 4), 1)])
@pytest.mark.parametrize("numba", [True, False])
def test_cumsum_float32_equals_torchs_values_and_gradient(shape, dim, numba, monkeypatch):
    """float32 running sums accumulate in float64 and round once per output, as torch's CPU
    kernel: its values and its gradient (a reverse running sum), bit for bit, on the Numba
    kernels and on the NumPy path they replace while compiling (a float32 running sum drifts
    from torch's within a few hundred terms)."""
    if not numba:
        monkeypatch.setattr(reduction, "_scan_kernels", lambda dt: None)
    a = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    w = np.random.default_rng(4).standard_normal(shape).astype(np.float32)
    x = ember.tensor(a, requires_grad=True)
    y = ember.cumsum(x, dim)
    (y * ember.tensor(w)).sum().backward()
    xt = torch.tensor(a, requires_grad=True)
    yt = torch.cumsum(xt, dim)
    (yt * torch.tensor(w)).sum().backward()
    np.testing.assert_array_equal(y.detach().numpy(), yt.detach().numpy())
    np.testing.assert_array_equal(x.grad.numpy(), xt.grad.numpy())
    if shape == (4, 3000):
        assert not np.array_equal(np.cumsum(a, -1), yt.detach().numpy())


def test_cumsum_keeps_integer_and_requested_dtypes():
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    assert reduction.cumsum(a, 1).dtype == np.int64
    np.testing.assert_array_equal(reduction.cumsum(a, 1), np.cumsum(a, 1))
    got = reduction.cumsum(a.astype(np.float32), 0, dtype=ember.float64)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, np.cumsum(a.astype(np.float64), 0))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,dim,keepdim", [((16, 64, 128), (0, 1), False),
                                               ((16, 64, 128), (1, 0), True),
                                               ((1024, 40), 0, False),
                                               ((8, 32, 4, 5), (0, 1), False)])
def test_sum_over_leading_dims_matches_torch(dtype, shape, dim, keepdim):
    """A sum over the leading dims of a contiguous float array (its GEMV path) equals torch's
    sum up to rounding, with torch's shape and dtype; a column of -0.0 sums to +0.0 as in torch,
    inf and NaN propagate."""
    assert np.prod(shape) >= reduction.LEADING_SUM_GEMV_MIN
    a = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    a.reshape(-1, a.shape[-1])[:, 0] = -0.0
    a.reshape(-1, a.shape[-1])[3, 1] = np.inf
    a.reshape(-1, a.shape[-1])[5, 2] = np.nan
    got = reduction.sum(a, dim, keepdim)
    want = torch.from_numpy(a).sum(dim, keepdim=keepdim).numpy()
    assert got.shape == want.shape and got.dtype == want.dtype
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * shape[0])
    zeros = want == 0
    assert zeros.any() and np.isinf(want).any() and np.isnan(want).any()
    np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(want[zeros]))


def test_sum_over_other_dims_or_layouts_keeps_numpys_reduction():
    """Trailing dims, a transposed array and integer sums are NumPy's sum (an integer's in
    int64, as torch's)."""
    a = np.random.default_rng(1).standard_normal((64, 96)).astype(np.float32)
    np.testing.assert_array_equal(reduction.sum(a, 1), a.sum(1))
    np.testing.assert_array_equal(reduction.sum(a.T, 0), a.T.sum(0))
    i = np.arange(64 * 96, dtype=np.int32).reshape(64, 96)
    assert reduction.sum(i, 0).dtype == np.int64
    np.testing.assert_array_equal(reduction.sum(i, 0), i.sum(0, dtype=np.int64))
