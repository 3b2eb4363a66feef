"""nn ops of issue 12 against torch: interpolate (all modes, scale_factor semantics), forward and
backward; errors. Spec samples (derivatives.yaml) add gradcheck in float64."""
import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.errors import UnsupportedError

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
    with pytest.raises(UnsupportedError, match="antialias"):
        F.interpolate(x, size=(2, 2), mode="bilinear", antialias=True)
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
