"""LBFGS (ember/optim/lbfgs.py) against torch on the Rosenbrock function: the same iterates with
and without the strong-Wolfe line search, a state_dict round trip, its errors."""
import numpy as np
import pytest

import ember
import ember.optim as eopt

torch = pytest.importorskip("torch")


# ---------------------------------------------------------------------------------- LBFGS
def _rosen(x):
    return ((1 - x[:-1]) ** 2 + 100 * (x[1:] - x[:-1] ** 2) ** 2).sum()


def _lbfgs_run(lib, kw, x0, outer, opt=None, ps=None):
    mod = ember if lib == "ember" else torch
    if ps is None:
        ps = [mod.nn.Parameter(mod.tensor(x0[0])), mod.nn.Parameter(mod.tensor(x0[1]))]
        opt = (eopt if lib == "ember" else torch.optim).LBFGS(ps, **kw)
    calls = []

    def closure():
        opt.zero_grad()
        x = mod.cat([ps[0].reshape(-1), ps[1]])
        loss = _rosen(x)
        loss.backward()
        calls.append(float(loss.detach()))
        return loss
    traj = []
    for _ in range(outer):
        loss = opt.step(closure)
        traj.append((float(loss.detach()), [p.detach().numpy().copy() for p in ps]))
    return traj, calls, opt, ps


LBFGS_CASES = [
    dict(),
    dict(line_search_fn="strong_wolfe"),
    dict(lr=0.5, max_iter=4, history_size=3),
    dict(max_iter=5, history_size=2, line_search_fn="strong_wolfe", tolerance_change=1e-12),
]


@pytest.mark.parametrize("kw", LBFGS_CASES, ids=[str(i) for i in range(len(LBFGS_CASES))])
def test_lbfgs_matches_torch(kw):
    x0 = [np.array([[-1.2, 1.0], [0.5, -0.3]]), np.array([1.5, 0.2])]
    kw = dict(kw, lr=kw.get("lr", 0.1) if "line_search_fn" not in kw else kw.get("lr", 1))
    et, ec, eo, _ = _lbfgs_run("ember", kw, x0, 3)
    tt, tc, to, _ = _lbfgs_run("torch", kw, x0, 3)
    assert len(ec) == len(tc)  # the same closure evaluations (line-search trials included)
    np.testing.assert_allclose(ec, tc, rtol=1e-9)
    for (el, ep), (tl, tp) in zip(et, tt):
        assert el == pytest.approx(tl, rel=1e-9)
        for a, b in zip(ep, tp):
            np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)
    est, tst = eo.state_dict()["state"][0], to.state_dict()["state"][0]
    assert set(est) == set(tst)
    assert est["func_evals"] == tst["func_evals"] and est["n_iter"] == tst["n_iter"]
    assert len(est["old_dirs"]) == len(tst["old_dirs"])
    np.testing.assert_allclose(est["d"].numpy(), tst["d"].numpy(), rtol=1e-7, atol=1e-10)


def test_lbfgs_strong_wolfe_converges_and_state_roundtrip():
    x0 = [np.array([[-1.2, 1.0], [0.5, -0.3]]), np.array([1.5, 0.2])]
    kw = dict(line_search_fn="strong_wolfe", max_iter=6)
    traj, _, opt, ps = _lbfgs_run("ember", kw, x0, 2)
    sd = opt.state_dict()
    saved = [p.detach().numpy().copy() for p in ps]
    rest, _, _, _ = _lbfgs_run("ember", kw, x0, 3, opt, ps)
    ps2 = [ember.nn.Parameter(ember.tensor(s)) for s in saved]
    opt2 = eopt.LBFGS(ps2, **kw)
    opt2.load_state_dict(sd)
    again, _, _, _ = _lbfgs_run("ember", kw, x0, 3, opt2, ps2)
    for (l1, p1), (l2, p2) in zip(rest, again):
        assert l1 == l2
        for a, b in zip(p1, p2):
            np.testing.assert_array_equal(a, b)
    # torch -> ember: continue from torch's state after the same two steps
    tt, _, to, tps = _lbfgs_run("torch", kw, x0, 2)
    ps3 = [ember.nn.Parameter(ember.tensor(p.detach().numpy().copy())) for p in tps]
    opt3 = eopt.LBFGS(ps3, **kw)
    opt3.load_state_dict(to.state_dict())
    cont, _, _, _ = _lbfgs_run("ember", kw, x0, 3, opt3, ps3)
    for (l1, _p1), (l3, _p3) in zip(rest, cont):
        assert l1 == pytest.approx(l3, rel=1e-6)
    final = np.concatenate([p.reshape(-1) for p in rest[-1][1]])
    assert _rosen(final) < 1e-2 * _rosen(np.concatenate([x0[0].reshape(-1), x0[1]]))


def test_lbfgs_needs_a_closure_and_one_group():
    p = ember.nn.Parameter(ember.ones(2))
    with pytest.raises(RuntimeError, match="closure"):
        eopt.LBFGS([p]).step(None)
    with pytest.raises(ValueError, match="parameter groups"):
        eopt.LBFGS([{"params": [p]}, {"params": [ember.nn.Parameter(ember.ones(2))]}])
