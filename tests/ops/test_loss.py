"""Loss functions (ember/ops/loss.py) against torch."""
import numpy as np
import pytest

import ember


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


@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div_at_zero_and_negative_targets_as_torch(log_target):
    """kl_div is xlogy(t, t) - t * x: NaN where a probability target is negative (0 was returned),
    0 where it is 0, and the input's gradient -t everywhere, as torch's."""
    import torch
    x = [[-1.0, -2.0, -0.5, -0.1]]
    t = [[-0.5, 0.0, 0.3, 1.2]]
    outs = []
    for lib in (torch, ember):
        a = lib.tensor(x, dtype=lib.float64, requires_grad=True)
        b = lib.tensor(t, dtype=lib.float64, requires_grad=True)
        y = lib.nn.functional.kl_div(a, b, reduction="none", log_target=log_target)
        y.sum().backward()
        outs.append([np.asarray(v.detach().numpy()) for v in (y, a.grad, b.grad)])
    for got, want in zip(outs[1], outs[0]):
        np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True)


# binary_cross_entropy: a kernel op with torch's derivative formulas (ember/ops/spec/loss.yaml)
_BCE_X = [1.0, 0.0, 0.5, 0.25, 1.0, 0.0, 0.9]
_BCE_T = [0.0, 0.0, 0.3, 1.0, 1.0, 1.0, 0.2]
_BCE_W = [0.5, 2.0, 1.5, 1.0, 3.0, 0.25, 1.0]


def _bce_both(dtype, reduction, weighted):
    """(torch, ember) results: loss, its gradients w.r.t. input and target, and the second
    derivatives of sum(d/dx) w.r.t. input and target and of sum(d/dt) w.r.t. input."""
    import torch
    outs = []
    for lib in (torch, ember):
        dt = getattr(lib, dtype)
        x = lib.tensor(_BCE_X, dtype=dt, requires_grad=True)
        t = lib.tensor(_BCE_T, dtype=dt, requires_grad=True)
        w = lib.tensor(_BCE_W, dtype=dt) if weighted else None
        loss = lib.nn.functional.binary_cross_entropy(x, t, w, reduction=reduction)
        g = lib.ones(len(_BCE_X), dtype=dt) if reduction == "none" else None
        gx, gt = lib.autograd.grad(loss, (x, t), g, create_graph=True)
        gxx, gxt = lib.autograd.grad(gx.sum(), (x, t))
        (gtx,) = lib.autograd.grad(gt.sum(), (x,))
        outs.append([v.detach().numpy() for v in (loss, gx, gt, gxx, gxt, gtx)])
    return outs


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True])
def test_binary_cross_entropy_gradients_at_0_and_1_as_torch(dtype, reduction, weighted):
    """At an input of exactly 0 or 1 the input's gradient is grad (x - t) / max(x (1 - x), 1e-12)
    (finite: 1e12, 0, -1e12), as torch's; the composite of log and clamp gave NaN there. The
    target's gradient -logit(x) is infinite there in both; second derivatives are torch's."""
    ref, got = _bce_both(dtype, reduction, weighted)
    names = ("loss", "d/dx", "d/dt", "d2/dx2", "d2/dxdt", "d2/dtdx")
    for name, e, r in zip(names, got, ref):
        assert e.dtype == r.dtype, name
        np.testing.assert_allclose(e, r, rtol=1e-5 if dtype == "float32" else 1e-12,
                                   err_msg=name)
    assert np.isfinite(got[1]).all()


def test_binary_cross_entropy_double_backward_through_grad_output_as_torch():
    import torch
    outs = []
    for lib in (torch, ember):
        x = lib.tensor(_BCE_X, dtype=lib.float64, requires_grad=True)
        t = lib.tensor(_BCE_T, dtype=lib.float64)
        v = lib.tensor([0.5, 1.0, 2.0, -1.0, 1.0, 0.5, 3.0], dtype=lib.float64,
                       requires_grad=True)
        loss = lib.nn.functional.binary_cross_entropy(x, t, reduction="none")
        (gx,) = lib.autograd.grad(loss, (x,), v, create_graph=True)
        (gv,) = lib.autograd.grad((gx * lib.arange(7, dtype=lib.float64)).sum(), (v,))
        outs.append(gv.numpy())
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-12)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True])
def test_binary_cross_entropy_gradcheck_and_gradgradcheck(reduction, weighted):
    import ember.nn.functional as F
    rng = np.random.default_rng(3)
    x = ember.tensor(rng.uniform(0.1, 0.9, (3, 4)), requires_grad=True)
    t = ember.tensor(rng.uniform(0.0, 1.0, (3, 4)), requires_grad=True)
    w = ember.tensor(rng.uniform(0.5, 2.0, (4,))) if weighted else None

    def f(a, b):
        return F.binary_cross_entropy(a, b, w, reduction=reduction)
    assert ember.autograd.gradcheck(f, (x, t))
    assert ember.autograd.gradgradcheck(f, (x, t))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_binary_cross_entropy_reduced_precision_as_torch(dtype):
    """float16/bfloat16: loss and input gradient as torch's within the dtype's precision; at
    x = 1, t = 0 the gradient is 1/EPSILON rounded (bfloat16) or inf (float16, where EPSILON
    rounds to 0; 0/0 at x = t = 0 is NaN there, as torch's)."""
    import torch
    outs = []
    for lib in (torch, ember):
        dt = getattr(lib, dtype)
        x = lib.tensor([1.0, 0.0, 0.3, 0.7, 0.5], dtype=dt, requires_grad=True)
        t = lib.tensor([0.0, 0.0, 1.0, 0.5, 0.25], dtype=dt)
        loss = lib.nn.functional.binary_cross_entropy(x, t, reduction="none")
        (gx,) = lib.autograd.grad(loss.sum(), (x,))
        assert loss.dtype == dt and gx.dtype == dt
        outs.append([loss.detach().float().numpy(), gx.float().numpy()])
    for e, r in zip(outs[1], outs[0]):
        np.testing.assert_allclose(e, r, rtol=1e-2, equal_nan=True)


def test_binary_cross_entropy_errors_as_torch():
    import ember.nn.functional as F
    x = ember.tensor([0.2, 0.7])
    for bad in ([1.5, 0.5], [-0.1, 0.5], [float("nan"), 0.5]):
        with pytest.raises(ember.errors.EmberRuntimeError,
                           match="binary_cross_entropy: all elements of input should be between "
                                 "0 and 1"):
            F.binary_cross_entropy(ember.tensor(bad), ember.zeros(2))
    with pytest.raises(ember.errors.EmberValueError, match=r"target size \(\[3\]\) must be the "
                                                           r"same as input size \(\[2\]\)"):
        F.binary_cross_entropy(x, ember.zeros(3))
    with pytest.raises(ember.errors.EmberValueError, match="'foo' is not a valid|foo is not a"):
        F.binary_cross_entropy(x, ember.zeros(2), reduction="foo")
    with pytest.raises(ember.errors.EmberRuntimeError, match="target of dtype float32.*float64"):
        F.binary_cross_entropy(x, ember.zeros(2, dtype=ember.float64))
    with pytest.raises(ember.errors.EmberRuntimeError, match="binary_cross_entropy: shapes"):
        F.binary_cross_entropy(x, ember.zeros(2), ember.ones(3))


def test_bceloss_module_weight_and_empty_mean_as_torch():
    import torch
    rng = np.random.default_rng(1)
    x, t, w = rng.uniform(0, 1, (3, 4)), rng.uniform(0, 1, (3, 4)), rng.uniform(0, 2, (4,))
    ref = torch.nn.BCELoss(weight=torch.tensor(w))(torch.tensor(x), torch.tensor(t))
    got = ember.nn.BCELoss(weight=ember.tensor(w))(ember.tensor(x), ember.tensor(t))
    assert float(got) == pytest.approx(float(ref), rel=1e-12)
    empty = ember.nn.functional.binary_cross_entropy(ember.zeros(0), ember.zeros(0))
    assert np.isnan(float(empty))
