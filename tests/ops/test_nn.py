"""nn ops (ember/ops/nn.py) against torch: interpolate (all modes, scale_factor semantics),
forward and backward; integer convolutions and pooling, negative padding, empty inputs, batch
norm's saved statistics, embedding_bag; errors. Spec samples (ember/ops/spec/) add gradcheck in
float64."""
import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.errors import EmberError

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _pair(shape, seed=0, dtype=np.float64):
    x = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)


def _check(ef, tf, shape, seed=0, atol=1e-10):
    e, t = _pair(shape, seed)
    ye, yt = ef(e), tf(t)
    assert tuple(ye.shape) == tuple(yt.shape)
    np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), atol=atol)
    g = np.random.default_rng(seed + 1).standard_normal(tuple(yt.shape))
    ye.backward(ember.tensor(g))
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), atol=atol)


INTERP = [  # (mode, spatial shape, kwargs)
    ("nearest", (5,), dict(size=9)),
    ("nearest", (5, 4), dict(scale_factor=1.7)),
    ("nearest", (3, 4, 5), dict(scale_factor=(1.5, 2.0, 0.7))),
    ("nearest-exact", (5, 7), dict(scale_factor=0.6)),
    ("nearest-exact", (3, 4, 2), dict(size=(5, 3, 7))),
    ("linear", (5,), dict(scale_factor=1.7)),
    ("linear", (6,), dict(size=4, align_corners=True)),
    ("bilinear", (5, 4), dict(scale_factor=(1.3, 2.5))),
    ("bilinear", (5, 4), dict(scale_factor=1.3, recompute_scale_factor=True)),
    ("bicubic", (5, 6), dict(size=(8, 3))),
    ("bicubic", (5, 6), dict(scale_factor=1.7)),
    ("bicubic", (4, 5), dict(size=(7, 9), align_corners=True)),
    ("trilinear", (3, 4, 2), dict(scale_factor=1.6)),
    ("trilinear", (3, 4, 2), dict(size=(5, 2, 3), align_corners=True)),
    ("area", (7,), dict(size=3)),
    ("area", (7, 5), dict(scale_factor=0.6)),
    ("area", (5, 4, 6), dict(size=(2, 3, 4))),
]


@pytest.mark.parametrize("mode,spatial,kw", INTERP,
                         ids=[f"{m}-{len(s)}d-{i}" for i, (m, s, _) in enumerate(INTERP)])
def test_interpolate_matches_torch(mode, spatial, kw):
    _check(lambda x: F.interpolate(x, mode=mode, **kw),
           lambda x: TF.interpolate(x, mode=mode, **kw), (2, 3) + spatial)


def test_interpolate_uses_the_given_scale_in_the_coordinate_mapping():
    # 5 * 1.7 -> 8 outputs: torch maps with 1/1.7, not 5/8 (the two differ at every output)
    e, t = _pair((1, 1, 5), 3)
    for mode in ("nearest", "linear"):
        got = F.interpolate(e, scale_factor=1.7, mode=mode).detach().numpy()
        want = TF.interpolate(t, scale_factor=1.7, mode=mode).detach().numpy()
        np.testing.assert_allclose(got, want, atol=1e-12)
        re = F.interpolate(e, scale_factor=1.7, mode=mode, recompute_scale_factor=True)
        rt = TF.interpolate(t, scale_factor=1.7, mode=mode, recompute_scale_factor=True)
        np.testing.assert_allclose(re.detach().numpy(), rt.detach().numpy(), atol=1e-12)
        assert not np.allclose(got, re.detach().numpy())


def test_interpolate_float32_and_modules():
    x = np.random.default_rng(0).standard_normal((2, 3, 5, 6)).astype(np.float32)
    for em, tm in [(nn.Upsample(scale_factor=1.5, mode="bicubic"),
                    torch.nn.Upsample(scale_factor=1.5, mode="bicubic")),
                   (nn.UpsamplingNearest2d(scale_factor=2), torch.nn.UpsamplingNearest2d(
                       scale_factor=2)),
                   (nn.UpsamplingBilinear2d(size=(7, 4)), torch.nn.UpsamplingBilinear2d(
                       size=(7, 4)))]:
        y = em(ember.tensor(x))
        assert y.dtype == ember.float32
        np.testing.assert_allclose(y.numpy(), tm(torch.tensor(x)).numpy(), atol=1e-5)


def test_interpolate_errors():
    x = ember.randn(1, 2, 4, 4)
    with pytest.raises(ValueError, match="anti-alias option is restricted"):
        F.interpolate(x, size=(2, 2), mode="nearest", antialias=True)
    with pytest.raises(NotImplementedError, match="trilinear mode needs 5-d"):
        F.interpolate(x, size=(2, 2), mode="trilinear")
    with pytest.raises(ValueError, match="recompute_scale_factor"):
        F.interpolate(x, size=(2, 2), recompute_scale_factor=True)
    with pytest.raises(ValueError, match="align_corners"):
        F.interpolate(x, size=(2, 2), mode="nearest-exact", align_corners=True)
    with pytest.raises(NotImplementedError, match="'lanczos'"):
        F.interpolate(x, size=(2, 2), mode="lanczos")


# ---------------------------------------------------------------------------- grid_sample
GRID = [(m, p, a, nd) for m in ("bilinear", "nearest", "bicubic")
        for p in ("zeros", "border", "reflection") for a in (False, True) for nd in (2, 3)
        if not (m == "bicubic" and nd == 3)]


@pytest.mark.parametrize("mode,pad,ac,nd", GRID,
                         ids=[f"{m}-{p}-{a}-{n}d" for m, p, a, n in GRID])
def test_grid_sample_matches_torch_with_input_and_grid_gradients(mode, pad, ac, nd):
    rng = np.random.default_rng(len(mode) + len(pad) + nd)
    sp, out = ((4, 5), (3, 2)) if nd == 2 else ((3, 4, 3), (2, 3, 2))
    x = rng.standard_normal((2, 2) + sp)
    g = rng.standard_normal((2,) + out + (nd,)) * 0.9  # about a quarter outside [-1, 1]
    ex, eg = ember.tensor(x, requires_grad=True), ember.tensor(g, requires_grad=True)
    tx, tg = torch.tensor(x, requires_grad=True), torch.tensor(g, requires_grad=True)
    y = F.grid_sample(ex, eg, mode, pad, ac)
    ty = TF.grid_sample(tx, tg, mode, pad, ac)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), atol=1e-10)
    go = rng.standard_normal(tuple(ty.shape))
    y.backward(ember.tensor(go))
    ty.backward(torch.tensor(go))
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), atol=1e-10)
    np.testing.assert_allclose(eg.grad.numpy(), tg.grad.numpy(), atol=1e-8)


def test_grid_sample_noncontiguous_float32_nan_and_errors():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 2, 4, 5)).astype(np.float32)
    g = rng.standard_normal((1, 2, 3, 2)).astype(np.float32)
    g[0, 0, 0] = np.nan  # torch samples 0 there
    eg = ember.tensor(g).permute(0, 2, 1, 3)  # non-contiguous grid
    y = F.grid_sample(ember.tensor(x), eg, align_corners=False)
    want = TF.grid_sample(torch.tensor(x), torch.tensor(g).permute(0, 2, 1, 3),
                          align_corners=False)
    assert y.dtype == ember.float32
    np.testing.assert_allclose(y.numpy(), want.numpy(), atol=1e-6)
    with pytest.raises(ValueError, match="mode"):
        F.grid_sample(ember.tensor(x), eg, mode="area")
    with pytest.raises(RuntimeError, match="bicubic"):
        F.grid_sample(ember.randn(1, 1, 2, 2, 2), ember.randn(1, 1, 1, 1, 3), mode="bicubic")
    with pytest.raises(RuntimeError, match=r"grid \[1, 3, 2\]"):
        F.grid_sample(ember.tensor(x), ember.randn(1, 3, 2))


def test_affine_grid_matches_torch_and_feeds_grid_sample():
    rng = np.random.default_rng(7)
    for size, shape in [((2, 3, 4, 5), (2, 2, 3)), ((2, 1, 3, 2, 4), (2, 3, 4))]:
        for ac in (False, True):
            _check(lambda t: F.affine_grid(t, size, ac), lambda t: TF.affine_grid(t, size, ac),
                   shape)
    th = rng.standard_normal((1, 2, 3))
    x = rng.standard_normal((1, 2, 5, 6))
    got = F.grid_sample(ember.tensor(x), F.affine_grid(ember.tensor(th), (1, 2, 4, 3)))
    want = TF.grid_sample(torch.tensor(x), TF.affine_grid(torch.tensor(th), (1, 2, 4, 3),
                                                          False), align_corners=False)
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-10)
    with pytest.raises(ValueError, match="Nx2x3"):
        F.affine_grid(ember.randn(2, 3, 4), (2, 3, 4, 5))


def test_grid_sample_exports_to_onnx():
    onnx = pytest.importorskip("onnx")  # noqa: F841
    ort = pytest.importorskip("onnxruntime")
    import io
    import ember.onnx
    rng = np.random.default_rng(0)
    x = ember.tensor(rng.standard_normal((1, 2, 4, 5)).astype(np.float32))
    g = ember.tensor(rng.standard_normal((1, 3, 2, 2)).astype(np.float32))
    for mode, pad in [("bilinear", "reflection"), ("bicubic", "border"), ("nearest", "zeros")]:
        def fn(a, b, mode=mode, pad=pad):
            return F.grid_sample(a, b, mode, pad, False)
        buf = io.BytesIO()
        ember.onnx.export(fn, (x, g), buf, opset_version=17)
        sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
        names = [i.name for i in sess.get_inputs()]
        out = sess.run(None, dict(zip(names, [x.numpy(), g.numpy()])))[0]
        np.testing.assert_allclose(out, fn(x, g).numpy(), atol=1e-5)


# ---------------------------------------------------------------------------- 3-d conv / pool
@pytest.mark.filterwarnings("ignore:Using padding=.same.")
def test_conv3d_functional_forms_match_torch():
    rng = np.random.default_rng(11)
    w = rng.standard_normal((3, 2, 2, 3, 2))
    for kw in (dict(padding="same", dilation=(1, 2, 1)), dict(padding="valid", stride=2),
               dict(padding=(1, 0, 2), groups=1)):
        _check(lambda x: F.conv3d(x, ember.tensor(w), **kw),
               lambda x: TF.conv3d(x, torch.tensor(w), **kw), (2, 2, 4, 5, 4))
    # unbatched, and a non-contiguous input
    _check(lambda x: F.conv3d(x.transpose(1, 3), ember.tensor(w)),
           lambda x: TF.conv3d(x.transpose(1, 3), torch.tensor(w)), (2, 4, 3, 2, 5))
    wt = rng.standard_normal((2, 3, 3, 2, 2))
    _check(lambda x: F.conv_transpose3d(x, ember.tensor(wt), stride=(2, 1, 3), padding=1,
                                        output_padding=(1, 0, 2)),
           lambda x: TF.conv_transpose3d(x, torch.tensor(wt), stride=(2, 1, 3), padding=1,
                                         output_padding=(1, 0, 2)), (2, 3, 2, 3))
    with pytest.raises(RuntimeError, match="channels"):
        F.conv3d(ember.tensor(np.zeros((1, 3, 4, 4, 4))), ember.tensor(w))
    with pytest.raises(RuntimeError, match="output padding"):
        F.conv_transpose3d(ember.tensor(np.zeros((1, 2, 3, 3, 3))), ember.tensor(wt),
                           output_padding=1)


def test_pool3d_and_lp_pool_functional_forms_match_torch():
    _check(lambda x: F.max_pool3d(x, (2, 3, 2), (1, 2, 1), (1, 1, 0), (2, 1, 1), True),
           lambda x: TF.max_pool3d(x, (2, 3, 2), (1, 2, 1), (1, 1, 0), (2, 1, 1), True),
           (2, 5, 6, 4))  # unbatched
    _check(lambda x: F.avg_pool3d(x, 3, 2, 1, True, False),
           lambda x: TF.avg_pool3d(x, 3, 2, 1, True, False), (1, 2, 6, 5, 7))
    _check(lambda x: F.adaptive_avg_pool3d(x, (3, None, 2)),
           lambda x: TF.adaptive_avg_pool3d(x, (3, None, 2)), (1, 2, 7, 3, 5))
    _check(lambda x: F.adaptive_max_pool3d(x, 2), lambda x: TF.adaptive_max_pool3d(x, 2),
           (1, 2, 5, 3, 4))
    for p in (1.5, 2.0, 3.0):
        _check(lambda x: F.lp_pool1d(x * x + 0.1, p, 3, 2),
               lambda x: TF.lp_pool1d(x * x + 0.1, p, 3, 2), (2, 3, 9))
        _check(lambda x: F.lp_pool3d(x * x + 0.1, p, (2, 1, 2)),
               lambda x: TF.lp_pool3d(x * x + 0.1, p, (2, 1, 2)), (1, 2, 4, 3, 4))
    x = np.random.default_rng(1).standard_normal((1, 2, 4, 4, 4))
    for name, args in [("max_pool3d_with_indices", (2,)), ("max_pool2d_with_indices", (2,)),
                       ("max_pool1d_with_indices", (2,)),
                       ("adaptive_max_pool3d_with_indices", (2,)),
                       ("adaptive_max_pool2d_with_indices", (2,)),
                       ("adaptive_max_pool1d_with_indices", (2,))]:
        nd = int(name.split("pool")[1][0])
        xs = x.reshape((1, 2 * 4 ** (3 - nd)) + (4,) * nd)
        got = getattr(F, name)(ember.tensor(xs), *args)
        want = getattr(TF, name)(torch.tensor(xs), *args)
        assert isinstance(got, tuple) and len(got) == 2, name
        np.testing.assert_allclose(got[0].numpy(), want[0].numpy())
        np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())
    with pytest.raises(RuntimeError, match="half of the kernel"):
        F.max_pool3d(ember.randn(1, 1, 4, 4, 4), 2, padding=2)


# ---------------------------------------------------------------------------- attention, losses
def test_sdpa_fully_masked_rows_are_zero_and_gradients_finite():
    rng = np.random.default_rng(2)
    q, tq = _pair((2, 3, 4, 5), 2)
    mask = rng.random((4, 6)) > 0.4
    mask[1] = False  # a query that may attend to nothing
    k, tk = _pair((2, 3, 6, 5), 3)
    v, tv = _pair((2, 3, 6, 2), 4)
    for em, tm in [(ember.tensor(mask), torch.tensor(mask)),
                   (ember.tensor(np.where(mask, 0.0, -np.inf)),
                    torch.tensor(np.where(mask, 0.0, -np.inf)))]:
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=em)
        ty = TF.scaled_dot_product_attention(tq, tk, tv, attn_mask=tm)
        np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), atol=1e-12)
        assert np.all(y.detach().numpy()[:, :, 1] == 0)
        y.sum().backward()
        ty.sum().backward()
        for e, t in ((q, tq), (k, tk), (v, tv)):
            np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), atol=1e-12)
            e.grad, t.grad = None, None
    with pytest.raises(RuntimeError, match="is_causal"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=ember.tensor(mask), is_causal=True)
    # grouped-query attention with a causal mask and an explicit scale
    kg, tkg = _pair((2, 1, 6, 5), 5)
    vg, tvg = _pair((2, 1, 6, 2), 6)
    y = F.scaled_dot_product_attention(q, kg, vg, is_causal=True, scale=0.3, enable_gqa=True)
    ty = TF.scaled_dot_product_attention(tq, tkg, tvg, is_causal=True, scale=0.3,
                                         enable_gqa=True)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), atol=1e-12)


def test_new_functional_ops_match_torch():
    for p in (2, 1, 0.5, float("inf"), 0):  # p=0: a count, gradient 0
        _check(lambda x: F.pdist(x, p), lambda x: TF.pdist(x, p), (5, 3))
    _check(lambda x: F.channel_shuffle(x, 3), lambda x: TF.channel_shuffle(x, 3), (2, 6, 2, 2))
    _check(lambda x: F.fold(x, (5, 6), (3, 2), (1, 2), 1, (2, 1)),
           lambda x: TF.fold(x, (5, 6), (3, 2), (1, 2), 1, (2, 1)), (2, 12, 18))
    _check(lambda x: F.fold(x, 4, 2), lambda x: TF.fold(x, 4, 2), (8, 9))  # unbatched
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal((4, 5)), rng.standard_normal((4, 5))
    _check(lambda x: F.triplet_margin_with_distance_loss(
        x, ember.tensor(a), ember.tensor(b), swap=True, reduction="none",
        distance_function=lambda u, v: 1 - F.cosine_similarity(u, v)),
        lambda x: TF.triplet_margin_with_distance_loss(
            x, torch.tensor(a), torch.tensor(b), swap=True, reduction="none",
            distance_function=lambda u, v: 1 - TF.cosine_similarity(u, v)), (4, 5))
    t = np.array([[3, 0, -1, 1, 2], [1, 1, 4, -1, 0], [-1, 2, 3, 0, 0]], np.int64)
    for red in ("mean", "none"):
        _check(lambda x: F.multilabel_margin_loss(x, ember.tensor(t), reduction=red),
               lambda x: TF.multilabel_margin_loss(x, torch.tensor(t), reduction=red), (3, 5))
    _check(lambda x: F.multilabel_margin_loss(x, ember.tensor(t[1])),
           lambda x: TF.multilabel_margin_loss(x, torch.tensor(t[1])), (5,))
    _check(lambda x: F.multilabel_margin_loss(x, ember.tensor(0), reduction="none"),
           lambda x: TF.multilabel_margin_loss(x, torch.tensor(0), reduction="none"), ())


def test_new_composites_gradcheck_in_float64():
    from ember.autograd.gradcheck import gradcheck
    rng = np.random.default_rng(9)
    x = ember.tensor(rng.standard_normal((4, 3)), requires_grad=True)
    assert gradcheck(lambda x: F.pdist(x, 3), (x,), eps=1e-6, atol=1e-6)
    c = ember.tensor(rng.standard_normal((1, 8, 4)), requires_grad=True)
    assert gradcheck(lambda c: F.fold(c, (3, 3), 2), (c,), eps=1e-6, atol=1e-6)
    t = ember.tensor(np.array([[2, 0, -1, 1], [1, 3, 3, -1]], np.int64))
    y = ember.tensor(rng.standard_normal((2, 4)), requires_grad=True)
    assert gradcheck(lambda y: F.multilabel_margin_loss(y, t), (y,), eps=1e-6, atol=1e-6)


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_max_unpool_matches_torch(nd):
    rng = np.random.default_rng(nd)
    x = rng.standard_normal((2, 2) + (5,) * nd)
    ty, ti = getattr(TF, f"max_pool{nd}d")(torch.tensor(x), 2, return_indices=True)
    idx = ember.tensor(ti.numpy())
    out = (5,) * nd
    _check(lambda v: getattr(F, f"max_unpool{nd}d")(v, idx, 2, output_size=out),
           lambda v: getattr(TF, f"max_unpool{nd}d")(v, ti, 2, output_size=out),
           tuple(ty.shape))
    em = getattr(nn, f"MaxUnpool{nd}d")(2)
    got = em(ember.tensor(ty.numpy()), idx, output_size=out)
    want = getattr(torch.nn, f"MaxUnpool{nd}d")(2)(ty, ti, output_size=out)
    np.testing.assert_allclose(got.numpy(), want.numpy())
    with pytest.raises(ValueError, match="output_size"):
        getattr(F, f"max_unpool{nd}d")(ember.tensor(ty.numpy()), idx, 2, output_size=(9,) * nd)


def test_feature_alpha_dropout_and_inplace_activations():
    x = ember.ones(64, 16, 3, 3)
    y = nn.FeatureAlphaDropout(0.3).train()(x).numpy()
    per_channel = y.reshape(64, 16, 9)
    assert np.all(per_channel == per_channel[:, :, :1])  # one draw per channel
    alpha, p = -1.7580993408473766, 0.3
    a = 1 / np.sqrt((alpha * alpha * p + 1) * (1 - p))
    np.testing.assert_allclose(np.unique(y.round(6)), sorted([round(a - a * alpha * p, 6),
                                                              round(a * alpha - a * alpha * p,
                                                                    6)]), rtol=1e-5)
    assert 0.2 < np.mean(per_channel[:, :, 0] < 0) < 0.4
    assert nn.FeatureAlphaDropout(0.3).eval()(x) is x
    v = np.random.default_rng(3).standard_normal((3, 4))
    for name, args in [("elu_", (0.5,)), ("leaky_relu_", (0.2,)), ("selu_", ()),
                       ("celu_", (0.7,)), ("threshold_", (0.1, -2.0)), ("rrelu_", (0.1, 0.3))]:
        e, t = ember.tensor(v.copy()), torch.tensor(v.copy())
        assert getattr(F, name)(e, *args) is e
        getattr(TF, name)(t, *args)
        np.testing.assert_allclose(e.numpy(), t.numpy(), err_msg=name)


@pytest.mark.parametrize("nd", [2, 3])
def test_fractional_max_pool_matches_torch(nd):
    rng = np.random.default_rng(nd)
    shape = (2, 3, 9, 8) if nd == 2 else (2, 2, 6, 7, 5)
    s = rng.random((shape[0], shape[1], nd))
    out = (4, 3) if nd == 2 else (3, 4, 2)
    fe = getattr(F, f"fractional_max_pool{nd}d")
    ft = getattr(TF, f"fractional_max_pool{nd}d")
    _check(lambda x: fe(x, 2, output_size=out, _random_samples=ember.tensor(s)),
           lambda x: ft(x, 2, output_size=out, _random_samples=torch.tensor(s)), shape)
    x = rng.standard_normal(shape)
    ye, ie = fe(ember.tensor(x), (2,) * nd, output_ratio=(0.5,) * nd, return_indices=True,
                _random_samples=ember.tensor(s))
    yt, it = ft(torch.tensor(x), (2,) * nd, output_ratio=(0.5,) * nd, return_indices=True,
                _random_samples=torch.tensor(s))
    np.testing.assert_array_equal(ie.numpy(), it.numpy())
    m = getattr(nn, f"FractionalMaxPool{nd}d")(2, output_size=out)
    y = m(ember.tensor(x[0]))  # unbatched, samples drawn from ember's generator
    assert tuple(y.shape) == (shape[1],) + out
    with pytest.raises(ValueError, match="output size, or a pooling ratio"):
        getattr(nn, f"FractionalMaxPool{nd}d")(2)
    with pytest.raises(RuntimeError, match="too large"):
        fe(ember.tensor(x), 3, output_size=(8,) * nd)


def test_conv_tbc_matches_torch():
    rng = np.random.default_rng(4)
    w, b = rng.standard_normal((3, 2, 4)), rng.standard_normal(4)
    _check(lambda x: F.conv_tbc(x, ember.tensor(w), ember.tensor(b), 1),
           lambda x: torch.conv_tbc(x, torch.tensor(w), torch.tensor(b), 1), (5, 2, 2))


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_ctc_loss_matches_torch(reduction):
    rng = np.random.default_rng(12)
    T, N, C = 10, 3, 5
    il, tl = [10, 7, 9], [3, 1, 4]
    tg = rng.integers(1, C, (N, 4))
    flat = np.concatenate([tg[n, :tl[n]] for n in range(N)])
    for targets in (tg, flat):
        # gradients wrt the logits before log_softmax: ember's and torch's backward agree there
        _check(lambda x: F.ctc_loss(F.log_softmax(x, 2), ember.tensor(targets), il, tl,
                                    reduction=reduction),
               lambda x: TF.ctc_loss(TF.log_softmax(x, 2), torch.tensor(targets),
                                     torch.tensor(il), torch.tensor(tl), reduction=reduction),
               (T, N, C))
    # unbatched, another blank, lengths as tensors
    t1 = np.array([1, 1, 3])
    _check(lambda x: F.ctc_loss(F.log_softmax(x, 1), ember.tensor(t1), ember.tensor(8),
                                ember.tensor(3), blank=2, reduction=reduction),
           lambda x: TF.ctc_loss(TF.log_softmax(x, 1), torch.tensor(t1), torch.tensor(8),
                                 torch.tensor(3), blank=2, reduction=reduction), (8, 4))


def test_ctc_loss_infeasible_zero_infinity_module_and_errors():
    rng = np.random.default_rng(13)
    x = rng.standard_normal((3, 2, 4))
    tg = np.array([[1, 1, 2], [1, 2, 3]])  # 1, 1 needs a blank between: 4 frames for sample 0
    leaf = ember.tensor(x, requires_grad=True)
    lp_e = F.log_softmax(leaf, 2)
    lp_t = TF.log_softmax(torch.tensor(x), 2)
    for zi in (False, True):
        got = nn.CTCLoss(zero_infinity=zi, reduction="none")(lp_e, ember.tensor(tg), [3, 3], [3, 3])
        want = torch.nn.CTCLoss(zero_infinity=zi, reduction="none")(lp_t, torch.tensor(tg),
                                                                     [3, 3], [3, 3])
        np.testing.assert_allclose(got.detach().numpy(), want.numpy())
    got.sum().backward()  # zero_infinity: the infeasible sample contributes 0
    tleaf = torch.tensor(x, requires_grad=True)
    torch.nn.CTCLoss(zero_infinity=True, reduction="sum")(TF.log_softmax(tleaf, 2),
                                                          torch.tensor(tg), [3, 3],
                                                          [3, 3]).backward()
    np.testing.assert_allclose(leaf.grad.numpy(), tleaf.grad.numpy(), atol=1e-12)
    with pytest.raises(RuntimeError, match="labels"):
        F.ctc_loss(lp_e, ember.tensor(np.array([[1, 7, 2], [1, 2, 3]])), [3, 3], [3, 3])
    with pytest.raises(RuntimeError, match="input lengths"):
        F.ctc_loss(lp_e, ember.tensor(tg), [4, 3], [3, 3])


def test_linear_cross_entropy_matches_torch():
    rng = np.random.default_rng(14)
    w, b = rng.standard_normal((5, 3)), rng.standard_normal(5)
    t = np.array([0, 4, -100, 2])
    _check(lambda x: F.linear_cross_entropy(x, ember.tensor(w), ember.tensor(t),
                                            linear_bias=ember.tensor(b)),
           lambda x: TF.linear_cross_entropy(x, torch.tensor(w), torch.tensor(t),
                                             linear_bias=torch.tensor(b)), (4, 3))
    wk = rng.standard_normal((4, 2, 3))
    tk = rng.integers(0, 4, (5, 2))
    _check(lambda x: F.linear_cross_entropy(x, ember.tensor(wk), ember.tensor(tk),
                                            label_smoothing=0.2, reduction="none"),
           lambda x: TF.linear_cross_entropy(x, torch.tensor(wk), torch.tensor(tk),
                                             label_smoothing=0.2, reduction="none"), (5, 3))
    with pytest.raises(RuntimeError, match="in_features"):
        F.linear_cross_entropy(ember.randn(2, 4), ember.tensor(w), ember.tensor(t[:2]))


def test_interpolate_exports_to_onnx_every_mode():
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    import io
    import ember.onnx
    rng = np.random.default_rng(15)
    for shape, kw in [((1, 2, 7, 5), dict(size=(3, 2), mode="area")),  # not a multiple
                      ((1, 1, 5, 4, 6), dict(size=(2, 3, 4), mode="area")),
                      ((1, 2, 4, 5), dict(scale_factor=1.7, mode="bicubic")),
                      ((1, 2, 3, 4, 2), dict(size=(5, 3, 4), mode="trilinear")),
                      ((1, 2, 5), dict(scale_factor=1.6, mode="nearest-exact"))]:
        x = ember.tensor(rng.standard_normal(shape).astype(np.float32))

        def fn(a, kw=kw):
            return F.interpolate(a, **kw)
        buf = io.BytesIO()
        ember.onnx.export(fn, (x,), buf, opset_version=17)
        sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
        got = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})[0]
        np.testing.assert_allclose(got, fn(x).numpy(), atol=1e-5, err_msg=str(kw))


def test_adaptive_log_softmax_with_loss_matches_torch():
    rng = np.random.default_rng(16)
    kw = dict(in_features=16, n_classes=10, cutoffs=[3, 6], head_bias=True)
    em = nn.AdaptiveLogSoftmaxWithLoss(**kw).double()
    tm = torch.nn.AdaptiveLogSoftmaxWithLoss(**kw).double()
    assert sorted(em.state_dict()) == sorted(tm.state_dict())
    em.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    x, t = rng.standard_normal((7, 16)), np.array([0, 2, 3, 5, 6, 9, 1])
    ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    a, b = em(ex, ember.tensor(t)), tm(tx, torch.tensor(t))
    np.testing.assert_allclose(a.output.detach().numpy(), b.output.detach().numpy())
    a.loss.backward()
    b.loss.backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), atol=1e-12)
    for (n, p), (_, q) in zip(sorted(em.named_parameters()), sorted(tm.named_parameters())):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), atol=1e-12, err_msg=n)
    np.testing.assert_allclose(em.log_prob(ember.tensor(x)).detach().numpy(),
                               tm.log_prob(torch.tensor(x)).detach().numpy())
    np.testing.assert_array_equal(em.predict(ember.tensor(x)).numpy(),
                                  tm.predict(torch.tensor(x)).numpy())
    with pytest.raises(RuntimeError, match="Target values"):
        em(ember.tensor(x), ember.tensor(np.array([0, 1, 2, 3, 4, 5, 10])))
    with pytest.raises(ValueError, match="cutoffs"):
        nn.AdaptiveLogSoftmaxWithLoss(16, 10, [6, 3])


@pytest.mark.filterwarnings("ignore:enable_nested_tensor")
@pytest.mark.parametrize("extra", [{}, dict(batch_first=True, norm_first=True,
                                            activation="gelu")])
def test_transformer_matches_torch(extra):
    kw = dict(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=2,
              dim_feedforward=16, dropout=0.0, **extra)
    torch.manual_seed(0)
    tm = torch.nn.Transformer(**kw).double().eval()
    em = nn.Transformer(**kw).double()
    assert sorted(em.state_dict()) == sorted(tm.state_dict())
    em.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    rng = np.random.default_rng(17)
    bf = extra.get("batch_first", False)
    src = rng.standard_normal((3, 5, 8) if bf else (5, 3, 8))
    tgt = rng.standard_normal((3, 4, 8) if bf else (4, 3, 8))
    mask = nn.Transformer.generate_square_subsequent_mask(4, dtype=ember.float64)
    tmask = torch.nn.Transformer.generate_square_subsequent_mask(4, dtype=torch.float64)
    np.testing.assert_array_equal(mask.numpy(), tmask.numpy())
    kpm = np.zeros((3, 5), bool)
    kpm[1, 3:] = True
    es, et = ember.tensor(src, requires_grad=True), ember.tensor(tgt, requires_grad=True)
    ts, tt = torch.tensor(src, requires_grad=True), torch.tensor(tgt, requires_grad=True)
    a = em(es, et, tgt_mask=mask, src_key_padding_mask=ember.tensor(kpm),
           memory_key_padding_mask=ember.tensor(kpm))
    b = tm(ts, tt, tgt_mask=tmask, src_key_padding_mask=torch.tensor(kpm),
           memory_key_padding_mask=torch.tensor(kpm))
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), atol=1e-12)
    a.sum().backward()
    b.sum().backward()
    np.testing.assert_allclose(es.grad.numpy(), ts.grad.numpy(), atol=1e-12)
    np.testing.assert_allclose(et.grad.numpy(), tt.grad.numpy(), atol=1e-12)


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


# scaled_dot_product_attention's fused kernel (ember/kernels/attention.py) against torch
SDPA_CASES = [  # (q, k, v shapes, mask kind, is_causal, scale)
    (((2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 3)), None, False, None),
    (((2, 3, 6, 4), (2, 3, 6, 4), (2, 3, 6, 3)), None, True, 0.3),
    (((2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 3)), "bool", False, None),
    (((2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 3)), "float", False, 0.7),
    (((2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 3)), "float_broadcast", False, None),
    (((5, 4), (7, 4), (7, 3)), "bool", False, None),
]


def _sdpa_mask(kind, dtype, rng):
    m = rng.random((5, 7)) > 0.4
    m[1] = False  # a row that attends to nothing
    if kind == "bool":
        return m
    if kind == "float":
        return np.where(m, rng.standard_normal((5, 7)), -np.inf).astype(dtype)
    if kind == "float_broadcast":
        return rng.standard_normal((3, 1, 7)).astype(dtype)
    return None


@pytest.mark.parametrize("dtype,atol", [(np.float32, 2e-6), (np.float64, 1e-12)])
@pytest.mark.parametrize("case", range(len(SDPA_CASES)))
def test_sdpa_fused_matches_torch_forward_and_backward(case, dtype, atol):
    shapes, kind, causal, scale = SDPA_CASES[case]
    rng = np.random.default_rng(case)
    arrays = [rng.standard_normal(s).astype(dtype) for s in shapes]
    mask = _sdpa_mask(kind, dtype, rng)
    e = [ember.tensor(a, requires_grad=True) for a in arrays]
    t = [torch.tensor(a, requires_grad=True) for a in arrays]
    em = None if mask is None else ember.tensor(mask)
    tm = None if mask is None else torch.tensor(mask)
    y = F.scaled_dot_product_attention(*e, em, is_causal=causal, scale=scale)
    ty = TF.scaled_dot_product_attention(*t, tm, is_causal=causal, scale=scale)
    assert type(y.grad_fn).__name__ == "ScaledDotProductAttentionFusedBackward0"
    assert y.dtype == ember.float32 if dtype == np.float32 else y.dtype == ember.float64
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), atol=atol)
    g = rng.standard_normal(tuple(ty.shape)).astype(dtype)
    y.backward(ember.tensor(g))
    ty.backward(torch.tensor(g))
    for a, b in zip(e, t):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), atol=atol)


def test_sdpa_fused_float_mask_gradient_matches_torch():
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal(s) for s in ((2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 3)))
    m = rng.standard_normal((3, 1, 7))
    e = [ember.tensor(a, requires_grad=True) for a in (q, k, v, m)]
    t = [torch.tensor(a, requires_grad=True) for a in (q, k, v, m)]
    (F.scaled_dot_product_attention(*e[:3], e[3]) ** 2).sum().backward()
    (TF.scaled_dot_product_attention(*t[:3], t[3]) ** 2).sum().backward()
    for a, b in zip(e, t):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), atol=1e-12)


def test_sdpa_fused_gradcheck_and_gradgradcheck_in_float64():
    from ember.autograd.gradcheck import gradcheck, gradgradcheck
    rng = np.random.default_rng(4)
    q, k, v = (ember.tensor(rng.standard_normal(s), requires_grad=True)
               for s in ((1, 2, 4, 3), (1, 2, 5, 3), (1, 2, 5, 2)))
    mask = ember.tensor(rng.standard_normal((4, 5)), requires_grad=True)
    bmask = ember.tensor(rng.random((4, 5)) > 0.3)
    assert gradcheck(lambda a, b, c: F.scaled_dot_product_attention(a, b, c), (q, k, v))
    assert gradcheck(lambda a, b, c, m: F.scaled_dot_product_attention(a, b, c, m),
                     (q, k, v, mask))
    assert gradcheck(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, bmask, scale=0.4),
                     (q, k, v))
    qc = ember.tensor(rng.standard_normal((1, 2, 5, 3)), requires_grad=True)
    assert gradcheck(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True),
                     (qc, k, v))
    # create_graph: the backward in ember ops recomputes the probabilities from q and k
    assert gradgradcheck(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True),
                         (qc, k, v))
    assert gradgradcheck(lambda a, b, c, m: F.scaled_dot_product_attention(a, b, c, m),
                         (q, k, v, mask))


def test_sdpa_fused_dropout_equals_unfused_path_and_keeps_expectation():
    from ember.autograd.formulas import attention_probs
    rng = np.random.default_rng(5)
    q, k, v = (ember.tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True)
               for s in ((2, 2, 6, 4), (2, 2, 6, 4), (2, 2, 6, 3)))
    ember.manual_seed(7)
    y = F.scaled_dot_product_attention(q, k, v, dropout_p=0.3, is_causal=True)
    ember.manual_seed(7)  # the unfused form: dropout on the probabilities, same generator
    p = attention_probs(q, k, None, True, 0.5)
    want = F.dropout(p, 0.3, True) @ v
    np.testing.assert_allclose(y.detach().numpy(), want.detach().numpy(), rtol=1e-6, atol=1e-6)
    grads = ember.autograd.grad(y.sum(), (q, k, v))
    wgrads = ember.autograd.grad(want.sum(), (q, k, v))
    for a, b in zip(grads, wgrads):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-5)
    # dropout_p=0 is deterministic; the mean over many draws is the undropped output
    y0 = F.scaled_dot_product_attention(q, k, v, is_causal=True).detach().numpy()
    np.testing.assert_array_equal(
        F.scaled_dot_product_attention(q, k, v, dropout_p=0.0, is_causal=True).detach().numpy(),
        y0)
    with ember.no_grad():
        draws = np.stack([F.scaled_dot_product_attention(q, k, v, dropout_p=0.5,
                                                         is_causal=True).numpy()
                          for _ in range(400)])
    se = draws.std(0) / np.sqrt(len(draws))  # the mean within 5 standard errors
    assert np.all(np.abs(draws.mean(0) - y0) <= 5 * se + 1e-6)
    # row 0 attends to one key: each draw keeps it (scaled by 2) or zeroes it
    kept = np.mean(np.isclose(draws[..., 0, :], 2 * y0[..., 0, :]))
    assert np.all(np.isclose(draws[..., 0, :], 2 * y0[..., 0, :]) | (draws[..., 0, :] == 0))
    assert 0.4 < kept < 0.6
