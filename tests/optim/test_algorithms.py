"""The optimizers of ember/optim/algorithms.py (Adadelta, Adamax, NAdam, RAdam, ASGD, Rprop)
against torch: the same trajectories step by step, torch's state keys, and a state_dict round
trip mid-training that continues identically (ember -> ember and torch -> ember); float32 stays
float32; invalid hyper-parameters."""
import numpy as np
import pytest

import ember
import ember.optim as eopt

torch = pytest.importorskip("torch")

OPTS = [
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=0.5, rho=0.8, eps=1e-4, weight_decay=0.1, maximize=True)),
    ("Adamax", dict()),
    ("Adamax", dict(lr=0.01, betas=(0.8, 0.95), eps=1e-3, weight_decay=0.1, maximize=True)),
    ("NAdam", dict()),
    ("NAdam", dict(lr=0.01, betas=(0.8, 0.95), weight_decay=0.1, momentum_decay=0.01)),
    ("NAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("RAdam", dict()),
    # beta2=0.9 makes rho_t > 5 from step 6: both branches (rectified and not) are taken
    ("RAdam", dict(lr=0.01, betas=(0.8, 0.9), weight_decay=0.1)),
    ("RAdam", dict(lr=0.01, betas=(0.8, 0.9), weight_decay=0.1, decoupled_weight_decay=True,
                   maximize=True)),
    ("ASGD", dict()),
    ("ASGD", dict(lr=0.05, lambd=0.01, alpha=0.5, t0=3, weight_decay=0.1, maximize=True)),
    ("Rprop", dict()),
    ("Rprop", dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.1), maximize=True)),
]
STEPS = 10


def _make(lib, name, kw, w0, lr2=None):
    if lib == "ember":
        ps = [ember.nn.Parameter(ember.tensor(w)) for w in w0]
        cls = getattr(eopt, name)
    else:
        ps = [torch.nn.Parameter(torch.tensor(w)) for w in w0]
        cls = getattr(torch.optim, name)
    groups = [{"params": ps[:1]}, {"params": ps[1:]}]
    if lr2 is not None:
        groups[1]["lr"] = lr2
    return ps, cls(groups, **kw)


def _steps(lib, ps, opt, grads):
    out = []
    for step_grads in grads:
        for p, g in zip(ps, step_grads):
            p.grad = ember.tensor(g) if lib == "ember" else torch.tensor(g)
        opt.step()
        out.append([p.detach().numpy().copy() for p in ps])
    return out


def _data(seed=0):
    rng = np.random.default_rng(seed)
    w0 = [rng.standard_normal((3, 4)), rng.standard_normal(5)]
    # some gradients keep their sign between steps (Rprop grows and shrinks step sizes)
    base = [rng.standard_normal(w.shape) for w in w0]
    grads = [[b + 0.7 * rng.standard_normal(b.shape) for b in base] for _ in range(STEPS)]
    return w0, grads


@pytest.mark.parametrize("name,kw", OPTS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(OPTS)])
def test_matches_torch_step_by_step(name, kw):
    w0, grads = _data()
    lr2 = 0.003 if name not in ("Adadelta",) else 0.2
    eps_, eo = _make("ember", name, kw, w0, lr2)
    tps, to = _make("torch", name, kw, w0, lr2)
    e = _steps("ember", eps_, eo, grads)
    t = _steps("torch", tps, to, grads)
    for i, (a, b) in enumerate(zip(e, t)):
        for x, y in zip(a, b):
            np.testing.assert_allclose(x, y, rtol=1e-10, atol=1e-12, err_msg=f"step {i}")
    esd, tsd = eo.state_dict(), to.state_dict()
    for idx in (0, 1):
        assert set(esd["state"][idx]) == set(tsd["state"][idx])
        for k, v in tsd["state"][idx].items():
            np.testing.assert_allclose(np.asarray(esd["state"][idx][k].numpy()
                                                  if hasattr(esd["state"][idx][k], "numpy")
                                                  else esd["state"][idx][k]),
                                       v.numpy(), rtol=1e-10, atol=1e-12, err_msg=k)
    for eg, tg in zip(esd["param_groups"], tsd["param_groups"]):
        assert set(eg) == set(tg)
        for k, v in tg.items():
            assert (tuple(eg[k]) if isinstance(eg[k], list) else eg[k]) == \
                (tuple(v) if isinstance(v, list) else v), k


@pytest.mark.parametrize("name,kw", OPTS[1::2] + [OPTS[10]],
                         ids=[n for n, _ in OPTS[1::2] + [OPTS[10]]])
def test_state_dict_roundtrip_mid_training(name, kw):
    w0, grads = _data(1)
    ps, opt = _make("ember", name, kw, w0)
    _steps("ember", ps, opt, grads[:4])
    sd = opt.state_dict()
    rest = _steps("ember", ps, opt, grads[4:])
    # ember -> ember: a fresh optimizer (other hyper-parameters) restored from the saved dict
    ps2, opt2 = _make("ember", name, {}, [r for r in _steps_to(name, kw, w0, grads[:4])])
    opt2.load_state_dict(sd)
    again = _steps("ember", ps2, opt2, grads[4:])
    # torch -> ember: torch's dict after the same 4 steps
    tps, to = _make("torch", name, kw, w0)
    _steps("torch", tps, to, grads[:4])
    ps3, opt3 = _make("ember", name, {}, [p.detach().numpy().copy() for p in tps])
    opt3.load_state_dict(to.state_dict())
    from_torch = _steps("ember", ps3, opt3, grads[4:])
    for a, b, c in zip(rest, again, from_torch):
        for x, y, z in zip(a, b, c):
            np.testing.assert_array_equal(x, y)
            np.testing.assert_allclose(x, z, rtol=1e-10, atol=1e-12)


def _steps_to(name, kw, w0, grads):
    ps, opt = _make("ember", name, kw, w0)
    return _steps("ember", ps, opt, grads)[-1]


def test_float32_parameters_stay_float32():
    for name, kw in OPTS:
        p = ember.nn.Parameter(ember.ones(3, dtype=ember.float32))
        opt = getattr(eopt, name)([p], **kw)
        for _ in range(2):
            p.grad = ember.tensor(np.array([0.5, -1.0, 2.0], np.float32))
            opt.step()
        assert p.dtype == ember.float32 and p.grad_fn is None, name


@pytest.mark.parametrize("bad", [
    ("Adadelta", dict(rho=1.5), "rho"), ("Adamax", dict(betas=(1.0, 0.9)), "beta"),
    ("NAdam", dict(momentum_decay=-1), "momentum_decay"), ("RAdam", dict(eps=-1), "epsilon"),
    ("ASGD", dict(lr=-1), "learning rate"), ("Rprop", dict(etas=(1.5, 2.0)), "eta"),
    ("LBFGS", dict(line_search_fn="armijo"), "line_search_fn")])
def test_invalid_hyper_parameters(bad):
    name, kw, word = bad
    with pytest.raises(ValueError, match=word):
        getattr(eopt, name)([ember.nn.Parameter(ember.ones(2))], **kw)
    if name != "LBFGS":  # torch raises that one only at step(); ember at construction
        with pytest.raises(ValueError):
            getattr(torch.optim, name)([torch.nn.Parameter(torch.ones(2))], **kw)


@pytest.mark.parametrize("name,kw", [("SGD", dict(lr=0.1, momentum=0.9)),
                                     ("Adam", dict(lr=0.05, amsgrad=True)),
                                     ("Adam", dict(lr=0.05, foreach=False)),
                                     ("AdamW", dict(lr=0.05)), ("Adagrad", dict(lr=0.1)),
                                     ("RMSprop", dict(lr=0.01, centered=True)),
                                     ("NAdam", dict(lr=0.01)), ("Rprop", dict(lr=0.05))])
def test_complex_parameter_state_is_complex_as_torch(name, kw):
    """A complex parameter's state tensors are complex, of its shape, with torch's values
    (each part updated independently, as torch's view_as_real), however the step runs."""
    rng = np.random.default_rng(3)
    w0 = (rng.standard_normal((2, 3)) + 1j * rng.standard_normal((2, 3))).astype(np.complex64)
    r0 = rng.standard_normal(5).astype(np.float32)
    out = {}
    for lib, L in (("ember", ember), ("torch", torch)):
        ps = [L.nn.Parameter(L.tensor(w0)), L.nn.Parameter(L.tensor(r0))]
        opt = getattr(L.optim, name)(ps, **kw)
        for _ in range(3):
            opt.zero_grad()
            ((ps[0] * ps[0]).real.sum() + ps[0].abs().pow(3).sum() + ps[1].pow(3).sum()).backward()
            opt.step()
        out[lib] = (ps[0].detach().numpy().copy(), opt.state[ps[0]])
    (p_e, st_e), (p_t, st_t) = out["ember"], out["torch"]
    np.testing.assert_allclose(p_e, p_t, rtol=1e-5, atol=1e-6)
    assert [k for k in st_e] == [k for k in st_t]
    for k, v in st_t.items():
        if k == "step" or v.dim() == 0:
            continue
        assert st_e[k].dtype == ember.complex64 and tuple(st_e[k].shape) == (2, 3), k
        np.testing.assert_allclose(st_e[k].numpy(), v.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
