"""Eager use of the pointwise engine: the fused in-place Adam update (ember.optim._fused) equals
ember's NumPy update and torch's Adam; small parameters keep the NumPy path."""
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
