"""The optimizers' one-pass updates on the pointwise engine (ember.optim._fused): the fused
in-place Adam update equals ember's NumPy update and torch's Adam; SGD with momentum's equals
ember's NumPy update bit for bit and torch's SGD; Nesterov, SGD's first step (the buffer is the
gradient), AMSGrad and small parameters keep the NumPy path."""
import numpy as np
import pytest
import torch

import ember
from ember.kernels.pointwise import has_compiler
from ember.optim import _fused


@pytest.mark.skipif(not has_compiler(), reason="numba not importable")
@pytest.mark.parametrize("cls,wd", [("Adam", 0.0), ("Adam", 0.01), ("AdamW", 0.01)])
def test_fused_adam_matches_numpy_path_and_torch(cls, wd, monkeypatch):
    n = _fused.MIN_SIZE + 17
    rng = np.random.default_rng(0)
    w = rng.standard_normal(n).astype(np.float32)
    results = []
    for fused_on in (True, False):
        if not fused_on:
            monkeypatch.setattr(_fused, "MIN_SIZE", 1 << 62)
        p = ember.tensor(w.copy(), requires_grad=True)
        opt = getattr(ember.optim, cls)([p], lr=1e-2, weight_decay=wd)
        r = np.random.default_rng(1)
        for _ in range(4):
            p.grad = ember.tensor(r.standard_normal(n).astype(np.float32))
            opt.step()
        results.append(p._data.copy())
    tp = torch.tensor(w.copy(), requires_grad=True)
    topt = getattr(torch.optim, cls)([tp], lr=1e-2, weight_decay=wd)
    r = np.random.default_rng(1)
    for _ in range(4):
        tp.grad = torch.from_numpy(r.standard_normal(n).astype(np.float32))
        topt.step()
    np.testing.assert_allclose(results[0], results[1], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(results[0], tp.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_small_and_amsgrad_keep_numpy_path(monkeypatch):
    calls = []
    monkeypatch.setattr(_fused, "adam_", lambda *a: calls.append(a))
    p = ember.tensor(np.ones(16, np.float32), requires_grad=True)
    p.grad = ember.tensor(np.ones(16, np.float32))
    ember.optim.Adam([p]).step()
    assert not calls and not _fused.usable(np.ones(16, np.float32))
    big = ember.tensor(np.ones(_fused.MIN_SIZE, np.float32), requires_grad=True)
    big.grad = ember.tensor(np.ones(_fused.MIN_SIZE, np.float32))
    ember.optim.Adam([big], amsgrad=True).step()
    assert not calls


def _run(w, grads, monkeypatch, fused, **kw):
    with monkeypatch.context() as m:
        if not fused:
            m.setattr(_fused, "MIN_SIZE", 1 << 62)
        p = ember.tensor(w.copy(), requires_grad=True)
        opt = ember.optim.SGD([p], **kw)
        for g in grads:
            p.grad = ember.tensor(g)
            opt.step()
    return p._data.copy(), opt.state[p]["momentum_buffer"]._data.copy()


@pytest.mark.skipif(not has_compiler(), reason="numba not importable")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kw", [dict(momentum=0.9), dict(momentum=0.5, dampening=0.3),
                                dict(momentum=0.9, weight_decay=0.01, maximize=True)])
def test_fused_sgd_momentum_equals_numpy_path_and_torch(dtype, kw, monkeypatch):
    torch = pytest.importorskip("torch")
    n = _fused.MIN_SIZE + 17
    r = np.random.default_rng(0)
    w = r.standard_normal(n).astype(dtype)
    grads = [r.standard_normal(n).astype(dtype) for _ in range(4)]
    calls = []
    real = _fused.sgd_momentum_
    monkeypatch.setattr(_fused, "sgd_momentum_", lambda *a: calls.append(1) or real(*a))
    x_f, b_f = _run(w, grads, monkeypatch, True, lr=0.1, **kw)
    assert len(calls) == 3                  # every step but the first (buffer = gradient)
    x_n, b_n = _run(w, grads, monkeypatch, False, lr=0.1, **kw)
    assert len(calls) == 3
    np.testing.assert_array_equal(x_f, x_n)
    np.testing.assert_array_equal(b_f, b_n)
    tp = torch.tensor(w.copy(), requires_grad=True)
    topt = torch.optim.SGD([tp], lr=0.1, **kw)
    for g in grads:
        tp.grad = torch.from_numpy(g)
        topt.step()
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(x_f, tp.detach().numpy(), rtol=tol, atol=tol)


def test_nesterov_and_small_parameters_keep_numpy_path(monkeypatch):
    calls = []
    monkeypatch.setattr(_fused, "sgd_momentum_", lambda *a: calls.append(a))
    for n, kw in [(16, {}), (_fused.MIN_SIZE, dict(nesterov=True))]:
        p = ember.tensor(np.ones(n, np.float32), requires_grad=True)
        opt = ember.optim.SGD([p], lr=0.1, momentum=0.9, **kw)
        for _ in range(3):
            p.grad = ember.tensor(np.ones(n, np.float32))
            opt.step()
        assert p._data[0] != 1.0
    assert not calls
