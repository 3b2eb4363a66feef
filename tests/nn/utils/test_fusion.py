"""Conv / linear + batch norm fusion (ember/nn/utils/fusion.py) against torch: the fused
layers' weights, biases, requires_grad and outputs, transposed convolutions, a missing bias or
affine, and the eval-mode and shape checks."""
import copy

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _pair(make_layer, make_bn):
    """The same layer and batch norm (random running statistics) in both libraries, eval."""
    torch.manual_seed(0)
    tl, tb = make_layer(torch), make_bn(torch)
    with torch.no_grad():
        tb.running_mean.uniform_(-1, 1)
        tb.running_var.uniform_(0.5, 2)
        if tb.weight is not None:
            tb.weight.uniform_(0.5, 1.5)
            tb.bias.uniform_(-1, 1)
    el, eb = make_layer(ember), make_bn(ember)
    for t, e in ((tl, el), (tb, eb)):
        e.load_state_dict({k: ember.tensor(v.numpy()) for k, v in t.state_dict().items()})
        t.eval()
        e.eval()
    return (tl, tb), (el, eb)


CONVS = {
    "conv2d": (lambda L: L.nn.Conv2d(3, 4, 3).double(), lambda L: L.nn.BatchNorm2d(4).double(),
               (2, 3, 6, 6), False),
    "conv2d_no_bias": (lambda L: L.nn.Conv2d(3, 4, 3, bias=False).double(),
                       lambda L: L.nn.BatchNorm2d(4, affine=False).double(), (2, 3, 6, 6), False),
    "conv1d": (lambda L: L.nn.Conv1d(3, 5, 3).double(), lambda L: L.nn.BatchNorm1d(5).double(),
               (2, 3, 9), False),
    "conv_transpose2d": (lambda L: L.nn.ConvTranspose2d(3, 4, 3, stride=2).double(),
                         lambda L: L.nn.BatchNorm2d(4).double(), (2, 3, 4, 4), True),
}


@pytest.mark.parametrize("case", sorted(CONVS))
def test_fuse_conv_bn_eval_matches_torch(case):
    make_layer, make_bn, shape, transpose = CONVS[case]
    (tl, tb), (el, eb) = _pair(make_layer, make_bn)
    tf = torch.nn.utils.fuse_conv_bn_eval(tl, tb, transpose=transpose)
    ef = ember.nn.utils.fuse_conv_bn_eval(el, eb, transpose=transpose)
    assert ef is not el and type(ef) is type(el)
    for name in ("weight", "bias"):
        te, ee = getattr(tf, name), getattr(ef, name)
        np.testing.assert_allclose(ee.detach().numpy(), te.detach().numpy(), rtol=1e-12,
                                   atol=1e-12)
        assert isinstance(ee, ember.nn.Parameter) and ee.requires_grad == te.requires_grad
    x = np.random.default_rng(0).standard_normal(shape)
    np.testing.assert_allclose(ef(ember.tensor(x)).detach().numpy(),
                               eb(el(ember.tensor(x))).detach().numpy(), rtol=1e-10, atol=1e-10)
    assert el.weight.detach().numpy().tolist() == tl.weight.detach().numpy().tolist()


@pytest.mark.parametrize("features", [4, 1])
def test_fuse_linear_bn_eval_matches_torch(features):
    (tl, tb), (el, eb) = _pair(lambda L: L.nn.Linear(3, 4).double(),
                               lambda L: L.nn.BatchNorm1d(features).double())
    tf = torch.nn.utils.fuse_linear_bn_eval(tl, tb)
    ef = ember.nn.utils.fuse_linear_bn_eval(el, eb)
    for name in ("weight", "bias"):
        np.testing.assert_allclose(getattr(ef, name).detach().numpy(),
                                   getattr(tf, name).detach().numpy(), rtol=1e-12, atol=1e-12)
    w, b = ember.nn.utils.fuse_linear_bn_weights(el.weight, None, eb.running_mean,
                                                 eb.running_var, eb.eps, eb.weight, eb.bias)
    tw, tb2 = torch.nn.utils.fuse_linear_bn_weights(tl.weight, None, tb.running_mean,
                                                    tb.running_var, tb.eps, tb.weight, tb.bias)
    np.testing.assert_allclose(b.detach().numpy(), tb2.detach().numpy(), rtol=1e-12)
    assert b.requires_grad == tb2.requires_grad


def test_fusion_refuses_training_mode_and_mismatched_features():
    conv, bn = ember.nn.Conv2d(3, 4, 3), ember.nn.BatchNorm2d(4)
    with pytest.raises(ember.errors.EmberError, match="eval"):
        ember.nn.utils.fuse_conv_bn_eval(conv, bn)
    lin, bn3 = ember.nn.Linear(3, 4).eval(), ember.nn.BatchNorm1d(3).eval()
    with pytest.raises(ember.errors.EmberError, match="out_features"):
        ember.nn.utils.fuse_linear_bn_eval(lin, bn3)
    bn_untracked = ember.nn.BatchNorm2d(4, track_running_stats=False).eval()
    with pytest.raises(ember.errors.EmberError, match="running statistics"):
        ember.nn.utils.fuse_conv_bn_eval(copy.deepcopy(conv).eval(), bn_untracked)
