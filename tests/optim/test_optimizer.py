"""Optimizers (ember/optim/optimizer.py and the algorithms) against torch: the same parameter
trajectories; parameters without gradients, param groups, no graph built, state_dict round
trips, closures."""
import numpy as np
import pytest

import ember
import ember.optim as eopt

torch = pytest.importorskip("torch")

OPTS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9, weight_decay=0.01)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.5)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, maximize=True)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, betas=(0.8, 0.9), weight_decay=0.1, amsgrad=True)),
    ("Adam", dict(lr=0.01, maximize=True)),
    ("AdamW", dict(lr=0.01)),
    ("AdamW", dict(lr=0.01, weight_decay=0.1, amsgrad=True)),
    ("RMSprop", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, momentum=0.9, centered=True, weight_decay=0.1)),
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, weight_decay=0.1, initial_accumulator_value=0.5)),
]


def _run(lib, name, kw, w0, grads):
    if lib == "ember":
        ps = [ember.nn.Parameter(ember.tensor(w)) for w in w0]
        opt = getattr(eopt, name)(ps, **kw)
    else:
        ps = [torch.nn.Parameter(torch.tensor(w)) for w in w0]
        opt = getattr(torch.optim, name)(ps, **kw)
    for step_grads in grads:
        for p, g in zip(ps, step_grads):
            p.grad = ember.tensor(g) if lib == "ember" else torch.tensor(g)
        opt.step()
    return [p.detach().numpy().copy() for p in ps], opt


@pytest.mark.parametrize("name,kw", OPTS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(OPTS)])
def test_optimizer_matches_torch(name, kw):
    rng = np.random.default_rng(0)
    w0 = [rng.standard_normal((3, 4)), rng.standard_normal(4)]
    grads = [[rng.standard_normal(w.shape) for w in w0] for _ in range(6)]
    e, eo = _run("ember", name, kw, w0, grads)
    t, to = _run("torch", name, kw, w0, grads)
    for a, b in zip(e, t):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    esd, tsd = eo.state_dict(), to.state_dict()
    assert set(esd["state"].get(0, {})) == set(k for k, v in tsd["state"].get(0, {}).items()
                                              if v is not None)
    tg = {k: v for k, v in tsd["param_groups"][0].items()}
    for k, v in esd["param_groups"][0].items():
        if k in tg and k != "params":
            assert (tuple(v) if isinstance(v, list) else v) == tg[k], k


def test_step_skips_params_without_grad_and_param_groups():
    a = ember.nn.Parameter(ember.ones(2))
    b = ember.nn.Parameter(ember.ones(2))
    opt = eopt.SGD([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=0.1, momentum=0.9)
    assert opt.param_groups[1]["lr"] == 0.5 and opt.param_groups[0]["momentum"] == 0.9
    a.grad = ember.ones(2)
    opt.step()
    assert np.allclose(a.detach().numpy(), 0.9) and b.detach().numpy().tolist() == [1, 1]
    with pytest.raises(ValueError):
        opt.add_param_group({"params": [a]})
    opt.zero_grad()
    assert a.grad is None


@pytest.mark.parametrize("name, groups", [
    ("AdamW", [{"weight_decay": 0.1}, {"weight_decay": 0.0}]),    # nanoGPT's decay split
    ("SGD", [{}]),
    ("Adam", []),       # built with one group, then cleared (torch refuses an empty list)
])
def test_repr_is_torchs_text(name, groups):
    """``print(optimizer)``: torch puts a blank line before each group (ember ran the groups
    together) and closes an optimizer without groups as ``Adam ()``."""
    def make(lib):
        ws = [lib.nn.Parameter(lib.ones(2)) for _ in groups or [{}]]
        opt = getattr(lib.optim, name)([dict(g, params=[w]) for g, w in zip(groups or [{}], ws)],
                                       lr=1e-3)
        if not groups:
            opt.param_groups.clear()
        return opt
    assert repr(make(ember)) == repr(make(torch))


def test_step_builds_no_graph_and_bumps_version():
    m = ember.nn.Linear(3, 2)
    opt = eopt.Adam(m.parameters())
    m(ember.randn(4, 3)).sum().backward()
    v = m.weight._version
    opt.step()
    assert m.weight.grad_fn is None and m.weight.is_leaf and m.weight._version > v


def test_optimizer_state_dict_roundtrip_and_torch_load():
    rng = np.random.default_rng(1)
    w0 = [rng.standard_normal((2, 3))]
    grads = [[rng.standard_normal((2, 3))] for _ in range(3)]
    _, eo = _run("ember", "Adam", dict(lr=0.01), w0, grads[:2])
    _, to = _run("torch", "Adam", dict(lr=0.01), w0, grads[:2])
    p = ember.nn.Parameter(ember.tensor(eo.param_groups[0]["params"][0].detach().numpy()))
    fresh = eopt.Adam([p], lr=0.5)
    fresh.load_state_dict(to.state_dict())
    assert fresh.param_groups[0]["lr"] == 0.01 and fresh.state[p]["step"] == 2.0
    fresh2 = eopt.Adam([ember.nn.Parameter(ember.tensor(w0[0]))], lr=0.5)
    fresh2.load_state_dict(eo.state_dict())
    np.testing.assert_allclose(fresh2.state_dict()["state"][0]["exp_avg"].numpy(),
                               to.state_dict()["state"][0]["exp_avg"].numpy(), rtol=1e-12)


@pytest.mark.parametrize("name", ["Adam", "SGD", "RMSprop", "Adagrad"])
@pytest.mark.parametrize("source", ["ember", "torch"])
def test_complex_parameter_state_reloads_silently_with_torchs_values(name, source):
    """A complex parameter's optimizer state, reloaded from ember's or torch's ``state_dict``,
    continues as torch's (it was cast to the complex dtype and written back into the real view
    with NumPy's "discards the imaginary part" ComplexWarning)."""
    import warnings
    kw = {"SGD": dict(lr=0.1, momentum=0.9)}.get(name, dict(lr=0.1))
    w0 = np.array([1 + 2j, 3 - 1j, -0.5 + 0.25j], np.complex64)

    def steps(lib, p, opt, n):
        for _ in range(n):
            opt.zero_grad()
            (p.abs() ** 2 + p.real * 0.5).sum().backward()
            opt.step()

    ref = torch.nn.Parameter(torch.tensor(w0))
    ropt = getattr(torch.optim, name)([ref], **kw)
    steps(torch, ref, ropt, 3)
    lib = torch if source == "torch" else ember
    p = lib.nn.Parameter(lib.tensor(w0))
    opt = getattr(lib.optim, name)([p], **kw)
    steps(lib, p, opt, 2)
    q = ember.nn.Parameter(ember.tensor(p.detach().numpy().copy()))
    reloaded = getattr(ember.optim, name)([q], **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reloaded.load_state_dict(opt.state_dict())
        steps(ember, q, reloaded, 1)
    np.testing.assert_allclose(q.detach().numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_closure():
    p = ember.nn.Parameter(ember.tensor([3.0]))
    opt = eopt.SGD([p], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss
    loss = opt.step(closure)
    assert float(loss) == 9.0 and float(p.detach()) == pytest.approx(2.4)


NONFINITE_OPTS = OPTS + [("Adadelta", dict(lr=1.0)), ("Adamax", dict(lr=0.01)),
                         ("NAdam", dict(lr=0.01)), ("RAdam", dict(lr=0.01)),
                         ("ASGD", dict(lr=0.01)), ("Rprop", dict(lr=0.01))]


@pytest.mark.parametrize("name,kw", NONFINITE_OPTS,
                         ids=[f"{n}-{i}" for i, (n, _) in enumerate(NONFINITE_OPTS)])
def test_nonfinite_gradients_give_torchs_values_and_no_numpy_warning(name, kw):
    """inf and NaN gradients (and 0 where an update divides): torch's values, silently (NumPy's
    "invalid value encountered" warnings stopped ``-W error`` programs), and the caller's NumPy
    error state is the same after the step."""
    import warnings
    w0 = [np.array([[0.5, -1.0, 2.0, 0.0], [1.0, 3.0, -2.0, 0.25]])]
    gs = [[np.array([[np.inf, -np.inf, np.nan, 0.0], [1.0, 0.0, -1.0, 2.0]])],
          [np.array([[1.0, 2.0, 0.0, np.inf], [0.0, np.nan, 1e150, -1e150]])]]
    before = np.geterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        e, _ = _run("ember", name, kw, w0, gs)
    assert np.geterr() == before
    t, _ = _run("torch", name, kw, w0, gs)
    np.testing.assert_allclose(e[0], t[0], rtol=1e-10, atol=1e-12, equal_nan=True)


def test_closure_runs_under_the_callers_error_state():
    """A closure's own NumPy code sees the caller's floating-point state, not the step's."""
    p = ember.nn.Parameter(ember.ones(2))
    opt = eopt.SGD([p], lr=0.1)
    seen = []

    def closure():
        seen.append(np.geterr()["divide"])
        p.grad = ember.ones(2)
        return ember.tensor(1.0)
    with np.errstate(divide="raise"):
        opt.step(closure)
    assert seen == ["raise"]


def test_step_and_state_dict_hooks_run_in_torchs_order():
    """Step pre/post hooks (global and the optimizer's), a pre hook's replacement arguments,
    handles' remove(), and state_dict / load_state_dict hooks, against torch."""
    import sys
    import torch.optim.optimizer  # noqa: F401
    import ember.optim.optimizer  # noqa: F401
    seen = []
    for m in (torch, ember):
        mod = sys.modules[m.__name__ + ".optim.optimizer"]
        p = m.nn.Parameter(m.ones(2, dtype=m.float64))
        p.grad = m.ones(2, dtype=m.float64)
        opt = m.optim.SGD([p], lr=0.1)
        log = []
        pre = opt.register_step_pre_hook(
            lambda o, a, k: log.append(("pre", a[0] is o)) or (a, {"closure": None}))
        post = opt.register_step_post_hook(lambda o, a, k: log.append(("post", len(a), k)))
        gpre = mod.register_optimizer_step_pre_hook(lambda o, a, k: log.append("gpre"))
        gpost = mod.register_optimizer_step_post_hook(lambda o, a, k: log.append("gpost"))
        try:
            opt.step()
            pre.remove()
            gpre.remove()
            opt.step()
        finally:
            gpre.remove()
            gpost.remove()
        post.remove()
        opt.step()
        opt.register_state_dict_pre_hook(lambda o: log.append("sd pre"))
        opt.register_state_dict_post_hook(lambda o, sd: {**sd, "extra": 1})
        opt.register_load_state_dict_pre_hook(lambda o, sd: log.append("load pre"), prepend=True)
        opt.register_load_state_dict_post_hook(lambda o: log.append("load post"))
        sd = opt.state_dict()
        opt.load_state_dict(sd)
        seen.append((log, sorted(sd), p.tolist()))
    assert seen[1] == seen[0]


def test_step_hooks_run_once_for_a_subclass_calling_super_step():
    """(torch runs them again inside super().step() once any SGD has patched SGD.step.)"""
    p = ember.nn.Parameter(ember.ones(2))
    p.grad = ember.ones(2)

    class MySGD(ember.optim.SGD):
        def step(self, closure=None):
            return super().step(closure)
    opt = MySGD([p], lr=0.1)
    log = []
    opt.register_step_pre_hook(lambda o, a, k: log.append("pre"))
    opt.register_step_post_hook(lambda o, a, k: log.append("post"))
    opt.step()
    assert log == ["pre", "post"] and p.tolist() == pytest.approx([0.9, 0.9])


def test_a_step_pre_hook_returning_something_else_is_refused():
    p = ember.nn.Parameter(ember.ones(2))
    p.grad = ember.ones(2)
    opt = ember.optim.SGD([p], lr=0.1)
    opt.register_step_pre_hook(lambda o, a, k: 3)
    with pytest.raises(ember.errors.EmberError, match="new_args, new_kwargs"):
        opt.step()
