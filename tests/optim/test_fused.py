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


# ---- the multi-tensor Adam step (Adam._step_flat: fused=True, foreach=True, the default)

def _adam_run(lib, dtype, kw, steps=5):
    """Parameters of mixed sizes (one from _fused.MIN_SIZE), the second without a gradient
    every third step (its step count falls behind: two step-count buckets); returns the
    parameters after ``steps``."""
    rng = np.random.default_rng(3)
    shapes = [(_fused.MIN_SIZE + 5,), (7, 3), (130,), (4, 4, 2)]
    w0 = [rng.standard_normal(s).astype(dtype) for s in shapes]
    grads = [[rng.standard_normal(s).astype(dtype) for s in shapes] for _ in range(steps)]
    L = torch if lib == "torch" else ember
    ps = [L.nn.Parameter(L.tensor(w.copy())) for w in w0]
    cls = L.optim.AdamW if kw.pop("adamw", False) else L.optim.Adam
    opt = cls(ps, **kw)
    for t, gs in enumerate(grads):
        for i, (p, g) in enumerate(zip(ps, gs)):
            p.grad = None if (i == 1 and t % 3 == 2) else L.tensor(g)
        opt.step()
    return [p.detach().numpy().copy() for p in ps]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kw", [dict(lr=0.01), dict(lr=0.01, weight_decay=0.1, maximize=True),
                                dict(lr=0.01, betas=(0.8, 0.9), amsgrad=True),
                                dict(lr=0.02, weight_decay=0.05, adamw=True)])
@pytest.mark.parametrize("mode", [{}, dict(fused=True), dict(foreach=True),
                                  dict(foreach=False)])
def test_multi_tensor_adam_matches_torch(dtype, kw, mode):
    ours = _adam_run("ember", dtype, dict(kw, **mode))
    ref = _adam_run("torch", dtype, dict(kw, foreach=False))
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for a, b in zip(ours, ref):
        assert a.dtype == dtype
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def test_multi_tensor_state_is_torchs_and_survives_state_dict_reload():
    """The flat state's per-parameter views are what state_dict shows (torch's keys and
    values); a reload replaces them and the next step rebuilds the flat state: the same
    trajectory as an uninterrupted run."""
    rng = np.random.default_rng(0)
    w0 = [rng.standard_normal(s).astype(np.float32) for s in [(5, 3), (3,), (200,)]]
    grads = [[rng.standard_normal(w.shape).astype(np.float32) for w in w0] for _ in range(6)]

    def run(reload_at=None):
        ps = [ember.nn.Parameter(ember.tensor(w.copy())) for w in w0]
        opt = ember.optim.Adam(ps, lr=0.05)
        for t, gs in enumerate(grads):
            if t == reload_at:
                sd = opt.state_dict()
                opt = ember.optim.Adam(ps, lr=0.05)
                opt.load_state_dict(sd)
            for p, g in zip(ps, gs):
                p.grad = ember.tensor(g)
            opt.step()
        return ps, opt
    ps, opt = run()
    tps = [torch.nn.Parameter(torch.tensor(w.copy())) for w in w0]
    topt = torch.optim.Adam(tps, lr=0.05)
    for gs in grads:
        for p, g in zip(tps, gs):
            p.grad = torch.tensor(g)
        topt.step()
    sd, tsd = opt.state_dict()["state"], topt.state_dict()["state"]
    for i, tp in enumerate(tps):
        assert set(sd[i]) == set(tsd[i])
        for k in ("exp_avg", "exp_avg_sq"):
            np.testing.assert_allclose(sd[i][k].numpy(), tsd[i][k].numpy(), rtol=1e-5, atol=1e-7)
    for reload_at in (2, 4):
        again, _ = run(reload_at)
        for a, b in zip(again, ps):
            np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


@pytest.mark.parametrize("name", ["Adam", "AdamW", "SGD", "Adagrad"])
def test_fused_and_foreach_option_errors_as_torch(name):
    from ember.errors import EmberRuntimeError
    for kw in (dict(fused=True, foreach=True), dict(fused=True, differentiable=True)):
        with pytest.raises(RuntimeError) as theirs:
            getattr(torch.optim, name)([torch.nn.Parameter(torch.ones(2))], lr=0.1, **kw)
        with pytest.raises(EmberRuntimeError) as ours:
            getattr(ember.optim, name)([ember.nn.Parameter(ember.ones(2))], lr=0.1, **kw)
        assert str(ours.value) == f"{name}: " + str(theirs.value)


def test_fused_refuses_complex_parameters_as_torch():
    from ember.errors import EmberRuntimeError
    # complex parameters are not floating point: fused=True refuses them at their first step
    tp = torch.nn.Parameter(torch.ones(2, dtype=torch.complex64))
    tp.grad = torch.ones(2, dtype=torch.complex64)
    with pytest.raises(RuntimeError, match="requires all the params to be floating point"):
        torch.optim.Adam([tp], fused=True).step()
    p = ember.nn.Parameter(ember.ones(2, dtype=ember.complex64))
    p.grad = ember.ones(2, dtype=ember.complex64)
    with pytest.raises(EmberRuntimeError, match="requires all the params to be floating point"):
        ember.optim.Adam([p], fused=True).step()


def test_gather_and_scatter_round_trip_any_layout():
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal((3, 4)).astype(np.float32).T, rng.standard_normal(5),
              rng.standard_normal((2, 3, 2))[:, ::2]]
    flat = _fused.gather(arrays, sum(a.size for a in arrays), np.float64)
    np.testing.assert_array_equal(flat, np.concatenate([a.reshape(-1) for a in arrays]))
    targets = [np.zeros_like(a) for a in arrays]
    _fused.scatter(flat * 2, targets, np.cumsum([0] + [a.size for a in arrays]).tolist())
    for a, t in zip(arrays, targets):
        np.testing.assert_array_equal(t, a * 2)


def test_gather_without_copy_views_one_contiguous_array_only():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    view = _fused.gather([a], 6, np.float32, copy=False)
    assert np.shares_memory(view, a) and view.shape == (6,)
    _fused.scatter(view, [a], [0, 6])   # already written: a no-op
    np.testing.assert_array_equal(a, np.arange(6).reshape(2, 3))
    for arrays, dtype, copy in (([a], np.float32, True), ([a.T], np.float32, False),
                                ([a, a], np.float32, False), ([a], np.float64, False)):
        flat = _fused.gather(arrays, sum(x.size for x in arrays), dtype, copy=copy)
        assert not np.shares_memory(flat, a)
        np.testing.assert_array_equal(flat, np.concatenate([x.reshape(-1) for x in arrays]))


@pytest.mark.parametrize("maximize", [False, True])
def test_one_parameter_step_updates_in_place_and_keeps_the_gradient(maximize):
    """One parameter: its own array is updated (no gather copy); the gradient is left as it
    was, with maximize too (which negates a copy)."""
    n = _fused.MIN_SIZE + 5
    rng = np.random.default_rng(2)
    w, g = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    p = ember.nn.Parameter(ember.tensor(w.copy()))
    data = p._data
    p.grad = ember.tensor(g.copy())
    tp = torch.nn.Parameter(torch.tensor(w.copy()))
    tp.grad = torch.tensor(g.copy())
    opt, topt = ember.optim.Adam([p], lr=0.01, maximize=maximize), torch.optim.Adam(
        [tp], lr=0.01, maximize=maximize)
    for _ in range(3):
        opt.step()
        topt.step()
    assert p._data is data
    np.testing.assert_array_equal(p.grad._data, g)
    np.testing.assert_allclose(p._data, tp.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_multi_tensor_step_updates_large_parameters_in_their_own_memory(monkeypatch):
    """Large parameters (from ALONE_MIN_SIZE elements) are read and written in place, each
    alone; the others between them are gathered run by run (``_fused.runs``); the values are
    the per-parameter step's (``foreach=False``) and torch's."""
    n = _fused.ALONE_MIN_SIZE
    shapes = [(3,), (n + 7,), (5, 2), (_fused.MIN_SIZE,), (n // 4, 4), (6,)]
    assert _fused.runs([np.empty(s) for s in shapes], [np.empty(s) for s in shapes]) == [
        (0, 1), (1, 2), (2, 4), (4, 5), (5, 6)]
    rng = np.random.default_rng(8)
    w0 = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    grads = [[rng.standard_normal(s).astype(np.float32) for s in shapes] for _ in range(3)]
    copied = []
    real = _fused.gather
    monkeypatch.setattr(_fused, "gather", lambda arrays, total, dtype, copy=True: (
        copied.append(total) if copy or len(arrays) > 1 else None) or real(arrays, total, dtype,
                                                                           copy))
    out = {}
    for name, L, kw in (("flat", ember, {}), ("per", ember, dict(foreach=False)),
                        ("torch", torch, dict(foreach=False))):
        ps = [L.nn.Parameter(L.tensor(w.copy())) for w in w0]
        data = [p.data_ptr() for p in ps]
        opt = L.optim.AdamW(ps, lr=0.02, **kw)
        for gs in grads:
            for p, g in zip(ps, gs):
                p.grad = L.tensor(g)
            opt.step()
        assert [p.data_ptr() for p in ps] == data
        out[name] = [p.detach().numpy().copy() for p in ps]
    assert copied and max(copied) < n     # only runs of small parameters were gathered
    for a, b, c in zip(out["flat"], out["per"], out["torch"]):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, c, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", [{}, dict(foreach=False)])
def test_multi_tensor_adam_complex_and_strided_parameters_as_torch(mode):
    """A complex parameter (updated as its real view, as torch) and a transposed one, with a
    plain one, in one group."""
    rng = np.random.default_rng(5)
    c = (rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))).astype(np.complex64)
    t = rng.standard_normal((5, 6)).astype(np.float32).T
    r = rng.standard_normal(9).astype(np.float32)
    grads = [[(rng.standard_normal(w.shape) + (1j * rng.standard_normal(w.shape)
                                               if w.dtype.kind == "c" else 0)).astype(w.dtype)
              for w in (c, t, r)] for _ in range(4)]
    out = {}
    for lib, L in (("ember", ember), ("torch", torch)):
        ps = [L.nn.Parameter(L.tensor(c)), L.nn.Parameter(L.tensor(t.copy()).T.contiguous().T
                                                          if lib == "torch" else L.tensor(t)),
              L.nn.Parameter(L.tensor(r))]
        opt = L.optim.AdamW(ps, lr=0.05, **(mode if lib == "ember" else dict(foreach=False)))
        for gs in grads:
            for p, g in zip(ps, gs):
                p.grad = L.tensor(g)
            opt.step()
        out[lib] = [p.detach().numpy().copy() for p in ps]
    for a, b in zip(out["ember"], out["torch"]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
