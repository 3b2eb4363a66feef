"""Indexing ops (ember/ops/indexing.py) against torch: uint8 masks, masked_fill, gather and
scatter (reduce keyword, 0-d and empty indices), scatter_reduce, index_put/copy/fill, masked_scatter,
nonzero, indexing with ranges and lists, take/put and the scatters, index helpers."""
import importlib
import warnings

import numpy as np
import pytest
import torch

import ember
from ember.errors import EmberError
from tests.ops.helpers import t_of


def _run(lib, fn):
    """(result as a list or the exception's builtin class, number of warnings)."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            r = fn(lib)
            r = r.tolist()
        except Exception as e:  # noqa: BLE001 - compared with torch's
            r = [c for c in (IndexError, RuntimeError, TypeError, ValueError) if isinstance(e, c)]
    return r, len(w)


def _setitem(key, value):
    def f(m):
        y = m.arange(6).reshape(2, 3)
        y[key(m)] = value(m)
        return y
    return f


CASES = {
    "getitem mask": lambda m: (lambda x: x[(x > 25).to(m.uint8)])(m.arange(20, 30)),
    "getitem 2-d mask": lambda m: m.arange(6).reshape(2, 3)[
        m.tensor([[1, 0, 1], [0, 1, 1]], dtype=m.uint8)],
    "getitem mask after a slice": lambda m: m.arange(6).reshape(2, 3)[
        :, m.tensor([1, 0, 1], dtype=m.uint8)],
    "getitem 0-d byte": lambda m: m.arange(6).reshape(2, 3)[m.tensor(1, dtype=m.uint8)],
    "getitem 0-d zero byte": lambda m: m.arange(6).reshape(2, 3)[m.tensor(0, dtype=m.uint8)],
    "getitem mask shape mismatch": lambda m: m.arange(6).reshape(2, 3)[
        m.tensor([1, 0, 1], dtype=m.uint8)],
    "setitem rows": _setitem(lambda m: m.tensor([1, 0], dtype=m.uint8),
                             lambda m: m.tensor([[5, 6, 7]])),
    "setitem two masks": _setitem(lambda m: (m.tensor([1, 0], dtype=m.uint8),
                                             m.tensor([1, 0, 1], dtype=m.uint8)),
                                  lambda m: 5),
    "setitem one-element value": _setitem(lambda m: m.tensor([1, 0], dtype=m.uint8),
                                          lambda m: 5),
    "setitem one-element tensor": _setitem(lambda m: (slice(None), m.tensor([1, 0, 1],
                                                                           dtype=m.uint8)),
                                           lambda m: m.tensor([5])),
    "setitem 0-d byte": _setitem(lambda m: m.tensor(1, dtype=m.uint8), lambda m: 5),
    "index_put": lambda m: m.index_put(m.arange(6.), ((m.arange(6) > 2).to(m.uint8),),
                                       m.tensor([7., 8., 9.])),
    "index_put accumulate": lambda m: m.index_put(m.arange(6.), ((m.arange(6) > 2).to(m.uint8),),
                                                  m.tensor(5.), accumulate=True),
    "index_put one-element": lambda m: m.index_put(m.arange(6.), ((m.arange(6) > 2).to(m.uint8),),
                                                   m.tensor(5.)),
    "index_put other dtype": lambda m: m.index_put(m.zeros(3), (m.tensor([0, 1]),),
                                                   m.tensor([1.0, 2.0], dtype=m.float64)),
    "index_put_ long value": lambda m: m.zeros(3).index_put_((m.tensor([0]),), m.tensor(1)),
    "setitem casts": _setitem(lambda m: m.tensor([0, 1]), lambda m: m.tensor([1.5, 2.5])),
    "index_put_": lambda m: m.arange(6.).index_put_(((m.arange(6) > 2).to(m.uint8),),
                                                    m.tensor([7., 8., 9.])),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_uint8_index_is_a_mask_as_in_torch(name):
    assert _run(ember, CASES[name]) == _run(torch, CASES[name])


def test_uint8_ndarray_index_is_a_mask():
    x = ember.arange(4)
    with pytest.warns(UserWarning, match="uint8"):
        assert x[np.array([1, 0, 0, 1], np.uint8)].tolist() == [0, 3]


def test_uint8_mask_gradient_matches_bool_mask():
    x = ember.arange(6.).requires_grad_()
    with pytest.warns(UserWarning, match="uint8"):
        x[(x > 2).to(ember.uint8)].sum().backward()
    assert x.grad.tolist() == [0, 0, 0, 1, 1, 1]


def test_masked_fill_broadcasts_self_out_of_place():
    x = ember.randn(5, requires_grad=True)
    m = ember.tensor([[True, False, True, False, False]] * 3)
    y = x.masked_fill(m, 2.0)
    assert y.shape == (3, 5)
    y.sum().backward()
    assert x.grad.tolist() == [0.0, 3.0, 0.0, 3.0, 3.0]
    with pytest.raises(RuntimeError, match="masked_fill_"):
        ember.zeros(5).masked_fill_(m, 1.0)


@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")
def test_scatter_reduce_keyword_matches_torch_and_exports():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    x, s = rng.standard_normal((4, 3)), rng.standard_normal((2, 3))
    i = np.array([[0, 1, 2], [0, 0, 1]])
    for reduce in ("add", "multiply"):
        for src in (s, 2.5):
            ref = torch.tensor(x).scatter(0, torch.tensor(i), torch.tensor(src) if
                                          isinstance(src, np.ndarray) else src, reduce=reduce)
            got = ember.tensor(x).scatter(0, ember.tensor(i), ember.tensor(src) if
                                          isinstance(src, np.ndarray) else src, reduce=reduce)
            np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-12)
    X = ember.tensor(x, requires_grad=True)
    S = ember.tensor(s, requires_grad=True)
    gx, gs = ember.autograd.grad(ember.scatter(X, 0, ember.tensor(i), S, reduce="add").sum(),
                                 [X, S])
    assert gx.tolist() == np.ones((4, 3)).tolist() and gs.tolist() == np.ones((2, 3)).tolist()
    with pytest.raises(ember.UnsupportedError, match="multiply"):
        ember.autograd.grad(ember.scatter(X, 0, ember.tensor(i), S, reduce="multiply").sum(), [X])
    with pytest.raises(RuntimeError, match="reduce argument"):
        ember.scatter(ember.tensor(x), 0, ember.tensor(i), 1.0, reduce="max")
    ort = pytest.importorskip("onnxruntime")
    import io
    onnx_export = importlib.import_module("ember.onnx").export

    class M(ember.nn.Module):
        def forward(self, a, b):
            return a.scatter(0, ember.tensor(i), b, reduce="multiply")

    buf = io.BytesIO()
    onnx_export(M(), (ember.tensor(x), ember.tensor(s)), buf, opset_version=17)
    sess = ort.InferenceSession(buf.getvalue())
    names = [n.name for n in sess.get_inputs()]
    out = sess.run(None, dict(zip(names, (x, s))))[0]
    np.testing.assert_allclose(out, M()(ember.tensor(x), ember.tensor(s)).numpy(), rtol=1e-12)


def test_gather_scatter_zero_d_and_empty_index_and_cat_backward_with_empty():
    torch = pytest.importorskip("torch")
    assert ember.gather(ember.tensor(3.0), 0, ember.tensor([0])).tolist() == [3.0]
    assert ember.gather(ember.tensor(3.0), 0, ember.tensor(0)).shape == ()
    x = ember.randn(5, requires_grad=True)
    g = ember.gather(x, 0, ember.zeros(2, 0, dtype=ember.int64))
    assert g.shape == (2, 0)
    (gx,) = ember.autograd.grad(g.sum(), [x])
    assert gx.tolist() == [0.0] * 5
    assert float(ember.scatter_add(ember.tensor(3.0), 0, ember.tensor(0), ember.tensor(2.0))) == 5.0
    assert float(ember.scatter(ember.tensor(3.0), 0, ember.tensor(0), ember.tensor(2.0))) == 2.0
    a = ember.randn(5, 2, requires_grad=True)
    e = ember.zeros(0, requires_grad=True)
    y = ember.cat([e, a, e], dim=1)
    ga, ge = ember.autograd.grad((y * 2).sum(), [a, e])
    assert ga.tolist() == (2 * np.ones((5, 2))).tolist() and ge.shape == (0,)
    ref = torch.cat([torch.zeros(0), torch.ones(5, 2)], dim=1)
    assert tuple(ref.shape) == tuple(y.shape)


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_with_duplicates_and_ties_matches_torch(reduce, include_self):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    a = rng.standard_normal((3, 4))
    src = np.round(rng.standard_normal((3, 5)))       # rounded: ties among src values
    src[0, :] = 0.5
    a[0, 0] = 0.5                                        # a tie between self and src
    idx = np.array([[0, 0, 0, 2, 2], [1, 1, 3, 3, 3], [0, 1, 2, 3, 0]])
    x, s = t_of(a, grad=True), t_of(src, grad=True)
    tx, ts = (torch.tensor(v, requires_grad=True) for v in (a, src))
    out = x.scatter_reduce(1, t_of(idx), s, reduce, include_self=include_self)
    tout = tx.scatter_reduce(1, torch.tensor(idx), ts, reduce, include_self=include_self)
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-12)
    w = rng.standard_normal(out.shape)
    (out * t_of(w)).sum().backward()
    (tout * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(s.grad.numpy(), ts.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_scatter_reduce_inplace_and_errors():
    x = t_of(np.zeros(3))
    x.scatter_reduce_(0, ember.tensor([0, 0, 2]), t_of(np.array([1.0, 2.0, 3.0])), "sum")
    assert x.tolist() == [3.0, 0.0, 3.0]
    with pytest.raises(EmberError, match="reduce argument must be one of"):
        x.scatter_reduce(0, ember.tensor([0]), t_of(np.ones(1)), "max")
    with pytest.raises(RuntimeError, match="scatter_reduce"):   # torch's class
        x.scatter_reduce(0, ember.tensor([5]), t_of(np.ones(1)), "sum")


def test_index_put_accumulate_duplicates_and_gradient():
    x = t_of(np.zeros(4), grad=True)
    v = t_of(np.array([1.0, 2.0, 3.0]), grad=True)
    out = x.index_put((ember.tensor([1, 1, 3]),), v, accumulate=True)
    assert out.tolist() == [0.0, 3.0, 0.0, 3.0]
    (out * t_of(np.arange(4.0))).sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 2.0, 3.0] and v.grad.tolist() == [1.0, 1.0, 3.0]
    y = t_of(np.zeros((2, 2)))
    y.index_put_((ember.tensor([0, 0]), ember.tensor([1, 1])), t_of(np.array(2.0)), True)
    assert y.tolist() == [[0.0, 4.0], [0.0, 0.0]]


def test_index_copy_index_fill_inplace_and_errors():
    x = t_of(np.zeros((3, 2)))
    x.index_copy_(0, ember.tensor([2, 0]), t_of(np.array([[1.0, 2.0], [3.0, 4.0]])))
    assert x.tolist() == [[3.0, 4.0], [0.0, 0.0], [1.0, 2.0]]
    assert x.index_fill(1, ember.tensor([0]), -1.0).tolist() == [[-1, 4], [-1, 0], [-1, 2]]
    x.index_fill_(0, ember.tensor([1]), 7.0)
    assert x[1].tolist() == [7.0, 7.0]
    with pytest.raises(IndexError, match="index_fill"):
        x.index_fill(0, ember.tensor([3]), 0.0)
    with pytest.raises(EmberError, match="index_copy"):
        x.index_copy(0, ember.tensor([0]), t_of(np.ones((2, 2))))


def test_masked_scatter_order_and_errors():
    x = t_of(np.zeros((2, 3)))
    m = ember.tensor([[True, False, True], [False, True, False]])
    assert x.masked_scatter(m, t_of(np.arange(1.0, 6.0))).tolist() == [[1, 0, 2], [0, 3, 0]]
    x.masked_scatter_(ember.tensor([False, True, False]), t_of(np.array([9.0, 8.0])))
    assert x.tolist() == [[0, 9, 0], [0, 8, 0]]
    with pytest.raises(EmberError, match="at least 3 elements"):
        x.masked_scatter(m, t_of(np.ones(2)))


def test_nonzero_as_tuple():
    z = t_of(np.array([[0.0, 1.0], [2.0, 0.0]]))
    rows, cols = ember.nonzero(z, as_tuple=True)
    assert rows.tolist() == [0, 1] and cols.tolist() == [1, 0]
    assert z[z.nonzero(as_tuple=True)].tolist() == [1.0, 2.0]
    assert [t.tolist() for t in ember.tensor(3.0).nonzero(as_tuple=True)] == [[0]]
    assert ember.nonzero(z).shape == (2, 2)


def test_indexing_with_range_and_lists_matches_torch():
    torch = pytest.importorskip("torch")
    a = np.arange(12.0).reshape(3, 4)
    for key in [range(1, 3), range(2, -1, -2), [], [0, -1], [True, False, True],
                (range(2), [1, 3]), (slice(None), range(0, 4, 2)), ([[0, 1], [2, 2]],)]:
        np.testing.assert_array_equal(t_of(a)[key].numpy(), torch.tensor(a)[key].numpy())
    x, tx = t_of(a), torch.tensor(a)
    x[range(0, 2), [1, 2]] = 5.0
    tx[range(0, 2), [1, 2]] = 5.0
    np.testing.assert_array_equal(x.numpy(), tx.numpy())
    g = t_of(a, grad=True)
    g[range(1, 3)].sum().backward()
    assert g.grad.sum().item() == 8.0


def test_index_put_function_with_tensor_indices_gradient():
    x = t_of(np.zeros((5, 5)), grad=True)
    v = t_of(np.ones((1, 5)), grad=True)
    out = ember.index_put(x, (ember.tensor([1]),), v)
    assert out[1].tolist() == [1.0] * 5
    out.sum().backward()
    assert v.grad.shape == (1, 5) and x.grad[1].sum().item() == 0.0


def test_index_fill_tensor_value_gradient_and_masked_scatter_broadcast():
    x = t_of(np.arange(6.0).reshape(2, 3), grad=True)
    val = t_of(np.array(2.0), grad=True)
    out = x.index_fill(1, ember.tensor([0, 2, 2]), val)
    assert out.tolist() == [[2, 1, 2], [2, 4, 2]]
    out.sum().backward()
    assert val.grad.item() == 4.0 and x.grad.tolist() == [[0, 1, 0], [0, 1, 0]]
    y = t_of(np.zeros(3))
    m = ember.tensor([[True, False, False], [False, False, True]])
    assert ember.masked_scatter(y, m, t_of(np.array([1.0, 2.0]))).tolist() == [[1, 0, 0], [0, 0, 2]]


def test_zero_dim_scatter_reduce_index_select_index_add():
    x = t_of(np.array(1.5), grad=True)
    out = x.scatter_reduce(0, ember.tensor(0), t_of(np.array(2.0)), "amax")
    assert out.shape == () and out.item() == 2.0
    assert ember.index_select(x, 0, ember.tensor([0])).shape == ()
    s = ember.index_add(x, 0, ember.tensor([0]), t_of(np.array(1.0)))
    assert s.item() == 2.5
    s.backward()
    assert x.grad.item() == 1.0


def test_take_put_scatters_and_block_diag():
    x = t_of(np.arange(6.0).reshape(2, 3))
    assert ember.take(x, ember.tensor([[5, -6]])).tolist() == [[5.0, 0.0]]
    p = x.put(ember.tensor([0, 0]), t_of(np.array([1.0, 2.0])), accumulate=True)
    assert p.tolist() == [[3.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    with pytest.raises(IndexError, match="take"):
        ember.take(x, ember.tensor([6]))
    assert ember.select_scatter(x, t_of(np.zeros(3)), 0, -1).tolist() == [[0, 1, 2], [0, 0, 0]]
    assert ember.slice_scatter(x, t_of(np.zeros((2, 2))), 1, 0, None, 2).tolist() == \
        [[0, 1, 0], [0, 4, 0]]
    assert ember.diagonal_scatter(x, t_of(np.array([9.0, 9.0]))).tolist() == [[9, 1, 2], [3, 9, 5]]
    b = ember.block_diag(t_of(np.ones((1, 2))), t_of(np.array(2.0)))
    assert b.tolist() == [[1, 1, 0], [0, 0, 2]]
    assert ember.nonzero_static(x, size=7).shape == (7, 2)


def test_index_helpers_match_torch():
    torch = pytest.importorskip("torch")
    assert ember.broadcast_shapes((3, 1), (4,), 1) == torch.broadcast_shapes((3, 1), (4,), 1)
    with pytest.raises(EmberError, match="broadcast_shapes"):
        ember.broadcast_shapes((3,), (4,))
    for args in [(3, 4, 1), (4, 3, -1), (0, 2)]:
        assert ember.triu_indices(*args).tolist() == torch.triu_indices(*args).tolist()
        assert ember.tril_indices(*args).tolist() == torch.tril_indices(*args).tolist()
    got = ember.unravel_index(ember.tensor([5, 7, -1]), (2, 4))
    want = torch.unravel_index(torch.tensor([5, 7, -1]), (2, 4))
    assert [g.tolist() for g in got] == [w.tolist() for w in want]
    x = ember.zeros(2, 2)
    x.put_(ember.tensor([3]), ember.tensor([1.0]))
    assert x.tolist() == [[0.0, 0.0], [0.0, 1.0]]
    y = ember.zeros(3, 2)
    out = y.index_reduce(0, ember.tensor([0, 0, 2]), ember.ones(3, 2) * 2, "prod",
                         include_self=False)
    assert out.tolist() == [[4.0, 4.0], [0.0, 0.0], [2.0, 2.0]]


def test_scatter_reduce_mean_backward_follows_the_index_when_compiled():
    # the mean's counts were read from index's values in Python (a constant in a trace): a
    # compiled backward kept the first call's counts, and the second call's gradient with
    # another index was off (2x where counts differed); now they are ops on index
    torch = pytest.importorskip("torch")
    g = np.random.default_rng(0)
    x = g.standard_normal((3, 5))
    src = g.standard_normal((3, 4))
    f = ember.compile(lambda a, i, s: a.scatter_reduce(1, i, s, "mean", include_self=False))
    for idx in ([[0, 0, 1, 2], [4, 4, 4, 0], [1, 2, 3, 3]], [[0, 1, 2, 3], [4, 0, 4, 1],
                                                            [2, 2, 2, 2]]):
        a = ember.tensor(x, requires_grad=True)
        s = ember.tensor(src, requires_grad=True)
        f(a, ember.tensor(idx), s).pow(2).sum().backward()
        ta = torch.tensor(x, requires_grad=True)
        ts = torch.tensor(src, requires_grad=True)
        ta.scatter_reduce(1, torch.tensor(idx), ts, "mean", include_self=False).pow(2) \
            .sum().backward()
        np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=0, atol=1e-12)
        np.testing.assert_allclose(s.grad.numpy(), ts.grad.numpy(), rtol=0, atol=1e-12)


def test_put_with_a_traced_index_is_not_frozen_when_compiled():
    # put derived an int64 array from index's values and passed it to index_put: a trace held
    # the first call's index as a constant (the second call wrote at [0, 1] instead of [4, 5]);
    # put tells the tracer it reads index's values (a named graph break; eager runs)
    from ember.compiler.frontend import GraphBreakWarning
    x = ember.zeros(6, dtype=ember.float64)
    s = ember.tensor([1.0, 2.0], dtype=ember.float64)
    f = ember.compile(lambda x, i, s: x.put(i, s))
    with pytest.warns(GraphBreakWarning):
        for idx in ([0, 1], [4, 5], [-1, 2]):
            i = ember.tensor(idx)
            np.testing.assert_array_equal(f(x, i, s).numpy(), x.put(i, s).numpy())
    want = torch.zeros(6, dtype=torch.float64).put(torch.tensor([-1, 2]),
                                                   torch.tensor([1.0, 2.0], dtype=torch.float64))
    np.testing.assert_array_equal(x.put(ember.tensor([-1, 2]), s).numpy(), want.numpy())


@pytest.mark.parametrize("shape,wrap", [((7, 3), True), ((7, 3), False), ((3, 5), False),
                                        ((3, 3, 3), False), ((4, 4), True)])
def test_fill_diagonal_matches_torch_and_blocks_the_gradient_there(shape, wrap):
    res = []
    for L in (torch, ember):
        w = L.ones(shape, dtype=L.float64, requires_grad=True)
        y = w * 2.0
        assert y.fill_diagonal_(-1.5, wrap=wrap) is y
        y.sum().backward()
        res.append((y.detach().numpy(), w.grad.numpy()))
    np.testing.assert_array_equal(res[1][0], res[0][0])
    np.testing.assert_array_equal(res[1][1], res[0][1])
    for bad in ((3,), (2, 3, 2)):
        with pytest.raises(EmberError, match="fill_diagonal_"):
            ember.zeros(bad).fill_diagonal_(1.0)


def test_unravel_index_of_narrow_integer_indices_computes_in_int64_as_torch():
    idx = np.array([[3, 8, 13], [0, 5, 10]], np.uint8)
    for shape in ((4, 1 << 30), (2, 7), (16,)):
        want = torch.unravel_index(torch.tensor(idx), shape)
        got = ember.unravel_index(ember.tensor(idx), shape)
        assert [g.tolist() for g in got] == [w.tolist() for w in want]
        assert all(g.dtype == ember.int64 for g in got)


_ONE_VALUE_PUTS = {
    "bool mask, 0-d value": lambda m, z, k: z.index_put_((k,), m.tensor(1.0)),
    "bool mask, one-element value": lambda m, z, k: z.index_put_((k,), m.tensor([1.0])),
    "out of place": lambda m, z, k: z.index_put((k,), m.tensor(1.0)),
    "int destination": lambda m, z, k: z.long().index_put_((k,), m.tensor(1.5)),
    "accumulate": lambda m, z, k: z.index_put_((k,), m.tensor(1.0), accumulate=True),
    "long index": lambda m, z, k: z.index_put_((m.tensor([0, 2]),), m.tensor(1.0)),
}


@pytest.mark.parametrize("case", sorted(_ONE_VALUE_PUTS))
def test_index_put_of_one_value_through_a_bool_mask_casts_as_torch(case):
    """torch fills one value through one bool mask with masked_fill_, which casts; other
    index_put calls refuse a value of another dtype (float32 into float64 here)."""
    out = []
    for m in (torch, ember):
        z, k = m.zeros(3, dtype=m.float64), m.tensor([True, False, True])
        try:
            out.append(_ONE_VALUE_PUTS[case](m, z, k).tolist())
        except RuntimeError as e:
            assert "source and destination dtypes match" in str(e)
            out.append("refused")
    assert out[0] == out[1]


def test_integer_index_into_a_0_dim_tensor_raises_index_error_as_torch():
    """``loss.data[0]`` (code written for torch < 0.4, e.g. PyTorch-GAN's began.py) raises
    IndexError on torch and on ember, pointing to ``.item()``; None, ..., () and True still
    index a 0-dim tensor."""
    for lib in (torch, ember):
        x = lib.tensor(1.5)
        with pytest.raises(IndexError, match="invalid index of a 0-dim tensor.*item()"):
            x[0]
        with pytest.raises(IndexError, match="invalid index of a 0-dim tensor"):
            x.data[0]
        for key in (3, -1):
            with pytest.raises(IndexError):
                x[key]
    e, t = ember.tensor(1.5), torch.tensor(1.5)
    for key in (None, Ellipsis, (), True):
        assert tuple(e[key].shape) == tuple(t[key].shape), key


def test_scatter_inplace_writes_into_self_and_falls_back_where_it_must():
    """``scatter_`` without autograd writes into self's array (the one-hot idiom
    ``zeros(...).scatter_(-1, idx, 1)``: no copy back); a source sharing self's memory, a
    ``reduce`` and a bad index take the general path (its result and errors, nothing
    written)."""
    idx = ember.tensor(np.random.default_rng(0).integers(0, 100, (32, 64, 1)))
    x = ember.zeros((32, 64, 100), dtype=ember.int64)
    data = x._data
    assert x.scatter_(-1, idx, 1) is x and x._data is data
    np.testing.assert_array_equal(
        x.numpy(), torch.zeros((32, 64, 100), dtype=torch.int64).scatter_(
            -1, torch.from_numpy(idx.numpy()), 1).numpy())
    y = ember.tensor(np.arange(12.0).reshape(3, 4))
    ty = torch.tensor(np.arange(12.0).reshape(3, 4))
    i = [[1, 0, 3, 2], [0, 1, 2, 3], [3, 2, 1, 0]]
    y.scatter_(1, ember.tensor(i), y)                 # the source is self: read before written
    ty.scatter_(1, torch.tensor(i), ty.clone())
    np.testing.assert_array_equal(y.numpy(), ty.numpy())
    y.scatter_(1, ember.tensor(i), 2.0, reduce="add")
    ty.scatter_(1, torch.tensor(i), 2.0, reduce="add")
    np.testing.assert_array_equal(y.numpy(), ty.numpy())
    before = y.numpy().copy()
    with pytest.raises(Exception, match="out of bounds|index"):
        y.scatter_(1, ember.tensor([[0, 9]]), 1.0)
    np.testing.assert_array_equal(y.numpy(), before)
