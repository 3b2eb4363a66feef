"""ember/autograd/dispatch.py: what dispatch checks before autograd records an op."""
import numpy as np
import pytest
import torch

import ember
import ember.nn.functional as EF
from ember.errors import EmberRuntimeError


def _loss_calls(lib, F):
    x = lib.tensor(np.random.default_rng(0).random((3, 4)), dtype=lib.float32, requires_grad=True)
    t = lib.tensor([0, 1, 2])
    w = lib.tensor([0.5, 1.0, 2.0, 1.5], requires_grad=True)
    p = lib.tensor(np.random.default_rng(1).random((3, 4)), dtype=lib.float32)
    return {
        "nll_loss": lambda: F.nll_loss(x.log_softmax(1), t, weight=w),
        "cross_entropy": lambda: F.cross_entropy(x, t, weight=w),
        "binary_cross_entropy": lambda: F.binary_cross_entropy(
            x.sigmoid(), p, weight=w.expand(3, 4)),
        "fractional_max_pool2d": lambda: F.fractional_max_pool2d(
            x.reshape(1, 1, 3, 4), 2, output_size=(2, 2),
            _random_samples=lib.rand(1, 1, 2, requires_grad=True)),
    }


@pytest.mark.parametrize("name", ["nll_loss", "cross_entropy", "binary_cross_entropy",
                                  "fractional_max_pool2d"])
def test_an_input_torch_refuses_to_differentiate_is_refused_when_it_requires_grad(name):
    """torch's check_no_requires_grad (spec 'refuses_grad'): a loss weight or pooling samples
    that require grad raise while autograd records (ember used to drop their gradient
    silently); under no_grad, or when they do not require grad, the call runs."""
    with pytest.raises(RuntimeError, match="is not differentiable with respect to argument"):
        _loss_calls(torch, torch.nn.functional)[name]()
    with pytest.raises(EmberRuntimeError, match="is not differentiable with respect to "
                                                "argument '(weight|random_samples)'"):
        _loss_calls(ember, EF)[name]()
    with ember.no_grad():
        _loss_calls(ember, EF)[name]()


def _relu_chain(lib, x, w, inplace_relu):
    y = x * w
    if inplace_relu == "functional":
        (EF if lib is ember else torch.nn.functional).relu(y, inplace=True)
    else:
        y.relu_()
    return y


@pytest.mark.parametrize("form", ["functional", "method"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_relu_in_place_with_autograd_matches_torch(form, dtype):
    """relu_ on a non-leaf is computed in self's memory: values and gradients as torch's, a NaN
    passing its gradient (torch's threshold_backward)."""
    rng = np.random.default_rng(0)
    xa = rng.standard_normal((2, 3, 4, 5)).astype(dtype)
    xa[0, 0, 0, :3] = [np.nan, -0.0, 0.0]
    wa = rng.standard_normal((1, 3, 1, 1)).astype(dtype)
    grads = {}
    for lib in (ember, torch):
        x = lib.tensor(xa, requires_grad=True)
        w = lib.tensor(wa, requires_grad=True)
        y = _relu_chain(lib, x, w, form)
        (y * y * y).sum().backward()
        grads[lib] = (y.detach().numpy(), x.grad.numpy(), w.grad.numpy())
    for e, t in zip(grads[ember], grads[torch]):
        np.testing.assert_allclose(e, t, rtol=1e-6, atol=1e-6, equal_nan=True)


def test_relu_in_place_then_changed_again_is_caught():
    """The saved result is self: a second in-place change before backward raises, as in torch
    (the general path copied the result, and accepted what torch refuses)."""
    x = ember.randn(3, 4, requires_grad=True)
    y = x * 2
    y.relu_()
    y.add_(1)
    with pytest.raises(EmberRuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_relu_in_place_keeps_the_view_and_leaf_rules():
    x = ember.randn(3, 4, requires_grad=True)
    with pytest.raises(EmberRuntimeError, match="leaf Variable"):
        x.relu_()
    base = x * 1
    v = base[1:]
    v.relu_()      # a view: the general path (the base's history rebased)
    base.sum().backward()
    want = np.ones((3, 4), np.float32)
    want[1:] = (x.detach().numpy()[1:] > 0)
    np.testing.assert_array_equal(x.grad.numpy(), want)


def test_relu_in_place_without_autograd_writes_self_and_views(monkeypatch):
    """No autograd: relu_ runs in self's memory, through a view into its base, without the
    out-of-place op (no result to copy back); versions advance; values as torch's."""
    import ember.autograd.dispatch as dispatch_module

    def out_of_place(*args):
        raise AssertionError("relu_ ran out of place")
    monkeypatch.setattr(dispatch_module, "dispatch", out_of_place)
    a = np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32)
    with ember.no_grad():
        x = ember.tensor(a.copy(), requires_grad=True)
        data, v0 = x._data, x._version
        x.relu_()
        assert x._data is data and x._version == v0 + 1
    np.testing.assert_array_equal(x.detach().numpy(), torch.relu(torch.tensor(a)).numpy())
    base = ember.tensor(a.copy())
    base[1:3].relu_()
    want = a.copy()
    want[1:3] = np.maximum(want[1:3], 0)
    np.testing.assert_array_equal(base.numpy(), want)


def test_a_numpy_array_in_a_tensors_place_is_taken_as_one():
    torch = pytest.importorskip("torch")
    t = ember.ones(2)
    for expr in ("t + np.ones(2)", "t * np.array([2.0, 3.0], np.float32)", "t == np.ones(2)",
                 "t - np.ones(2, np.float32)"):     # torch's operators convert the array
        ours = eval(expr, {"t": t, "np": np})
        theirs = eval(expr, {"t": torch.ones(2), "np": np})
        assert str(ours.dtype)[6:] == str(theirs.dtype)[6:], expr
        assert ours.tolist() == theirs.tolist(), expr
    # ember's functions take one too (torch's refuse it)
    assert ember.where(t > 0, t, np.zeros(2, np.float32)).tolist() == [1.0, 1.0]
    x = ember.ones(2, requires_grad=True)
    (x * np.array([2.0, 3.0], np.float32)).sum().backward()
    assert x.grad.tolist() == [2.0, 3.0]
    with pytest.raises(TypeError, match="must be a Tensor, not ndarray"):
        t + np.array(["a", "b"])


def test_a_numpy_bool_scalar_is_a_float_scalar_as_in_torch():
    """torch's argument parser reads ``np.bool_`` as a float number: ``int_tensor *
    np.bool_(True)`` is float32, ``np.bool_(True) * t`` works (ember refused both)."""
    torch = pytest.importorskip("torch")
    for m in (torch, ember):
        r = m.tensor([1, 2]) * np.bool_(True)
        assert str(r.dtype).endswith("float32") and r.tolist() == [1.0, 2.0]
        r = np.bool_(True) * m.tensor([1.0, 2.0])
        assert str(r.dtype).endswith("float32") and r.tolist() == [1.0, 2.0]
        r = m.tensor([True, False]) + np.bool_(True)
        assert str(r.dtype).endswith("float32") and r.tolist() == [2.0, 1.0]


def test_in_place_update_of_an_inference_tensor_outside_inference_mode_raises_as_torch():
    torch = pytest.importorskip("torch")
    for m in (torch, ember):
        with m.inference_mode():
            a = m.zeros(2)
        with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside "
                                               "InferenceMode is not allowed"):
            a.mul_(2)
        b = a.clone()
        b.add_(1)
        assert b.tolist() == [1.0, 1.0]
