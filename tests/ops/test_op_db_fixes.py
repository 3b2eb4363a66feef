"""Regression tests for op_db entries that used to fail (tests/op_db/known_failures.yaml)."""
import importlib

import numpy as np
import pytest

import ember


def test_memory_format_objects_accepted_by_casts_and_to():
    x = ember.arange(24.0).reshape(1, 2, 3, 4)
    for fmt in (ember.contiguous_format, ember.preserve_format, ember.channels_last):
        assert isinstance(fmt, ember.memory_format)
        assert x.double(memory_format=fmt).dtype == ember.float64
        assert x.int(memory_format=fmt).dtype == ember.int32
        y = x.to(ember.float64, False, True, memory_format=fmt)
        assert y.dtype == ember.float64 and y.is_contiguous()
        np.testing.assert_array_equal(y.numpy(), x.numpy())
    assert repr(ember.channels_last) == "ember.channels_last"
    assert repr(ember.strided) == "ember.strided"


def test_to_positional_copy_flag():
    x = ember.ones(3, dtype=ember.float64)
    assert x.to(ember.float64, False, False) is x
    y = x.to(ember.float64, False, True)
    assert y is not x
    y.add_(1.0)
    assert float(x[0]) == 1.0


def test_softmax_dtype_keyword_takes_ember_dtype():
    x = ember.randn(3, 4, requires_grad=True)
    for fn in (ember.softmax, ember.log_softmax):
        y = fn(x, 1, dtype=ember.float64)
        assert y.dtype == ember.float64
        (g,) = ember.autograd.grad(y.sum(), [x])
        assert g.dtype == ember.float32
    assert x.softmax(0, dtype=ember.float64).dtype == ember.float64


def test_integer_convolutions_match_torch():
    torch = pytest.importorskip("torch")
    import ember.nn.functional as F
    rng = np.random.default_rng(0)
    x = rng.integers(-9, 9, (2, 4, 6, 5))
    w = rng.integers(-9, 9, (6, 2, 3, 2))
    b = rng.integers(-9, 9, (6,))
    y = F.conv2d(ember.tensor(x), ember.tensor(w), ember.tensor(b), stride=(2, 1), padding=1,
                 groups=2)
    ref = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), torch.tensor(b),
                                     stride=(2, 1), padding=1, groups=2)
    assert y.dtype == ember.int64
    np.testing.assert_array_equal(y.numpy(), ref.numpy())
    y1 = F.conv1d(ember.tensor(x[:, :, 0]), ember.tensor(w[:4, :, 0]), groups=2)
    ref1 = torch.nn.functional.conv1d(torch.tensor(x[:, :, 0]), torch.tensor(w[:4, :, 0]),
                                      groups=2)
    np.testing.assert_array_equal(y1.numpy(), ref1.numpy())
    wt = rng.integers(-9, 9, (4, 3, 3))
    yt = F.conv_transpose1d(ember.tensor(x[:, :, 0]), ember.tensor(wt), stride=2, padding=1)
    reft = torch.nn.functional.conv_transpose1d(torch.tensor(x[:, :, 0]), torch.tensor(wt),
                                                stride=2, padding=1)
    np.testing.assert_array_equal(yt.numpy(), reft.numpy())


def test_integer_avg_pool_truncates_and_clamps_keep_dtype():
    torch = pytest.importorskip("torch")
    import ember.nn.functional as F
    x = np.array([[[-7, 2, -3, 1, 5, 6, -1]]])
    for args in ((2,), (3, 1, 1)):
        y = F.avg_pool1d(ember.tensor(x), *args)
        ref = torch.nn.functional.avg_pool1d(torch.tensor(x), *args)
        assert y.dtype == ember.int64
        np.testing.assert_array_equal(y.numpy(), ref.numpy())
    y2 = F.avg_pool2d(ember.tensor(x[None]), (1, 2), divisor_override=3)
    np.testing.assert_array_equal(
        y2.numpy(), torch.nn.functional.avg_pool2d(torch.tensor(x[None]), (1, 2),
                                                   divisor_override=3).numpy())
    h = F.hardtanh(ember.tensor([-3, 0, 4]), -1.5, 2.5)
    assert h.dtype == ember.int64 and h.tolist() == [-1, 0, 2]
    r = F.relu6(ember.tensor([-3, 0, 8]))
    assert r.dtype == ember.int64 and r.tolist() == [0, 0, 6]
    e = ember.zeros(0, 1, 2, dtype=ember.int64)
    assert F.local_response_norm(e, 1).dtype == ember.int64


def test_integer_arange_and_linspace_match_torch():
    torch = pytest.importorskip("torch")
    cases = [(-8.000001, -4.0), (-8.000001, -4.0, 1.5), (0.5, 5.7, 1.3), (5, 0, -2),
             (-1.1, 4.0, 0.6)]
    for args in cases:
        for tdt, edt in ((torch.int64, ember.int64), (torch.int32, ember.int32)):
            try:
                ref = torch.arange(*args, dtype=tdt).tolist()
            except (RuntimeError, ValueError):
                with pytest.raises(RuntimeError, match="step must be nonzero"):
                    ember.arange(*args, dtype=edt)
                continue
            assert ember.arange(*args, dtype=edt).tolist() == ref, (args, edt)
    for start, end, steps in ((-5, 3, 7), (10.0, -6.0, 7), (-3.2, 7.0, 7), (0, 100, 9),
                              (2.7, 2.7, 1), (1, 5, 0)):
        ref = torch.linspace(start, end, steps, dtype=torch.int64).tolist()
        assert ember.linspace(start, end, steps, dtype=ember.int64).tolist() == ref


def test_masked_fill_broadcasts_self_out_of_place():
    x = ember.randn(5, requires_grad=True)
    m = ember.tensor([[True, False, True, False, False]] * 3)
    y = x.masked_fill(m, 2.0)
    assert y.shape == (3, 5)
    y.sum().backward()
    assert x.grad.tolist() == [0.0, 3.0, 0.0, 3.0, 3.0]
    with pytest.raises(RuntimeError, match="masked_fill_"):
        ember.zeros(5).masked_fill_(m, 1.0)


def test_square_of_bool_zero_function_and_normal_layout():
    s = ember.square(ember.tensor([True, False]))
    assert s.dtype == ember.int64 and s.tolist() == [1, 0]
    z = ember.ones(3)
    assert ember.zero_(z) is z and z.tolist() == [0.0, 0.0, 0.0]
    assert ember.normal(0.0, 1.0, (2, 3), layout=ember.strided).shape == (2, 3)
    with pytest.raises(TypeError):
        ember.normal(0.0, 1.0, (2,), layout="sparse")


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


@pytest.mark.parametrize("mode", ["replicate", "circular", "reflect"])
def test_negative_padding_in_every_mode_matches_torch(mode):
    torch = pytest.importorskip("torch")
    import ember.nn.functional as F
    rng = np.random.default_rng(2)
    for pad in [(-1, 2), (2, -1), (-1, 1, -2, 1), (1, -2, -1, 1), (-4, 5, 0, 0), (5, -4, -4, 3)]:
        x = rng.standard_normal((2, 3, 4, 4)[:len(pad) + 1])
        try:
            ref = torch.nn.functional.pad(torch.tensor(x), pad, mode)
        except RuntimeError:
            continue
        g = rng.standard_normal(tuple(ref.shape))
        tx = torch.tensor(x, requires_grad=True)
        ty = torch.nn.functional.pad(tx, pad, mode)
        (tg,) = torch.autograd.grad(ty, tx, torch.tensor(g))
        ex = ember.tensor(x, requires_grad=True)
        ey = F.pad(ex, pad, mode)
        (eg,) = ember.autograd.grad(ey, [ex], ember.tensor(g))
        np.testing.assert_array_equal(ey.detach().numpy(), ty.detach().numpy())
        np.testing.assert_allclose(eg.numpy(), tg.numpy(), atol=1e-12)
    e = F.pad(ember.zeros(0, 3, 3), (1, 2), "reflect")
    assert e.shape == (0, 3, 6)


def test_empty_and_zero_d_inputs_of_nn_functions():
    torch = pytest.importorskip("torch")
    import ember.nn.functional as F
    tF = torch.nn.functional
    assert F.group_norm(ember.zeros(0, 2), 1).shape == (0, 2)
    assert F.unfold(ember.zeros(0, 1, 5, 5), 2).shape == (0, 4, 16)
    b = F.unfold(ember.tensor(np.arange(25).reshape(1, 1, 5, 5) % 2 == 0), 2)
    assert b.dtype == ember.bool and b.shape == (1, 4, 16)
    assert F.batch_norm(ember.zeros(0), ember.zeros(0), ember.ones(0), training=True).shape == (0,)
    assert F.prelu(ember.tensor(-2.0), ember.tensor([0.25])).shape == ()
    for x, t in ((0.3, 0.7), (0.3, 1.0), (2.5, -1.0)):
        ref = tF.hinge_embedding_loss(torch.tensor(x), torch.tensor(t))
        got = F.hinge_embedding_loss(ember.tensor(x), ember.tensor(t))
        assert float(got) == pytest.approx(float(ref))
    ref = tF.multi_margin_loss(torch.tensor(0.5), torch.tensor(0))
    assert float(F.multi_margin_loss(ember.tensor(0.5), ember.tensor(0))) == float(ref)
    s = ember.searchsorted(ember.zeros(0, 0), ember.zeros(0, 0))
    assert s.shape == (0, 0) and s.dtype == ember.int64


def test_norm_p0_has_zero_gradient():
    x = ember.tensor([[1.0, 0.0, -2.0]], dtype=ember.float64, requires_grad=True)
    (g,) = ember.autograd.grad(ember.norm(x, 0), [x])
    assert g.tolist() == [[0.0, 0.0, 0.0]]


def test_native_batch_norm_returns_torchs_saved_statistics():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 3, 4))
    w, b = rng.standard_normal(3), rng.standard_normal(3)
    for training in (True, False):
        trm, trv = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
        erm, erv = ember.zeros(3, dtype=ember.float64), ember.ones(3, dtype=ember.float64)
        ref = torch.native_batch_norm(torch.tensor(x), torch.tensor(w), torch.tensor(b), trm, trv,
                                      training, 0.5, 0.6)
        got = ember.native_batch_norm(ember.tensor(x), ember.tensor(w), ember.tensor(b), erm,
                                      erv, training, 0.5, 0.6)
        for g, r in zip(got, ref):
            assert tuple(g.shape) == tuple(r.shape)
            np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=1e-12)
        np.testing.assert_allclose(erm.numpy(), trm.numpy(), rtol=1e-12)
        np.testing.assert_allclose(erv.numpy(), trv.numpy(), rtol=1e-12)


def test_conv_transpose2d_gradients_with_output_padding_beyond_the_stride():
    torch = pytest.importorskip("torch")
    import ember.nn.functional as F
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((2, 4, 4, 4)), rng.standard_normal((4, 2, 4, 5))
    kw = dict(stride=(3, 2), padding=(1, 2), output_padding=(2, 3), groups=2, dilation=(4, 4))
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    ty = torch.nn.functional.conv_transpose2d(tx, tw, **kw)
    g = rng.standard_normal(tuple(ty.shape))
    ref = torch.autograd.grad(ty, [tx, tw], torch.tensor(g))
    ex, ew = ember.tensor(x, requires_grad=True), ember.tensor(w, requires_grad=True)
    got = ember.autograd.grad(F.conv_transpose2d(ex, ew, **kw), [ex, ew], ember.tensor(g))
    for a, b in zip(got, ref):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-10)


def test_gaussian_nll_loss_var_shapes_and_clamp_gradient_as_torch():
    torch = pytest.importorskip("torch")
    import ember.nn.functional as F
    rng = np.random.default_rng(5)
    x, t = rng.standard_normal((5, 4)), rng.standard_normal((5, 4))
    for var in (np.abs(rng.standard_normal(5)), np.abs(rng.standard_normal((5, 1))),
                np.full((5, 4), 1e-9)):
        tv = torch.tensor(var, requires_grad=True)
        ref = torch.nn.functional.gaussian_nll_loss(torch.tensor(x), torch.tensor(t), tv,
                                                    full=True, reduction="sum")
        (tg,) = torch.autograd.grad(ref, [tv])
        ev = ember.tensor(var, requires_grad=True)
        got = F.gaussian_nll_loss(ember.tensor(x), ember.tensor(t), ev, full=True,
                                  reduction="sum")
        (eg,) = ember.autograd.grad(got, [ev])
        assert float(got) == pytest.approx(float(ref), rel=1e-12)
        np.testing.assert_allclose(eg.numpy(), tg.numpy(), rtol=1e-9)
    with pytest.raises(ValueError, match="var"):
        F.gaussian_nll_loss(ember.tensor(x), ember.tensor(t), ember.ones(3))


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_leaves_padding_entries_out(mode):
    torch = pytest.importorskip("torch")
    import ember.nn.functional as F
    rng = np.random.default_rng(6)
    w = rng.standard_normal((5, 3))
    psw = rng.standard_normal(6) if mode == "sum" else None
    cases = [(np.array([[0, 2, 2], [2, 2, 2]]), None, 2),
             (np.array([1, 4, 0, 4, 3, 4]), np.array([0, 2]), -1)]
    for idx, offsets, pad in cases:
        kw = dict(mode=mode, padding_idx=pad)
        p = None if psw is None else psw[:idx.size].reshape(idx.shape)
        ref = torch.nn.functional.embedding_bag(
            torch.tensor(idx), torch.tensor(w), None if offsets is None else torch.tensor(offsets),
            per_sample_weights=None if p is None else torch.tensor(p), **kw)
        got = F.embedding_bag(ember.tensor(idx), ember.tensor(w),
                              None if offsets is None else ember.tensor(offsets),
                              per_sample_weights=None if p is None else ember.tensor(p), **kw)
        np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-12, atol=1e-12)


def test_norm_nuc_matches_torch_and_needs_a_matrix():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(1).standard_normal((2, 3, 4))
    np.testing.assert_allclose(ember.norm(ember.tensor(x), "nuc", dim=(1, 2)).numpy(),
                               torch.norm(torch.tensor(x), "nuc", dim=(1, 2)).numpy(), rtol=1e-12)
    np.testing.assert_allclose(ember.tensor(x[0]).norm("nuc").numpy(),
                               torch.tensor(x[0]).norm("nuc").numpy(), rtol=1e-12)
    with pytest.raises(ember.EmberError, match="norm: p='nuc' with dim=None needs a 2-D input"):
        ember.norm(ember.tensor(x), "nuc")


def test_integer_3d_pooling_and_convolution_match_torch():
    """avg_pool3d truncates integer means toward zero from exact integer sums (a float mean
    gave 0 where torch gives -1); max_pool3d pads with the dtype's minimum; conv3d is exact."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    for _ in range(10):
        x = rng.integers(-20, 20, (1, 2, 5, 6, 7))
        k = tuple(int(v) for v in rng.integers(1, 4, 3))
        p = tuple(int(v) // 2 for v in k)
        for cip in (True, False):
            a = torch.nn.functional.avg_pool3d(torch.tensor(x), k, 1, p, False, cip).numpy()
            b = ember.nn.functional.avg_pool3d(ember.tensor(x), k, 1, p, False, cip).numpy()
            np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(
            torch.nn.functional.max_pool3d(torch.tensor(x), k, 1, p).numpy(),
            ember.nn.functional.max_pool3d(ember.tensor(x), k, 1, p).numpy())
    w = rng.integers(-3, 3, (3, 2, 2, 2, 2))
    np.testing.assert_array_equal(
        torch.nn.functional.conv3d(torch.tensor(x), torch.tensor(w)).numpy(),
        ember.nn.functional.conv3d(ember.tensor(x), ember.tensor(w)).numpy())
