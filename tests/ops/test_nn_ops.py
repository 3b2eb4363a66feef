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
