"""Shape ops (ember/ops/shape.py): views, edge cases and errors the spec samples do not reach."""
import numpy as np
import pytest

import ember
from ember.errors import EmberError
from tests.ops.helpers import t_of, onnx_roundtrip


def test_diagonal_is_a_writable_view_sharing_the_version_counter():
    x = t_of(np.arange(12.0).reshape(3, 4))
    d = x.diagonal(1)
    assert d.tolist() == [1.0, 6.0, 11.0]
    v = x._version
    d.mul_(0)
    assert x[0, 1].item() == 0 and x[2, 3].item() == 0 and x._version > v
    assert np.shares_memory(d._data, x._data)


def test_diagonal_non_contiguous_and_batched_against_numpy():
    a = np.random.default_rng(0).standard_normal((4, 3, 5))
    x = t_of(a).transpose(0, 2)           # (5, 3, 4), non-contiguous
    for off, d1, d2 in [(0, 0, 1), (1, -1, 0), (-2, 2, 0), (7, 0, 1)]:
        np.testing.assert_array_equal(ember.diagonal(x, off, d1, d2).numpy(),
                                      np.diagonal(a.transpose(2, 1, 0), off, d1 % 3, d2 % 3))


def test_diag_embed_and_diag_round_trip():
    v = t_of(np.array([1.0, 2.0, 3.0]))
    m = ember.diag(v, -1)
    assert m.shape == (4, 4) and ember.diag(m, -1).tolist() == [1.0, 2.0, 3.0]
    assert ember.diagflat(t_of(np.ones((2, 2)))).shape == (4, 4)
    assert ember.diag_embed(t_of(np.ones((2, 3))), 1, 0, 2).shape == (4, 2, 4)


def test_diagonal_errors_name_the_op():
    with pytest.raises(EmberError, match="diagonal"):
        ember.diagonal(t_of(np.ones(3)))
    with pytest.raises(EmberError, match="cannot be identical"):
        ember.diagonal(t_of(np.ones((2, 2))), 0, 1, -1)
    with pytest.raises(EmberError, match="diag"):
        ember.diag(t_of(np.ones((2, 2, 2))))


def test_movedim_select_are_views():
    x = t_of(np.arange(24.0).reshape(2, 3, 4))
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
    x = t_of(np.ones((2, 3)))
    assert ember.atleast_1d(x) is x and ember.atleast_2d(x) is x
    a, b = ember.atleast_3d(t_of(np.float64(1.0)), t_of(np.ones(3)))
    assert a.shape == (1, 1, 1) and b.shape == (1, 3, 1)
    assert isinstance(ember.atleast_1d([x]), tuple)


def test_stacks_and_broadcast():
    a, b = t_of(np.arange(3.0)), t_of(np.arange(3.0, 6.0))
    assert ember.hstack([a, b]).tolist() == [0, 1, 2, 3, 4, 5]
    assert ember.vstack([a, b]).shape == (2, 3)
    assert ember.dstack([a, b]).shape == (1, 3, 2)
    assert ember.column_stack([a, b]).tolist() == [[0, 3], [1, 4], [2, 5]]
    x, y = ember.broadcast_tensors(t_of(np.ones((3, 1))), t_of(np.ones(4)))
    assert x.shape == y.shape == (3, 4)
    with pytest.raises(EmberError, match="broadcast"):
        ember.broadcast_tensors(t_of(np.ones(3)), t_of(np.ones(4)))
    assert ember.broadcast_to(a, (2, 3)).shape == (2, 3)


def test_meshgrid_indexing_and_warning():
    x, y = t_of(np.arange(3.0)), t_of(np.arange(2.0))
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
        np.testing.assert_array_equal(ember.rot90(t_of(a), k).numpy(), np.rot90(a, k))
    with pytest.raises(EmberError, match="rot90"):
        ember.rot90(t_of(a), 1, (0, 0))
    idx = np.argsort(a, axis=1)[:, ::-1].copy()
    np.testing.assert_array_equal(ember.take_along_dim(t_of(a), t_of(idx), 1).numpy(),
                                  np.take_along_axis(a, idx, 1))
    assert ember.take_along_dim(t_of(a), t_of(np.array([11, 0]))).tolist() == [11.0, 0.0]


def test_matrix_properties():
    x = t_of(np.arange(6.0).reshape(2, 3))
    assert x.H.shape == x.mT.shape == x.mH.shape == x.T.shape == (3, 2)
    b = t_of(np.ones((4, 2, 3)))
    assert b.mT.shape == b.mH.shape == (4, 3, 2)
    with pytest.raises(EmberError, match="mH"):
        t_of(np.ones(3)).mH
    with pytest.raises(EmberError, match="H is only supported"):
        b.H


def test_unfold_is_a_view_of_overlapping_windows():
    x = t_of(np.arange(10.0).reshape(2, 5))
    u = x.unfold(1, 3, 2)
    assert u.shape == (2, 2, 3) and u[1, 1].tolist() == [7.0, 8.0, 9.0]
    assert np.shares_memory(u._data, x._data)
    nc = t_of(np.arange(10.0).reshape(2, 5).T).t()         # non-contiguous (2, 5)
    np.testing.assert_array_equal(nc.unfold(1, 3, 2).numpy(), u.numpy())
    with pytest.raises(EmberError, match="unfold.*size"):
        x.unfold(1, 6, 1)
    with pytest.raises(EmberError, match="step"):
        x.unfold(1, 2, 0)


def test_unfold_gradient_adds_overlaps():
    x = t_of(np.arange(5.0), grad=True)
    x.unfold(0, 3, 1).sum().backward()
    assert x.grad.tolist() == [1.0, 2.0, 3.0, 2.0, 1.0]


def test_repeat_interleave_forms_and_errors():
    x = t_of(np.array([[1.0, 2.0], [3.0, 4.0]]))
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


def test_onnx_export_of_composites():
    a = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    idx = np.array([[3, 0], [1, 1], [2, 0]])
    onnx_roundtrip(lambda x: (ember.rot90(x), ember.rot90(x, 2), ember.rot90(x, -1)), a)
    onnx_roundtrip(lambda x, i: ember.take_along_dim(x, i, 1), a, idx)
    onnx_roundtrip(lambda x: (ember.broadcast_to(x[:1], (2, 3, 4)), ember.movedim(x, 0, 1),
                               x.select(1, 2), ember.diag(x, 1), ember.diag(x[0]),
                               ember.hstack([x, x]), ember.vstack([x[0], x[1]]),
                               ember.clamp_min(x, 0.1), ember.floor_divide(x, 0.5)), a)
    onnx_roundtrip(lambda x: (x.repeat_interleave(2, dim=1),
                               ember.repeat_interleave(x, ember.tensor([1, 0, 2]), dim=0)), a)
    onnx_roundtrip(lambda x: x.unfold(1, 2, 1).diagonal(0, 0, 2), a)
    onnx_roundtrip(lambda x: ember.diag_embed(x, -1, 0, 2), a)


def test_tensor_split_family_matches_torch():
    torch = pytest.importorskip("torch")
    a = np.arange(42.0).reshape(7, 6)
    cases = [lambda m, x: m.tensor_split(x, 3), lambda m, x: m.tensor_split(x, [1, 5, -1], 1),
             lambda m, x: m.tensor_split(x, [9]), lambda m, x: m.hsplit(x, 3),
             lambda m, x: m.hsplit(x, [2, 3]), lambda m, x: m.vsplit(x, [4])]
    for case in cases:
        ours, theirs = case(ember, t_of(a)), case(torch, torch.tensor(a))
        assert [o.tolist() for o in ours] == [t.tolist() for t in theirs]
    with pytest.raises(EmberError, match="not divisible"):
        ember.hsplit(t_of(a), 4)


def test_diff_matches_torch():
    torch = pytest.importorskip("torch")
    a = np.array([[1.0, 4.0, 9.0, 16.0], [2.0, 3.0, 5.0, 7.0]])
    for kw in [{}, {"n": 2}, {"n": 0}, {"n": 5}, {"dim": 0}]:
        np.testing.assert_array_equal(ember.diff(t_of(a), **kw).numpy(),
                                      torch.diff(torch.tensor(a), **kw).numpy())
    pre = np.zeros((2, 1))
    np.testing.assert_array_equal(ember.diff(t_of(a), prepend=t_of(pre)).numpy(),
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
    onnx_roundtrip(lambda x: x.repeat_interleave(ember.tensor([1, 2, 0]), dim=0), a)


def test_edge_cases_as_torch():
    assert ember.movedim(t_of(np.array(3.0)), 0, -1).shape == ()
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


@pytest.mark.parametrize("fmt", ["contiguous_format", "channels_last", "preserve_format"])
def test_contiguous_and_clone_take_a_memory_format_as_torch(fmt):
    """``x.contiguous(memory_format=...)``, ``x.clone(memory_format=...)`` and
    ``ember.clone(x, memory_format=...)`` (channels-last code from torchvision and tutorials):
    the same values, a copy where torch copies, gradients through; a format that is not one
    is a TypeError naming the op."""
    fmt = getattr(ember, fmt)
    base = np.random.default_rng(0).standard_normal((2, 3, 4, 5))
    x = ember.tensor(base, requires_grad=True)
    outs = [x.contiguous(memory_format=fmt), x.clone(memory_format=fmt),
            ember.clone(x, memory_format=fmt), x.permute(0, 2, 3, 1).contiguous()]
    for y in outs[:3]:
        np.testing.assert_array_equal(y.detach().numpy(), base)
    assert not np.shares_memory(outs[1].detach().numpy(), base)
    assert not np.shares_memory(outs[2].detach().numpy(), base)
    sum(y.sum() for y in outs).backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(base.shape, 4.0))
    with pytest.raises(EmberError, match="contiguous.*memory_format"):
        x.contiguous(memory_format="channels_last")
    with pytest.raises(EmberError, match="clone.*memory_format"):
        ember.clone(x, memory_format=1)


def test_nbytes_and_itemsize_are_torchs():
    for dt, size in ((ember.float64, 8), (ember.float32, 4), (ember.bfloat16, 2),
                     (ember.int8, 1), (ember.complex64, 8), (ember.bool, 1)):
        x = ember.zeros(3, 5, dtype=dt)
        assert x.itemsize == size and x.nbytes == 15 * size
        assert x[:, ::2].nbytes == 9 * size     # the elements' bytes, as torch (not the view's span)


_INPLACE_VIEWS = [("squeeze_", ()), ("squeeze_", (1,)), ("squeeze_", ((1, 3),)),
                  ("unsqueeze_", (0,)), ("unsqueeze_", (-1,)), ("transpose_", (0, 2)),
                  ("swapaxes_", (0, 1)), ("swapdims_", (2, 0)),
                  ("as_strided_", ((2, 3), (1, 2), 1))]


@pytest.mark.parametrize("name,args", _INPLACE_VIEWS)
def test_in_place_view_ops_reshape_self_as_torch(name, args):
    """``x.unsqueeze_(0)``, ``x.t_()``, ...: self takes the view's shape and strides (the same
    memory, so a write through it lands where torch's does), and a view taken before keeps
    its own shape."""
    torch = pytest.importorskip("torch")
    res = []
    for L in (torch, ember):
        base = L.arange(24.0).reshape(2, 1, 3, 1, 4)[:, :, :, :, ::2] if name != "transpose_" \
            else L.arange(24.0).reshape(2, 3, 4)
        before = base[0]
        out = getattr(base, name)(*args)
        assert out is base
        base.add_(100.0)            # written through the new strides: the same memory
        res.append((tuple(base.shape), base.tolist(), tuple(before.shape), before.tolist()))
    assert res[1] == res[0]


def test_t_in_place_and_its_refusals():
    x = ember.zeros(2, 3)
    assert x.t_() is x and tuple(x.shape) == (3, 2)
    w = ember.zeros(2, 3, requires_grad=True)
    with pytest.raises(EmberError, match="requires grad.*unsqueeze"):
        w.unsqueeze_(0)
    with pytest.raises(EmberError, match="requires grad"):
        (w * 2).t_()


def test_dim_order_apply_map_ger_and_narrow_copy_methods_as_torch():
    torch = pytest.importorskip("torch")
    for shape, perm in (((2, 3, 4), (2, 0, 1)), ((2, 1, 3), (0, 1, 2)), ((3, 4), (1, 0))):
        assert ember.zeros(shape).permute(*perm).dim_order() == \
            torch.zeros(shape).permute(*perm).dim_order()
    res = []
    for L in (torch, ember):
        a = L.arange(6.0).reshape(2, 3)[:, ::2]
        a.apply_(lambda v: v * v - 1)
        b = L.arange(4.0).reshape(2, 2)
        b.map_(L.tensor([10.0, 20.0]), lambda u, v: u + v)
        res.append((a.tolist(), b.tolist(), L.arange(3.0).ger(L.arange(2.0)).tolist(),
                    L.arange(6.0).narrow_copy(0, 1, 2).tolist()))
    assert res[1] == res[0]
    with pytest.raises(EmberError, match="requires grad"):
        ember.zeros(2, requires_grad=True).apply_(lambda v: v)


def test_T_of_a_tensor_not_2d_warns_once_as_torch(monkeypatch):
    import warnings
    from ember.ops import shape
    monkeypatch.setattr(shape, "_T_warned", [])
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        ember.ones(2, 3).T
        x = ember.ones(2, 3, 4)
        assert tuple(x.T.shape) == (4, 3, 2) and tuple(x.T.shape) == (4, 3, 2)
    assert len(seen) == 1 and "x.mT" in str(seen[0].message) and seen[0].filename == __file__


def test_int_list_varargs_take_their_keyword_as_torch():
    """``x.permute(dims=...)``, ``reshape(shape=...)``, ``view(size=...)``, ``view(dtype=...)``,
    ``expand(size=...)``, ``repeat(repeats=...)``; ``Tensor.flip`` and ``Tensor.tile`` take
    ``*dims`` as well as a sequence (``torch.flip``/``torch.tile`` one sequence)."""
    x = ember.arange(6.0).view(2, 3)
    assert x.permute(dims=(1, 0)).shape == ember.permute(x, dims=[1, 0]).shape == (3, 2)
    assert x.reshape(shape=(3, 2)).shape == ember.reshape(x, shape=(3, 2)).shape == (3, 2)
    assert x.view(size=(3, 2)).shape == (3, 2) and x.view(dtype=ember.int32).dtype == ember.int32
    assert x[:1].expand(size=(4, 3)).shape == (4, 3)
    assert x.repeat(repeats=(1, 2)).shape == (2, 6)
    assert x.flip(0, 1).tolist() == x.flip((0, 1)).tolist() == x.flip(dims=[0, 1]).tolist() \
        == [[5.0, 4.0, 3.0], [2.0, 1.0, 0.0]]
    assert x.tile(2).shape == (2, 6) and x.tile(2, 1).shape == x.tile(dims=(2, 1)).shape == (4, 3)
    with pytest.raises(TypeError, match=r"permute\(\) got an unexpected keyword argument 'shape'"):
        x.permute(shape=(1, 0))
    with pytest.raises(TypeError, match=r"reshape\(\) got multiple values for argument 'shape'"):
        x.reshape(3, 2, shape=(3, 2))
