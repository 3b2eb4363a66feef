"""Dropout (ember/nn/modules/dropout.py): channel dropout (Dropout1d/2d/3d,
feature_alpha_dropout) against torch 2.13: output shape, warnings, which dims share one keep/drop
draw, scaling, and errors, for every input rank; train-mode statistics; eval mode is the
identity."""
import warnings

import numpy as np
import pytest
import torch

import ember
from ember import nn
from ember.nn import functional as F
from ember.errors import EmberRuntimeError
from tests.nn import layer_cases

CASES = [("dropout1d", s) for s in [(3, 4), (2, 3, 4)]] + \
        [("dropout2d", s) for s in [(3, 4), (2, 3, 4), (2, 3, 4, 5), (1, 2, 3, 4, 5)]] + \
        [("dropout3d", s) for s in [(3,), (3, 4), (2, 3, 4), (2, 3, 4, 5), (2, 3, 4, 5, 6),
                                    (1, 2, 3, 4, 5, 6)]] + \
        [("feature_alpha_dropout", s) for s in [(3, 4), (2, 3, 4), (2, 3, 4, 5)]]


def _run(mod, name, shape, **kw):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = getattr(mod, name)(mod_ones(mod, shape), 0.5, True, **kw)
    return out, [(x.category, str(x.message)) for x in w]


def mod_ones(mod, shape):
    return torch.ones(shape) if mod is torch.nn.functional else ember.ones(shape)


def _mask_dims(y, draw_dims):
    """The dims along which values vary can only be ``draw_dims`` (one draw per index there)."""
    for d in range(y.ndim):
        if d not in draw_dims:
            assert (y == y.take([0], axis=d)).all(), (d, draw_dims)


def _draw_dims(tout, shape):
    """Dims torch draws independently along: found from many seeds."""
    dims = set()
    for seed in range(20):
        torch.manual_seed(seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            y = torch.nn.functional.__dict__[tout](torch.ones(shape), 0.5, True).numpy()
        dims |= {d for d in range(y.ndim) if not (y == y.take([0], axis=d)).all()}
    return dims


@pytest.mark.parametrize("name,shape", CASES)
def test_feature_dropout_shape_warnings_structure_match_torch(name, shape):
    tout, twarn = _run(torch.nn.functional, name, shape)
    eout, ewarn = _run(F, name, shape)
    assert tuple(eout.shape) == tuple(tout.shape) == shape
    assert ewarn == twarn
    assert eout.dtype == ember.float32
    y = eout.numpy()
    _mask_dims(y, _draw_dims(name, shape))
    if name != "feature_alpha_dropout":   # kept channels are scaled by 1/(1-p)
        assert set(np.unique(y)) <= {0.0, 2.0}
    else:
        assert np.allclose(sorted(set(np.unique(y))), sorted(set(np.unique(tout.numpy()))))


@pytest.mark.parametrize("name,shape", [("dropout1d", (3,)), ("dropout1d", (2, 3, 4, 5)),
                                        ("dropout2d", (3,)), ("feature_alpha_dropout", (3,))])
def test_feature_dropout_bad_rank_raises_as_torch(name, shape):
    with pytest.raises(RuntimeError):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            getattr(torch.nn.functional, name)(torch.ones(shape), 0.5, True)
    with pytest.raises(EmberRuntimeError, match=name):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            getattr(F, name)(ember.ones(shape), 0.5, True)


def test_dropout2d_unbatched_3d_draws_per_row_as_torch():
    # torch reads (C, H, W) as (N, C, L): one draw per (dim0, dim1) pair, constant along dim 2
    ember.manual_seed(0)
    with pytest.warns(UserWarning, match="assuming that channel-wise 1D dropout"):
        y = nn.Dropout2d(0.5)(ember.ones(4, 6, 5)).numpy()
    assert (y == y[:, :, :1]).all()
    assert len(np.unique(y[:, :, 0])) == 2


@pytest.mark.parametrize("mod,shape,target", [("Dropout2d", (3, 4, 5), (3, 4, 5)),
                                              ("Dropout3d", (3, 4, 5, 6), (3, 4, 5, 6))])
def test_unbatched_module_then_loss_trains(mod, shape, target):
    # was: the mask broadcast the output to a larger shape and the loss refused it
    x = ember.randn(*shape, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = getattr(nn, mod)(0.25)(x)
    assert tuple(y.shape) == target
    nn.MSELoss()(y, ember.zeros(target)).backward()
    assert tuple(x.grad.shape) == shape
    xv, yv = x.detach().numpy(), y.detach().numpy()
    mask = yv / xv                       # 0 or 1/(1-p) per channel
    assert np.all(np.isclose(mask, 0.0) | np.isclose(mask, 1 / 0.75))
    np.testing.assert_allclose(x.grad.numpy(), 2 * yv * mask / x.numel(), rtol=1e-5, atol=1e-7)


def test_dropout3d_unbatched_draws_per_channel():
    ember.manual_seed(1)
    y = F.dropout3d(ember.ones(8, 2, 3, 4), 0.5, True).numpy()
    assert (y == y[:, :1, :1, :1]).all()
    assert len(np.unique(y[:, 0, 0, 0])) == 2


def test_inplace_unbatched_dropout3d_writes_input():
    x = ember.ones(6, 2, 3, 4)
    ember.manual_seed(2)
    y = F.dropout3d(x, 0.5, True, inplace=True)
    assert tuple(y.shape) == (6, 2, 3, 4)
    assert np.array_equal(x.numpy(), y.numpy())


@pytest.mark.parametrize("name", ["dropout2d", "dropout3d", "feature_alpha_dropout"])
def test_eval_and_p0_any_rank_is_identity_as_torch(name):
    x = ember.ones(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert np.array_equal(getattr(F, name)(x, 0.5, False).numpy(), np.ones(3))
        assert np.array_equal(getattr(F, name)(x, 0.0, True).numpy(), np.ones(3))


LAYER_CASES = layer_cases.cases(layer_cases.CASES, "dropout")


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("name,src,specs", LAYER_CASES, ids=[c[0] for c in LAYER_CASES])
def test_layer_matches_torch(name, src, specs, train):
    layer_cases.check_against_torch(src, specs, train)


def test_dropout_train_statistics():
    ember.manual_seed(0)
    x = ember.ones(200, 50)
    y = nn.Dropout(0.3)(x)
    kept = (y.numpy() != 0).mean()
    assert abs(kept - 0.7) < 0.02
    np.testing.assert_allclose(y.numpy()[y.numpy() != 0], 1 / 0.7, rtol=1e-6)
    d2 = nn.Dropout2d(0.5)(ember.ones(8, 16, 3, 3)).numpy()
    per_channel = d2.reshape(8, 16, 9)
    assert np.all((per_channel == 0).all(-1) | (per_channel == 2.0).all(-1))
    m = nn.Dropout(0.5).eval()
    assert m(x) is x
