"""Sorting, selection, scans and their reductions, beyond the spec samples: named
results, NaN order, ties, gradients through zeros, 0-d and empty inputs, errors, ONNX export."""
import io

import numpy as np
import pytest

import ember
from ember.autograd.gradcheck import gradcheck, gradgradcheck
from ember.errors import EmberRuntimeError

torch = pytest.importorskip("torch")

NAN = float("nan")


def _t(a, grad=False, dtype=np.float64):
    return ember.tensor(np.asarray(a, dtype), requires_grad=grad)


def _tt(a, grad=False, dtype=np.float64):
    return torch.tensor(np.asarray(a, dtype), requires_grad=grad)


# ---------------------------------------------------------------- named results, methods
@pytest.mark.parametrize("name,args", [("sort", ()), ("topk", (2,)), ("kthvalue", (2,)),
                                       ("median", (1,)), ("nanmedian", (1,)), ("mode", ()),
                                       ("cummax", (1,)), ("cummin", (1,))])
def test_named_results_function_and_method(name, args):
    x = np.array([[3., 1., 2.], [0., 5., 4.]])
    r = getattr(ember, name)(_t(x), *args)
    m = getattr(_t(x), name)(*args)
    tr = getattr(torch, name)(_tt(x), *args)
    assert type(r).__name__ == name and r.__class__.__module__ == "ember.return_types"
    values, indices = r
    assert values is r.values and indices is r.indices
    for got in (r, m):
        np.testing.assert_array_equal(got.values.numpy(), tr.values.numpy())
        np.testing.assert_array_equal(got.indices.numpy(), tr.indices.numpy())
        assert got.indices.dtype == ember.int64


def test_sort_nan_order_and_stable_ties():
    x = [3., 1., NAN, 1., 2., 3., 3., 1.]
    for desc in (False, True):
        r, tr = ember.sort(_t(x), descending=desc, stable=True), torch.sort(
            _tt(x), descending=desc, stable=True)
        np.testing.assert_array_equal(r.values.numpy(), tr.values.numpy())
        np.testing.assert_array_equal(r.indices.numpy(), tr.indices.numpy())
    np.testing.assert_array_equal(ember.argsort(_t(x), descending=True).numpy(),
                                  torch.argsort(_tt(x), descending=True, stable=True).numpy())


def test_topk_smallest_and_nan_largest():
    x = [3., 1., NAN, 0.5, 2.]
    r = ember.topk(_t(x), 2)
    assert np.isnan(r.values.numpy()[0]) and r.indices.tolist() == [2, 0]
    r = ember.topk(_t(x), 3, largest=False)
    assert r.values.tolist() == [0.5, 1., 2.] and r.indices.tolist() == [3, 1, 4]


def test_median_is_the_lower_median_and_nan_rules():
    assert ember.median(_t([4., 1., 3., 2.])).item() == 2.0
    assert np.isnan(ember.median(_t([1., NAN, 0.])).item())
    assert ember.nanmedian(_t([1., NAN, 0., 7.])).item() == 1.0
    r = ember.nanmedian(_t([[NAN, NAN, NAN], [1., NAN, 2.]]), 1)
    assert np.isnan(r.values.numpy()[0]) and r.values.numpy()[1] == 1.0
    assert r.indices.tolist()[1] == 0
    assert np.isnan(ember.median(ember.tensor([])).item())


def test_mode_ties_take_smallest_value_last_index():
    x = [[2., 1., 2., 1.], [1., 2., 3., 4.], [7., 7., 0., 7.]]
    r, tr = ember.mode(_t(x), 1), torch.mode(_tt(x), 1)
    assert r.values.tolist() == tr.values.tolist() == [1., 1., 7.]
    assert r.indices.tolist() == tr.indices.tolist()


@pytest.mark.parametrize("fn,args", [("sort", (0,)), ("topk", (1,)), ("kthvalue", (1,)),
                                     ("median", (0,)), ("mode", (0,)), ("cummax", (0,)),
                                     ("cumprod", (0,)), ("logcumsumexp", (0,))])
def test_zero_dim_inputs(fn, args):
    x = _t(2.5, grad=True)
    out = getattr(ember, fn)(x, *args)
    v = out[0] if isinstance(out, tuple) else out
    tout = getattr(torch, fn)(_tt(2.5), *args)
    tv = tout[0] if isinstance(tout, tuple) else tout
    assert v.shape == tuple(tv.shape) and v.item() == tv.item()
    v.backward()
    assert x.grad.item() == 1.0


def test_empty_inputs():
    x = ember.zeros(0, 3)
    assert ember.sort(x, 0).values.shape == (0, 3)
    assert ember.topk(x, 0, 0).indices.shape == (0, 3)
    assert ember.cummax(x, 0).values.shape == (0, 3)
    assert ember.logcumsumexp(x, 1).shape == (0, 3)


@pytest.mark.parametrize("call,match", [
    (lambda x: ember.topk(x, 4), "topk"), (lambda x: ember.kthvalue(x, 0), "kthvalue"),
    (lambda x: ember.sort(x, 2), "sort"), (lambda x: ember.median(ember.zeros(0), 0), "median"),
    (lambda x: ember.mode(x, -3), "mode"), (lambda x: ember.cummin(x, 1), "cummin")])
def test_errors_name_the_op(call, match):
    with pytest.raises(ember.EmberError, match=match):
        call(ember.randn(3))


# ---------------------------------------------------------------- gradients
def test_selection_gradients_scatter_back_through_indices():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 5))
    seed = rng.standard_normal((4, 2))
    for name, args in (("topk", (2, 1)), ("sort", (1,))):
        a, b = _t(x, True), _tt(x, True)
        va, vb = getattr(ember, name)(a, *args).values, getattr(torch, name)(b, *args).values
        s = seed if va.shape == (4, 2) else rng.standard_normal(va.shape)
        va.backward(_t(s))
        vb.backward(_tt(s))
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy())


@pytest.mark.parametrize("x", [
    [[2., 0., 3., 0.5, 4.], [0., 1.5, 2., 0., 3.], [1., 2., 3., 4., 0.]],
    [[0., 0., 2.], [1., 0., 0.]]])
def test_cumprod_gradient_with_zeros_matches_torch(x):
    a, b = _t(x, True), _tt(x, True)
    seed = np.random.default_rng(1).standard_normal(np.shape(x))
    ember.cumprod(a, 1).backward(_t(seed))
    torch.cumprod(b, 1).backward(_tt(seed))
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-12, atol=1e-12)
    assert gradcheck(lambda t: ember.cumprod(t, 1), [_t(x, True)])
    assert gradgradcheck(lambda t: ember.cumprod(t, 1), [_t(x, True)])


def test_cummax_gradient_with_ties_matches_torch():
    x = [1., 3., 3., 2., 5., 5.]
    a, b = _t(x, True), _tt(x, True)
    seed = np.arange(1., 7.)
    ember.cummax(a, 0).values.backward(_t(seed))
    torch.cummax(b, 0).values.backward(_tt(seed))
    np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())


def test_logcumsumexp_large_values_and_zero_grads():
    x = [1000., 1001., -1000., 3.]
    a, b = _t(x, True), _tt(x, True)
    np.testing.assert_allclose(ember.logcumsumexp(a, 0).detach().numpy(),
                               torch.logcumsumexp(b, 0).detach().numpy())
    seed = [0., 1., 0., -2.]
    ember.logcumsumexp(a, 0).backward(_t(seed))
    torch.logcumsumexp(b, 0).backward(_tt(seed))
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-12)
    # second order stays finite where the incoming gradient is zero
    y = _t([0.3, -1.2, 0.8], True)
    gy = _t([0., 1., 0.], True)
    (g,) = ember.autograd.grad(ember.logcumsumexp(y, 0), y, gy, create_graph=True)
    (gg,) = ember.autograd.grad(g.sum(), gy)
    assert np.all(np.isfinite(gg.detach().numpy()))


def test_noncontiguous_sort_and_cummin():
    base = np.random.default_rng(2).standard_normal((5, 4))
    x = ember.tensor(base).t()
    np.testing.assert_array_equal(ember.sort(x, 1).values.numpy(), np.sort(base.T, 1))
    np.testing.assert_array_equal(ember.cummin(x, 1).values.numpy(),
                                  np.minimum.accumulate(base.T, 1))


# ---------------------------------------------------------------- ONNX export
def test_sort_topk_argsort_export_as_topk():
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    import ember.onnx

    class M(ember.nn.Module):
        def forward(self, x):
            v, i = ember.sort(x, 1, descending=True)
            t = ember.topk(x, 2, 0, largest=False)
            return v, i, t.values, t.indices, ember.argsort(x, 0), ember.msort(x)

    x = ember.randn(4, 5)
    buf = io.BytesIO()
    ember.onnx.export(M(), (x,), buf, opset_version=17)
    model = onnx.load_from_string(buf.getvalue())
    assert {n.op_type for n in model.graph.node} >= {"TopK"}
    sess = ort.InferenceSession(buf.getvalue())
    outs = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})
    for got, want in zip(outs, M()(x)):
        np.testing.assert_allclose(got, want.numpy())


# ---------------------------------------------------------------- dtype= of reductions
@pytest.mark.parametrize("name,args", [("sum", ()), ("mean", ()), ("prod", ()), ("cumsum", (0,)),
                                       ("cumprod", (0,))])
def test_reduction_dtype_keyword_takes_ember_dtypes_and_grad_keeps_input_dtype(name, args):
    x = ember.tensor([0.5, -2.0, 3.0], requires_grad=True)
    y = getattr(ember, name)(x, *args, dtype=ember.float64)
    tx = torch.tensor([0.5, -2.0, 3.0], requires_grad=True)
    ty = getattr(torch, name)(tx, *args, dtype=torch.float64)
    assert y.dtype == ember.float64
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy())
    y.sum().backward()
    ty.sum().backward()
    assert x.grad.dtype == ember.float32
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)


# ---------------------------------------------------------------- var_mean, quantile, nan*
@pytest.mark.parametrize("args,kwargs", [((), {}), ((1,), {}), ((1, False), {}), ((False,), {}),
                                         ((0, True, True), {}), ((), {"correction": 0}),
                                         (((0, 1),), {"correction": 2, "keepdim": True})])
def test_var_mean_std_mean_overloads_match_torch(args, kwargs):
    x = np.random.default_rng(3).standard_normal((3, 4))
    for name in ("var_mean", "std_mean"):
        got, want = getattr(ember, name)(_t(x), *args, **kwargs), getattr(torch, name)(
            _tt(x), *args, **kwargs)
        assert isinstance(got, tuple) and len(got) == 2
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-12)


@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
@pytest.mark.parametrize("dim,keepdim", [(None, False), (None, True), (1, False), (0, True)])
def test_quantile_modes_and_shapes_match_torch(interpolation, dim, keepdim):
    x = np.random.default_rng(4).standard_normal((4, 6))
    x[1, 2] = np.nan
    q = np.array([0.0, 0.25, 0.5, 0.9, 1.0])
    for name in ("quantile", "nanquantile"):
        for qq in (0.4, q):
            eq = _t(qq) if isinstance(qq, np.ndarray) else qq
            tq = _tt(qq) if isinstance(qq, np.ndarray) else qq
            got = getattr(ember, name)(_t(x), eq, dim, keepdim, interpolation=interpolation)
            want = getattr(torch, name)(_tt(x), tq, dim, keepdim, interpolation=interpolation)
            assert got.shape == tuple(want.shape)
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, equal_nan=True)


def test_nanquantile_all_nan_slice_and_quantile_gradient_through_q():
    x = _t([[np.nan, np.nan], [1., 3.]])
    assert np.isnan(ember.nanquantile(x, 0.5, 1).numpy()[0])
    a, q = _t([[0.3, -1.0, 2.0, 0.5]], True), _t([0.2, 0.7], True)
    ta, tq = _tt([[0.3, -1.0, 2.0, 0.5]], True), _tt([0.2, 0.7], True)
    ember.quantile(a, q, 1).sum().backward()
    torch.quantile(ta, tq, 1).sum().backward()
    np.testing.assert_allclose(q.grad.numpy(), tq.grad.numpy())
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy())


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "int64", "bool"])
@pytest.mark.parametrize("name", ["quantile", "nanquantile"])
def test_quantile_refuses_other_dtypes_with_runtime_error_like_torch(name, dtype):
    """torch takes float32/float64 only and raises RuntimeError (ember raised TypeError, and
    computed float16; found by tests/differential)."""
    with pytest.raises(RuntimeError) as want:
        getattr(torch, name)(torch.ones(3, dtype=getattr(torch, dtype)), 0.5)
    with pytest.raises(EmberRuntimeError, match=f"{name}: input tensor must be either float "
                                                "or double dtype") as got:
        getattr(ember, name)(ember.ones(3, dtype=getattr(ember, dtype)), 0.5)
    assert not isinstance(got.value, TypeError) and "float or double" in str(want.value)


@pytest.mark.parametrize("call,match", [
    (lambda: ember.quantile(ember.randn(3), 1.5), "q values"),
    (lambda: ember.quantile(ember.randn(3), ember.tensor([0.5], dtype=ember.float64)),
     "same dtype"),
    (lambda: ember.quantile(ember.arange(3), 0.5), "float"),
    (lambda: ember.quantile(ember.randn(3), 0.5, interpolation="cubic"), "interpolation"),
    (lambda: ember.quantile(ember.randn(3), 0.5, 1), "out of range"),
    (lambda: ember.nanmean(ember.arange(3)), "nanmean"),
    (lambda: ember.aminmax(ember.zeros(0)), "aminmax"),
    (lambda: ember.var_mean(ember.randn(3), unbiased=True, correction=1), "var_mean")])
def test_reduction_errors_name_the_op(call, match):
    with pytest.raises(ember.EmberError, match=match):
        call()


def test_nansum_nanmean_gradient_is_zero_at_nans():
    x = [[1., NAN, 2.], [NAN, NAN, 4.]]
    for name in ("nansum", "nanmean"):
        a, b = _t(x, True), _tt(x, True)
        getattr(ember, name)(a, 1).sum().backward()
        getattr(torch, name)(b, 1).sum().backward()
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy())


def test_aminmax_named_and_count_nonzero_dims():
    x = np.array([[1., 0., 3.], [0., 0., 2.]])
    r, tr = ember.aminmax(_t(x), dim=0, keepdim=True), torch.aminmax(_tt(x), dim=0, keepdim=True)
    assert type(r).__name__ == "aminmax" and r.min.shape == (1, 3)
    np.testing.assert_array_equal(_t(x).aminmax().max.numpy(), tr.max.max().numpy())
    for dim in (None, 0, 1, (0, 1)):
        np.testing.assert_array_equal(ember.count_nonzero(_t(x), dim).numpy(),
                                      torch.count_nonzero(_tt(x), dim).numpy())


def test_aminmax_empty_other_dim_is_fine_reduced_empty_dim_is_an_error():
    r = ember.aminmax(ember.zeros(5, 0, 5), dim=0)
    assert r.min.shape == (0, 5) and r.max.shape == (0, 5)
    with pytest.raises(ember.EmberError, match="aminmax"):
        ember.aminmax(ember.zeros(5, 0, 5), dim=1)


# ---------------------------------------------------------------- unique, search, isin, histc
@pytest.mark.parametrize("flags", [(False, False), (True, False), (False, True), (True, True)])
def test_unique_and_unique_consecutive_return_what_was_asked(flags):
    inv, cnt = flags
    x = np.array([[3, 1, 3], [1, 1, 2], [3, 1, 3]])
    for name, kw in (("unique", {}), ("unique", {"dim": 0}), ("unique", {"dim": 1}),
                     ("unique_consecutive", {}), ("unique_consecutive", {"dim": 0})):
        got = getattr(ember, name)(_t(x, dtype=np.int64), return_inverse=inv,
                                   return_counts=cnt, **kw)
        want = getattr(torch, name)(_tt(x, dtype=np.int64), return_inverse=inv,
                                    return_counts=cnt, **kw)
        got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == tuple(w.shape) and g.dtype == ember.int64
            np.testing.assert_array_equal(g.numpy(), w.numpy())
    m = _t(x, dtype=np.int64).unique(return_counts=True)
    assert m[1].tolist() == [4, 1, 4]


def test_unique_of_noncontiguous_and_empty_slices():
    base = np.array([[1., 2.], [1., 3.], [1., 2.]])
    x = ember.tensor(base).t()
    np.testing.assert_array_equal(ember.unique(x, dim=1).numpy(),
                                  torch.unique(torch.tensor(base).t(), dim=1).numpy())
    r = ember.unique(ember.zeros(0, 4), dim=0, return_counts=True)
    t = torch.unique(torch.zeros(0, 4), dim=0, return_counts=True)
    assert r[0].shape == tuple(t[0].shape) and r[1].tolist() == t[1].tolist()
    with pytest.raises(ember.EmberError, match="unique.*0 sized"):
        ember.unique(ember.zeros(4, 0), dim=0)


def test_searchsorted_batched_sorter_and_side_conflict():
    seq = np.array([[5., 1., 3.], [2., 6., 4.]])
    sorter = np.argsort(seq, 1)
    v = np.array([[3., 0.5], [6., 4.5]])
    got = ember.searchsorted(_t(seq), _t(v), sorter=ember.tensor(sorter), side="right")
    want = torch.searchsorted(_tt(seq), _tt(v), sorter=torch.tensor(sorter), side="right")
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    with pytest.raises(ember.EmberError, match="searchsorted.*opposites"):
        ember.searchsorted(_t([1., 2.]), _t([1.]), right=True, side="left")
    with pytest.raises(ember.EmberError, match="searchsorted.*boundaries"):
        ember.searchsorted(_t(seq), _t([1., 2.]))
    with pytest.raises(ember.EmberError, match="bucketize.*1 dimension"):
        ember.bucketize(_t([1.]), _t(seq))


def test_histc_matches_torch_on_random_data_and_rejects_bad_arguments():
    x = np.random.default_rng(5).standard_normal(1000).astype(np.float32)
    for args in ((), (17,), (10, -1.0, 1.0), (3, 0.5, 0.5)):
        np.testing.assert_array_equal(ember.histc(ember.tensor(x), *args).numpy(),
                                      torch.histc(torch.tensor(x), *args).numpy())
    assert ember.histc(ember.tensor(x)).dtype == ember.float32
    with pytest.raises(ember.EmberError, match="histc"):
        ember.histc(ember.tensor([1., 2.]), 4, 3.0, 1.0)
    with pytest.raises(ember.EmberError, match="histc"):
        ember.histc(ember.tensor([1, 2]), 4)


def test_isin_scalars_and_invert():
    assert ember.isin(ember.tensor([1, 2, 3]), 2).tolist() == [False, True, False]
    assert ember.isin(2, ember.tensor([1, 2])).item() is True
    got = ember.isin(ember.tensor([1, 2]), ember.tensor([2]), invert=True)
    assert got.tolist() == [True, False]


def test_prod_of_zero_dim_zero_has_a_zero_dim_gradient():
    for v in (0.0, 2.0):
        x = ember.tensor(v, requires_grad=True)
        ember.prod(x).backward()
        assert x.grad.shape == () and x.grad.item() == 1.0


def test_traced_nanquantile_follows_new_nan_positions():
    import warnings

    import ember.jit

    def f(x):
        return ember.nanquantile(x, 0.5, 1) + ember.quantile(x, 0.25, 1)

    a = np.array([[1., NAN, 3., 4.], [2., 5., 6., 0.]])
    b = np.array([[1., 2., 3., 4.], [NAN, NAN, 6., 0.]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no value of the input is read in Python
        tf = ember.jit.trace(f, (ember.tensor(a),))
    for x in (a, b):
        want = torch.nanquantile(torch.tensor(x), 0.5, 1) + torch.quantile(torch.tensor(x), 0.25, 1)
        np.testing.assert_allclose(tf(ember.tensor(x)).numpy(), want.numpy(), equal_nan=True)


def test_out_keyword_is_written_not_ignored():
    x = ember.tensor([3.0, 1.0, 2.0])
    out = (ember.empty(3), ember.empty(3, dtype=ember.int64))
    r = ember.sort(x, out=out)
    assert r.values is out[0] and out[0].tolist() == [1, 2, 3] and out[1].tolist() == [1, 2, 0]
    out = (ember.empty(()), ember.empty((), dtype=ember.int64))
    ember.median(x, 0, out=out)
    assert out[0].item() == 2 and out[1].item() == 2


@pytest.mark.parametrize("opset", [13, 18])
def test_cumprod_and_unique_export(opset):
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    import ember.onnx

    def f(x, i):
        u, inv, cnt = ember.unique(i, return_inverse=True, return_counts=True)
        return ember.cumprod(x, 0), ember.cumprod(x, 1), u, inv, cnt

    x = ember.tensor([[1.5, 0., -2.], [2., 3., 0.5], [-1., 2., 2.]])
    i = ember.tensor([[3, 1, 3], [0, 1, 1]])
    buf = io.BytesIO()
    ember.onnx.export(f, (x, i), buf, opset_version=opset)
    sess = ort.InferenceSession(buf.getvalue())
    names = [n.name for n in sess.get_inputs()]
    got = sess.run(None, dict(zip(names, (x.numpy(), i.numpy()))))
    for g, w in zip(got, f(x, i)):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-6)


@pytest.mark.parametrize("name", ["median", "nanmedian", "max", "min"])
def test_full_reduction_gradient_with_nans_is_split_among_the_nans(name):
    x = [1., 2., NAN, 2., NAN]
    a, b = _t(x, True), _tt(x, True)
    getattr(ember, name)(a).backward()
    getattr(torch, name)(b).backward()
    np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())
