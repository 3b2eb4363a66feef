"""The summary protos (ember/utils/tensorboard/summary.py) against
torch.utils.tensorboard.summary for the same values: scalars (simple and tensor style),
histograms, images in every data format, pr curves and their counts, audio, custom-scalar
layouts; a scalar of several elements is refused naming add_scalar."""
import numpy as np
import pytest

pytest.importorskip("tensorboard")
torch = pytest.importorskip("torch")

import ember  # noqa: E402
from ember.utils.tensorboard import summary as ES  # noqa: E402
from torch.utils.tensorboard import summary as TS  # noqa: E402

RNG = np.random.default_rng(0)


def _same(e, t):
    assert e.SerializeToString() == t.SerializeToString()


@pytest.mark.parametrize("kw", [{}, {"new_style": True},
                                {"new_style": True, "double_precision": True}])
def test_scalar(kw):
    _same(ES.scalar("loss", ember.tensor(0.25), **kw), TS.scalar("loss", torch.tensor(0.25), **kw))
    _same(ES.scalar("lr", 3, **kw), TS.scalar("lr", 3, **kw))


def test_a_scalar_of_several_elements_is_refused():
    with pytest.raises(ValueError, match="add_scalar"):
        ES.scalar("x", ember.ones(2))


@pytest.mark.parametrize("bins", ["auto", "fd", 7])
def test_histogram(bins):
    v = RNG.standard_normal(300).astype(np.float32)
    _same(ES.histogram("w", ember.tensor(v), bins), TS.histogram("w", torch.tensor(v), bins))


@pytest.mark.parametrize("shape,fmt", [((3, 6, 5), "CHW"), ((6, 5), "HW"), ((6, 5, 3), "HWC"),
                                       ((4, 3, 6, 5), "NCHW"), ((4, 6, 5, 1), "NHWC"),
                                       ((1, 6, 5), "CHW")])
def test_image(shape, fmt):
    img = RNG.random(shape).astype(np.float32)
    _same(ES.image("img", ember.tensor(img), dataformats=fmt),
          TS.image("img", torch.tensor(img), dataformats=fmt))


def test_pr_curve_and_compute_curve():
    labels = (RNG.random(60) > 0.4).astype(np.int64)
    preds = RNG.random(60)
    w = RNG.random(60)
    np.testing.assert_array_equal(ES.compute_curve(labels, preds, 15, w),
                                  TS.compute_curve(labels, preds, 15, w))
    _same(ES.pr_curve("pr", labels, preds, 20), TS.pr_curve("pr", labels, preds, 20))


def test_audio_and_custom_scalars():
    sound = np.sin(np.arange(400) / 7.0)
    _same(ES.audio("s", ember.tensor(sound), 8000), TS.audio("s", torch.tensor(sound), 8000))
    layout = {"cat": {"loss": ["Multiline", ["loss", "lr"]],
                      "band": ["Margin", ["loss", "lo", "hi"]]}}
    _same(ES.custom_scalars(layout), TS.custom_scalars(layout))
