"""Shape and indexing ops: views, edge cases and errors the spec samples do not reach."""
import numpy as np
import pytest

import ember
from ember.errors import EmberError


def _t(a, grad=False):
    t = ember.from_numpy(np.array(a, order="C"))
    return t.requires_grad_(True) if grad else t


def test_diagonal_is_a_writable_view_sharing_the_version_counter():
    x = _t(np.arange(12.0).reshape(3, 4))
    d = x.diagonal(1)
    assert d.tolist() == [1.0, 6.0, 11.0]
    v = x._version
    d.mul_(0)
    assert x[0, 1].item() == 0 and x[2, 3].item() == 0 and x._version > v
    assert np.shares_memory(d._data, x._data)


def test_diagonal_non_contiguous_and_batched_against_numpy():
    a = np.random.default_rng(0).standard_normal((4, 3, 5))
    x = _t(a).transpose(0, 2)           # (5, 3, 4), non-contiguous
    for off, d1, d2 in [(0, 0, 1), (1, -1, 0), (-2, 2, 0), (7, 0, 1)]:
        np.testing.assert_array_equal(ember.diagonal(x, off, d1, d2).numpy(),
                                      np.diagonal(a.transpose(2, 1, 0), off, d1 % 3, d2 % 3))


def test_diag_embed_and_diag_round_trip():
    v = _t(np.array([1.0, 2.0, 3.0]))
    m = ember.diag(v, -1)
    assert m.shape == (4, 4) and ember.diag(m, -1).tolist() == [1.0, 2.0, 3.0]
    assert ember.diagflat(_t(np.ones((2, 2)))).shape == (4, 4)
    assert ember.diag_embed(_t(np.ones((2, 3))), 1, 0, 2).shape == (4, 2, 4)


def test_diagonal_errors_name_the_op():
    with pytest.raises(EmberError, match="diagonal"):
        ember.diagonal(_t(np.ones(3)))
    with pytest.raises(EmberError, match="cannot be identical"):
        ember.diagonal(_t(np.ones((2, 2))), 0, 1, -1)
    with pytest.raises(EmberError, match="diag"):
        ember.diag(_t(np.ones((2, 2, 2))))


def test_movedim_select_are_views():
    x = _t(np.arange(24.0).reshape(2, 3, 4))
    m = ember.movedim(x, (0, 1), (2, 0))
    assert m.shape == (3, 4, 2) and np.shares_memory(m._data, x._data)
    assert ember.moveaxis(x, -1, 0).shape == (4, 2, 3)
    s = x.select(1, -1)
    assert s.shape == (2, 4) and np.shares_memory(s._data, x._data)
    s.fill_(-1.0)
    assert (x[:, 2] == -1.0).all().item()
    with pytest.raises(IndexError, match="select"):
        x.select(1, 3)
    with pytest.raises(EmberError, match="movedim"):
        ember.movedim(x, (0, 1), (1,))


def test_atleast_identity_and_sequences():
    x = _t(np.ones((2, 3)))
    assert ember.atleast_1d(x) is x and ember.atleast_2d(x) is x
    a, b = ember.atleast_3d(_t(np.float64(1.0)), _t(np.ones(3)))
    assert a.shape == (1, 1, 1) and b.shape == (1, 3, 1)
    assert isinstance(ember.atleast_1d([x]), tuple)


def test_stacks_and_broadcast():
    a, b = _t(np.arange(3.0)), _t(np.arange(3.0, 6.0))
    assert ember.hstack([a, b]).tolist() == [0, 1, 2, 3, 4, 5]
    assert ember.vstack([a, b]).shape == (2, 3)
    assert ember.dstack([a, b]).shape == (1, 3, 2)
    assert ember.column_stack([a, b]).tolist() == [[0, 3], [1, 4], [2, 5]]
    x, y = ember.broadcast_tensors(_t(np.ones((3, 1))), _t(np.ones(4)))
    assert x.shape == y.shape == (3, 4)
    with pytest.raises(EmberError, match="broadcast"):
        ember.broadcast_tensors(_t(np.ones(3)), _t(np.ones(4)))
    assert ember.broadcast_to(a, (2, 3)).shape == (2, 3)


def test_meshgrid_indexing_and_warning():
    x, y = _t(np.arange(3.0)), _t(np.arange(2.0))
    gx, gy = ember.meshgrid(x, y, indexing="xy")
    assert gx.shape == (2, 3) and gx[1].tolist() == [0, 1, 2] and gy[:, 0].tolist() == [0, 1]
    with pytest.warns(UserWarning, match="indexing"):
        gx, gy = ember.meshgrid(x, y)
    assert gx.shape == (3, 2)
    with pytest.raises(EmberError, match="indexing"):
        ember.meshgrid(x, y, indexing="yx")


def test_rot90_and_take_along_dim_match_numpy():
    a = np.arange(12.0).reshape(3, 4)
    for k in (-3, -1, 0, 1, 2, 5):
        np.testing.assert_array_equal(ember.rot90(_t(a), k).numpy(), np.rot90(a, k))
    with pytest.raises(EmberError, match="rot90"):
        ember.rot90(_t(a), 1, (0, 0))
    idx = np.argsort(a, axis=1)[:, ::-1].copy()
    np.testing.assert_array_equal(ember.take_along_dim(_t(a), _t(idx), 1).numpy(),
                                  np.take_along_axis(a, idx, 1))
    assert ember.take_along_dim(_t(a), _t(np.array([11, 0]))).tolist() == [11.0, 0.0]


def test_matrix_properties():
    x = _t(np.arange(6.0).reshape(2, 3))
    assert x.H.shape == x.mT.shape == x.mH.shape == x.T.shape == (3, 2)
    b = _t(np.ones((4, 2, 3)))
    assert b.mT.shape == b.mH.shape == (4, 3, 2)
    with pytest.raises(EmberError, match="mH"):
        _t(np.ones(3)).mH
    with pytest.raises(EmberError, match="H is only supported"):
        b.H


def test_unfold_is_a_view_of_overlapping_windows():
    x = _t(np.arange(10.0).reshape(2, 5))
    u = x.unfold(1, 3, 2)
    assert u.shape == (2, 2, 3) and u[1, 1].tolist() == [7.0, 8.0, 9.0]
    assert np.shares_memory(u._data, x._data)
    nc = _t(np.arange(10.0).reshape(2, 5).T).t()         # non-contiguous (2, 5)
    np.testing.assert_array_equal(nc.unfold(1, 3, 2).numpy(), u.numpy())
    with pytest.raises(EmberError, match="unfold.*size"):
        x.unfold(1, 6, 1)
    with pytest.raises(EmberError, match="step"):
        x.unfold(1, 2, 0)


def test_unfold_gradient_adds_overlaps():
    x = _t(np.arange(5.0), grad=True)
    x.unfold(0, 3, 1).sum().backward()
    assert x.grad.tolist() == [1.0, 2.0, 3.0, 2.0, 1.0]


def test_repeat_interleave_forms_and_errors():
    x = _t(np.array([[1.0, 2.0], [3.0, 4.0]]))
    assert x.repeat_interleave(2).tolist() == [1, 1, 2, 2, 3, 3, 4, 4]
    assert ember.repeat_interleave(x, ember.tensor([1, 2]), dim=0).tolist() == \
        [[1, 2], [3, 4], [3, 4]]
    assert ember.repeat_interleave(ember.tensor([1, 0, 2])).tolist() == [0, 2, 2]
    with pytest.raises(EmberError, match="same size as input"):
        ember.repeat_interleave(x, ember.tensor([1, 2, 3]), dim=1)
    with pytest.raises(EmberError, match="negative"):
        ember.repeat_interleave(x, ember.tensor([1, -1]), dim=1)
    with pytest.raises(EmberError, match="output_size"):
        ember.repeat_interleave(x, 2, dim=0, output_size=3)


def test_nan_to_num_values_gradient_and_inplace():
    a = np.array([np.nan, np.inf, -np.inf, 1.5], np.float32)
    out = ember.nan_to_num(_t(a))
    f = np.finfo(np.float32)
    assert out.tolist() == [0.0, float(f.max), float(f.min), 1.5]
    assert ember.nan_to_num(_t(a), nan=1.0, posinf=2.0, neginf=-2.0).tolist() == [1, 2, -2, 1.5]
    x = _t(a, grad=True)
    x.nan_to_num().sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0, 1.0]
    y = _t(a)
    assert y.nan_to_num_(nan=3.0) is y and y[0].item() == 3.0


def test_isclose_allclose():
    a = _t(np.array([1.0, np.nan, 2.0]))
    b = _t(np.array([1.0 + 1e-9, np.nan, 2.1]))
    assert ember.isclose(a, b).tolist() == [True, False, False]
    assert ember.isclose(a, b, equal_nan=True).tolist() == [True, True, False]
    assert ember.allclose(a, a, equal_nan=True) is True and ember.allclose(a, b) is False
    with pytest.raises(EmberError, match="same dtype"):
        ember.isclose(a, _t(np.array([1.0, 2.0, 3.0], np.float32)))


def test_equal_matches_torch():
    torch = pytest.importorskip("torch")
    cases = [([1, 2], [1.0, 2.0]), ([float("nan")], [float("nan")]), ([1, 2], [1, 3]),
             ([[1, 2]], [1, 2]), ([], [])]
    for a, b in cases:
        want = torch.equal(torch.tensor(a), torch.tensor(b))
        assert ember.equal(ember.tensor(a), ember.tensor(b)) is want
        assert ember.tensor(a).equal(ember.tensor(b)) is want
    for bad in ([1, 2], 1.0, None):
        with pytest.raises(TypeError, match="equal.*must be Tensor"):
            ember.equal(ember.tensor([1, 2]), bad)
    with pytest.raises(TypeError, match="equal.*must be Tensor"):
        ember.equal([1, 2], ember.tensor([1, 2]))


def test_clamp_min_max_inplace_and_floor_divide():
    x = _t(np.array([-2.0, 0.5, 3.0]))
    assert ember.clamp_min(x, 0.0).tolist() == [0.0, 0.5, 3.0]
    assert x.clamp_max(1.0).tolist() == [-2.0, 0.5, 1.0]
    assert x.clone().clamp_min_(0.0).tolist() == [0.0, 0.5, 3.0]
    assert ember.floor_divide(x, 2).tolist() == [-1.0, 0.0, 1.0]
    y = x.clone()
    y.floor_divide_(2)
    assert y.tolist() == [-1.0, 0.0, 1.0]


def test_reverse_and_inplace_operators_match_torch():
    torch = pytest.importorskip("torch")
    a = np.array([-3.0, -1.5, 2.0, 5.0])
    x, tx = _t(a), torch.tensor(a)
    np.testing.assert_array_equal((2 % x).numpy(), (2 % tx).numpy())
    np.testing.assert_array_equal((7 // x).numpy(), (7 // tx).numpy())
    np.testing.assert_array_equal((2 ** x).numpy(), (2 ** tx).numpy())
    y, ty = x.clone(), tx.clone()
    y %= 2
    ty %= 2
    np.testing.assert_array_equal(y.numpy(), ty.numpy())
    y //= 0.75
    ty //= 0.75
    np.testing.assert_array_equal(y.numpy(), ty.numpy())
    i, ti = ember.tensor([1, 2, 3]), torch.tensor([1, 2, 3])
    assert (6 & i).tolist() == (6 & ti).tolist() and (6 | i).tolist() == (6 | ti).tolist()
    assert (6 ^ i).tolist() == (6 ^ ti).tolist()


def _onnx_roundtrip(fn, *arrays, opset=17):
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    import io
    import ember.onnx
    xs = tuple(_t(a) for a in arrays)
    expected = fn(*xs)
    expected = expected if isinstance(expected, tuple) else (expected,)
    buf = io.BytesIO()
    ember.onnx.export(fn, xs, buf, opset_version=opset)
    sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {i.name: x.numpy() for i, x in zip(sess.get_inputs(), xs)})
    for g_, e in zip(got, expected):
        np.testing.assert_allclose(g_, e.numpy(), rtol=1e-6, equal_nan=True)


def test_onnx_export_of_composites():
    a = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    idx = np.array([[3, 0], [1, 1], [2, 0]])
    _onnx_roundtrip(lambda x: (ember.rot90(x), ember.rot90(x, 2), ember.rot90(x, -1)), a)
    _onnx_roundtrip(lambda x, i: ember.take_along_dim(x, i, 1), a, idx)
    _onnx_roundtrip(lambda x: (ember.broadcast_to(x[:1], (2, 3, 4)), ember.movedim(x, 0, 1),
                               x.select(1, 2), ember.diag(x, 1), ember.diag(x[0]),
                               ember.hstack([x, x]), ember.vstack([x[0], x[1]]),
                               ember.clamp_min(x, 0.1), ember.floor_divide(x, 0.5)), a)
    _onnx_roundtrip(lambda x: (x.repeat_interleave(2, dim=1),
                               ember.repeat_interleave(x, ember.tensor([1, 0, 2]), dim=0)), a)
    _onnx_roundtrip(lambda x: x.unfold(1, 2, 1).diagonal(0, 0, 2), a)
    _onnx_roundtrip(lambda x: ember.diag_embed(x, -1, 0, 2), a)


def test_onnx_nan_to_num_and_isclose_with_special_values():
    a = np.array([[np.nan, np.inf, -np.inf, 1.0]], np.float32)
    b = np.array([[np.nan, np.inf, 1.0, 1.0 + 1e-7]], np.float32)
    _onnx_roundtrip(lambda x: (ember.nan_to_num(x), ember.nan_to_num(x, 1.0, 2.0, -2.0)), a)
    _onnx_roundtrip(lambda x, y: (ember.isclose(x, y), ember.isclose(x, y, equal_nan=True)), a, b)


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
    x, s = _t(a, grad=True), _t(src, grad=True)
    tx, ts = (torch.tensor(v, requires_grad=True) for v in (a, src))
    out = x.scatter_reduce(1, _t(idx), s, reduce, include_self=include_self)
    tout = tx.scatter_reduce(1, torch.tensor(idx), ts, reduce, include_self=include_self)
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-12)
    w = rng.standard_normal(out.shape)
    (out * _t(w)).sum().backward()
    (tout * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(s.grad.numpy(), ts.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_scatter_reduce_inplace_and_errors():
    x = _t(np.zeros(3))
    x.scatter_reduce_(0, ember.tensor([0, 0, 2]), _t(np.array([1.0, 2.0, 3.0])), "sum")
    assert x.tolist() == [3.0, 0.0, 3.0]
    with pytest.raises(EmberError, match="reduce argument must be one of"):
        x.scatter_reduce(0, ember.tensor([0]), _t(np.ones(1)), "max")
    with pytest.raises(RuntimeError, match="scatter_reduce"):   # torch's class
        x.scatter_reduce(0, ember.tensor([5]), _t(np.ones(1)), "sum")


def test_index_put_accumulate_duplicates_and_gradient():
    x = _t(np.zeros(4), grad=True)
    v = _t(np.array([1.0, 2.0, 3.0]), grad=True)
    out = x.index_put((ember.tensor([1, 1, 3]),), v, accumulate=True)
    assert out.tolist() == [0.0, 3.0, 0.0, 3.0]
    (out * _t(np.arange(4.0))).sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 2.0, 3.0] and v.grad.tolist() == [1.0, 1.0, 3.0]
    y = _t(np.zeros((2, 2)))
    y.index_put_((ember.tensor([0, 0]), ember.tensor([1, 1])), _t(np.array(2.0)), True)
    assert y.tolist() == [[0.0, 4.0], [0.0, 0.0]]


def test_index_copy_index_fill_inplace_and_errors():
    x = _t(np.zeros((3, 2)))
    x.index_copy_(0, ember.tensor([2, 0]), _t(np.array([[1.0, 2.0], [3.0, 4.0]])))
    assert x.tolist() == [[3.0, 4.0], [0.0, 0.0], [1.0, 2.0]]
    assert x.index_fill(1, ember.tensor([0]), -1.0).tolist() == [[-1, 4], [-1, 0], [-1, 2]]
    x.index_fill_(0, ember.tensor([1]), 7.0)
    assert x[1].tolist() == [7.0, 7.0]
    with pytest.raises(IndexError, match="index_fill"):
        x.index_fill(0, ember.tensor([3]), 0.0)
    with pytest.raises(EmberError, match="index_copy"):
        x.index_copy(0, ember.tensor([0]), _t(np.ones((2, 2))))


def test_masked_scatter_order_and_errors():
    x = _t(np.zeros((2, 3)))
    m = ember.tensor([[True, False, True], [False, True, False]])
    assert x.masked_scatter(m, _t(np.arange(1.0, 6.0))).tolist() == [[1, 0, 2], [0, 3, 0]]
    x.masked_scatter_(ember.tensor([False, True, False]), _t(np.array([9.0, 8.0])))
    assert x.tolist() == [[0, 9, 0], [0, 8, 0]]
    with pytest.raises(EmberError, match="at least 3 elements"):
        x.masked_scatter(m, _t(np.ones(2)))


def test_nonzero_as_tuple():
    z = _t(np.array([[0.0, 1.0], [2.0, 0.0]]))
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
        np.testing.assert_array_equal(_t(a)[key].numpy(), torch.tensor(a)[key].numpy())
    x, tx = _t(a), torch.tensor(a)
    x[range(0, 2), [1, 2]] = 5.0
    tx[range(0, 2), [1, 2]] = 5.0
    np.testing.assert_array_equal(x.numpy(), tx.numpy())
    g = _t(a, grad=True)
    g[range(1, 3)].sum().backward()
    assert g.grad.sum().item() == 8.0


def test_int_pow_with_negative_tensor_exponents_matches_torch():
    torch = pytest.importorskip("torch")
    b, e = [2, 1, -1, -1, 0, 3], [-1, -3, -3, -2, -1, 2]
    assert (ember.tensor(b) ** ember.tensor(e)).tolist() == \
        (torch.tensor(b) ** torch.tensor(e)).tolist()
    assert (2 ** ember.tensor([-1, 2])).tolist() == [0, 4]
    with pytest.raises(EmberError, match="negative integer powers"):
        ember.tensor([2]) ** -1


def test_index_put_function_with_tensor_indices_gradient():
    x = _t(np.zeros((5, 5)), grad=True)
    v = _t(np.ones((1, 5)), grad=True)
    out = ember.index_put(x, (ember.tensor([1]),), v)
    assert out[1].tolist() == [1.0] * 5
    out.sum().backward()
    assert v.grad.shape == (1, 5) and x.grad[1].sum().item() == 0.0


def test_index_fill_tensor_value_gradient_and_masked_scatter_broadcast():
    x = _t(np.arange(6.0).reshape(2, 3), grad=True)
    val = _t(np.array(2.0), grad=True)
    out = x.index_fill(1, ember.tensor([0, 2, 2]), val)
    assert out.tolist() == [[2, 1, 2], [2, 4, 2]]
    out.sum().backward()
    assert val.grad.item() == 4.0 and x.grad.tolist() == [[0, 1, 0], [0, 1, 0]]
    y = _t(np.zeros(3))
    m = ember.tensor([[True, False, False], [False, False, True]])
    assert ember.masked_scatter(y, m, _t(np.array([1.0, 2.0]))).tolist() == [[1, 0, 0], [0, 0, 2]]


def test_zero_dim_scatter_reduce_index_select_index_add():
    x = _t(np.array(1.5), grad=True)
    out = x.scatter_reduce(0, ember.tensor(0), _t(np.array(2.0)), "amax")
    assert out.shape == () and out.item() == 2.0
    assert ember.index_select(x, 0, ember.tensor([0])).shape == ()
    s = ember.index_add(x, 0, ember.tensor([0]), _t(np.array(1.0)))
    assert s.item() == 2.5
    s.backward()
    assert x.grad.item() == 1.0


def test_tensor_split_family_matches_torch():
    torch = pytest.importorskip("torch")
    a = np.arange(42.0).reshape(7, 6)
    cases = [lambda m, x: m.tensor_split(x, 3), lambda m, x: m.tensor_split(x, [1, 5, -1], 1),
             lambda m, x: m.tensor_split(x, [9]), lambda m, x: m.hsplit(x, 3),
             lambda m, x: m.hsplit(x, [2, 3]), lambda m, x: m.vsplit(x, [4])]
    for case in cases:
        ours, theirs = case(ember, _t(a)), case(torch, torch.tensor(a))
        assert [o.tolist() for o in ours] == [t.tolist() for t in theirs]
    with pytest.raises(EmberError, match="not divisible"):
        ember.hsplit(_t(a), 4)


def test_take_put_scatters_and_block_diag():
    x = _t(np.arange(6.0).reshape(2, 3))
    assert ember.take(x, ember.tensor([[5, -6]])).tolist() == [[5.0, 0.0]]
    p = x.put(ember.tensor([0, 0]), _t(np.array([1.0, 2.0])), accumulate=True)
    assert p.tolist() == [[3.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    with pytest.raises(IndexError, match="take"):
        ember.take(x, ember.tensor([6]))
    assert ember.select_scatter(x, _t(np.zeros(3)), 0, -1).tolist() == [[0, 1, 2], [0, 0, 0]]
    assert ember.slice_scatter(x, _t(np.zeros((2, 2))), 1, 0, None, 2).tolist() == \
        [[0, 1, 0], [0, 4, 0]]
    assert ember.diagonal_scatter(x, _t(np.array([9.0, 9.0]))).tolist() == [[9, 1, 2], [3, 9, 5]]
    b = ember.block_diag(_t(np.ones((1, 2))), _t(np.array(2.0)))
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


def test_diff_matches_torch():
    torch = pytest.importorskip("torch")
    a = np.array([[1.0, 4.0, 9.0, 16.0], [2.0, 3.0, 5.0, 7.0]])
    for kw in [{}, {"n": 2}, {"n": 0}, {"n": 5}, {"dim": 0}]:
        np.testing.assert_array_equal(ember.diff(_t(a), **kw).numpy(),
                                      torch.diff(torch.tensor(a), **kw).numpy())
    pre = np.zeros((2, 1))
    np.testing.assert_array_equal(ember.diff(_t(a), prepend=_t(pre)).numpy(),
                                  torch.diff(torch.tensor(a), prepend=torch.tensor(pre)).numpy())
    assert ember.diff(ember.tensor([True, False, False])).tolist() == [True, False]


def test_tracing_warns_when_repeats_values_are_frozen():
    import warnings
    import ember.jit

    def f(x, r):
        return x.repeat_interleave(r, dim=0)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ember.jit.trace(f, (ember.ones(3, 2), ember.tensor([1, 2, 0])))
    assert any("repeat_interleave" in str(w.message) for w in caught)


def test_onnx_export_of_an_op_that_reads_data_in_python():
    a = np.ones((3, 2), np.float32)
    _onnx_roundtrip(lambda x: x.repeat_interleave(ember.tensor([1, 2, 0]), dim=0), a)


def test_trace_of_a_matrix_only():
    assert ember.trace(_t(np.arange(6.0).reshape(2, 3))).item() == 4.0
    with pytest.raises(EmberError, match="trace: expected a matrix"):
        ember.trace(_t(np.ones(3)))


def test_edge_cases_as_torch():
    assert ember.movedim(_t(np.array(3.0)), 0, -1).shape == ()
    assert ember.block_diag().shape == (1, 0)
    with pytest.raises(IndexError, match="index_copy"):
        ember.zeros(3).index_copy(0, ember.tensor([-1]), ember.ones(1))


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
