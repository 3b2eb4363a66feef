"""The backward engine (ember/autograd/engine.py) and autograd API: accumulation, hooks,
retain/create graph, grad options, detach rules, in-place history, gradcheck."""

import numpy as np
import pytest

import ember
from ember.autograd import Function, gradcheck


def test_backward_accumulates_and_leaf_flags():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    assert x.is_leaf and not y.is_leaf and y.requires_grad
    y.backward()
    assert x.grad.tolist() == [2.0, 4.0]
    (x * 3).sum().backward()
    assert x.grad.tolist() == [5.0, 7.0]


def test_create_graph_gives_higher_order_derivatives():
    x = ember.tensor([2.0], requires_grad=True)
    y = x ** 3
    (g,) = ember.autograd.grad(y.sum(), x, create_graph=True)
    (gg,) = ember.autograd.grad(g.sum(), x, create_graph=True)
    (ggg,) = ember.autograd.grad(gg.sum(), x)
    assert g.item() == 12.0 and gg.item() == 12.0 and ggg.item() == 6.0


def test_grad_options():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    z = ember.tensor([1.0], requires_grad=True)
    y = x * 2
    with pytest.raises(RuntimeError, match="allow_unused"):
        ember.autograd.grad(y.sum(), [x, z], retain_graph=True)
    gx, gz = ember.autograd.grad(y, [x, z], grad_outputs=ember.ones(2), allow_unused=True,
                                 retain_graph=True)
    assert gx.tolist() == [2.0, 2.0] and gz is None
    assert x.grad is None
    with pytest.raises(RuntimeError, match="implicitly created only for scalar"):
        y.backward()
    with pytest.raises(RuntimeError, match="does not require grad"):
        ember.ones(2).sum().backward()


def test_hooks_and_retain_grad():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    x.register_hook(lambda g: g * 10)
    y = x * 3
    y.retain_grad()
    seen = []
    y.register_hook(lambda g: seen.append(g.tolist()))
    y.sum().backward()
    assert seen == [[1.0, 1.0]] and y.grad.tolist() == [1.0, 1.0]
    assert x.grad.tolist() == [30.0, 30.0]
    h = y.grad_fn.register_hook(lambda gi, go: None)
    h.remove()


def test_detach_and_requires_grad_rules():
    x = ember.ones(2, requires_grad=True)
    d = (x * 2).detach()
    assert not d.requires_grad and d.grad_fn is None
    with pytest.raises(RuntimeError, match="floating point"):
        ember.ones(2, dtype=ember.int64).requires_grad_()
    with pytest.raises(RuntimeError, match="leaf"):
        (x * 2).requires_grad_(False)


def test_inplace_history_is_rebased():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.mul_(y)
    y.sum().backward()
    assert x.grad.tolist() == [8.0, 16.0]
    with pytest.raises(RuntimeError, match="leaf Variable"):
        x.add_(1)
    with ember.no_grad():
        x.add_(1)
    assert x.tolist() == [2.0, 3.0]


def test_setitem_is_differentiable():
    x = ember.zeros(3, requires_grad=True)
    v = ember.tensor(5.0, requires_grad=True)
    y = x * 1
    y[1] = v * 2
    y.sum().backward()
    assert x.grad.tolist() == [1.0, 0.0, 1.0] and v.grad.item() == 2.0


def test_deep_graph_has_no_recursion_limit():
    x = ember.tensor([1.0], requires_grad=True)
    y = x
    for _ in range(20000):
        y = y + 1
    y.backward()
    assert x.grad.item() == 1.0


def test_gradcheck_catches_a_wrong_derivative():
    class Wrong(Function):
        @staticmethod
        def forward(ctx, x):
            return x * x

        @staticmethod
        def backward(ctx, g):
            return g

    x = ember.tensor([1.0, 2.0], dtype=ember.float64, requires_grad=True)
    with pytest.raises(ember.autograd.GradcheckError):
        gradcheck(Wrong.apply, [x])
    assert gradcheck(Wrong.apply, [x], raise_exception=False) is False


def test_missing_gradients_are_zeros_only_for_differentiable_outputs(monkeypatch):
    """A node whose later outputs no gradient can reach (a max pool's indices, an LSTM layer's
    workspace) gets None for them, not a zero-filled array per backward; a differentiable output
    that received no gradient still gets zeros."""
    from ember.autograd import engine
    seen = []
    real = engine._fill_missing
    monkeypatch.setattr(engine, "_fill_missing", lambda node, g: seen.append(real(node, g))
                        or seen[-1])
    x = ember.randn(2, 3, 8, 8, requires_grad=True)
    y, idx = ember.nn.functional.max_pool2d(x, 2, return_indices=True)
    y.sum().backward()
    assert [g is None for g in seen[-1]] == [False, True]
    lstm = ember.nn.LSTM(4, 5)
    out, (h, c) = lstm(ember.randn(3, 2, 4, requires_grad=True))
    h.sum().backward()      # no gradient for out or c: zeros of their shapes; none for ws
    fill = seen[-1]
    assert [g is None for g in fill] == [False, False, False, True]
    assert fill[0].shape == out.shape and not fill[0].numpy().any()
    assert fill[2].shape == c.shape[1:] and not fill[2].numpy().any()   # (layers, B, H)


def test_grad_takes_torchs_only_inputs_flag_for_a_gradient_penalty():
    """WGAN-GP's penalty (PyTorch-GAN's wgan_gp.py): autograd.grad(..., create_graph=True,
    retain_graph=True, only_inputs=True), then a backward through the gradient; ember's
    parameter gradients match torch's, and only_inputs=False warns as torch's does."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    w, x = rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=(2, 3)).astype(np.float32)
    grads = []
    for lib in (ember, torch):
        weight = lib.tensor(w, requires_grad=True)
        inp = lib.tensor(x, requires_grad=True)
        out = lib.tanh(inp @ weight).sum(1, keepdim=True)
        (g,) = lib.autograd.grad(outputs=out, inputs=inp, grad_outputs=lib.ones(2, 1),
                                 create_graph=True, retain_graph=True, only_inputs=True)
        penalty = ((g.norm(2, dim=1) - 1) ** 2).mean()
        penalty.backward()
        grads.append((g.detach().numpy(), weight.grad.numpy()))
        with pytest.warns(FutureWarning, match="only_inputs argument is deprecated"):
            lib.autograd.grad((inp * 2).sum(), inp, only_inputs=False)
    for mine, theirs in zip(*grads):
        np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-6)


def test_bfloat16_autocast_training_gradients_reach_the_parameters_as_torch():
    """A float32 gradient reaching a bfloat16 output (batch norm's backward, computed in float32;
    ReLU's backward kernel on the raw arrays) is cast to bfloat16 as torch's engine casts it, so
    the products before it see one dtype; the parameters' gradients are float32 and torch's."""
    import torch
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 8)).astype(np.float32)
    y = np.array([0, 1, 2, 0, 1, 2])
    weights, grads = None, {}
    for L in (torch, ember):
        m = L.nn.Sequential(L.nn.Linear(8, 16, bias=False), L.nn.BatchNorm1d(16), L.nn.ReLU(),
                            L.nn.Linear(16, 8), L.nn.ReLU(), L.nn.Linear(8, 3))
        if weights is None:
            weights = [p.detach().numpy().copy() for p in m.parameters()]
        else:   # ember runs on torch's weights
            for p, w in zip(m.parameters(), weights):
                p.data = L.tensor(w)
        with L.autocast(device_type="cpu", dtype=L.bfloat16):
            loss = L.nn.functional.cross_entropy(m(L.tensor(x)), L.tensor(y))
        loss.backward()
        grads[L.__name__] = [(str(p.grad.dtype).split(".")[-1], p.grad.float().numpy())
                             for p in m.parameters()]
    for (de, ge), (dt, gt) in zip(grads["ember"], grads["torch"]):
        assert de == dt == "float32"
        np.testing.assert_allclose(ge, gt, rtol=0.1, atol=0.05 * np.abs(gt).max())
