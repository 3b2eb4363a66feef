"""Learning-rate schedulers (ember/optim/lr_scheduler.py) against torch: the same lr sequences."""
import numpy as np
import pytest

import ember
import ember.optim as eopt

torch = pytest.importorskip("torch")


SCHEDS = [
    ("StepLR", dict(step_size=3, gamma=0.5)),
    ("MultiStepLR", dict(milestones=[2, 5, 5, 8], gamma=0.3)),
    ("ExponentialLR", dict(gamma=0.9)),
    ("CosineAnnealingLR", dict(T_max=5, eta_min=0.01)),
    ("LambdaLR", dict(lr_lambda=lambda e: 1.0 / (e + 1))),
    ("OneCycleLR", dict(max_lr=1.0, total_steps=20)),
    ("OneCycleLR", dict(max_lr=0.5, epochs=2, steps_per_epoch=10, anneal_strategy="linear",
                        three_phase=True)),
    ("LinearLR", dict(start_factor=0.2, total_iters=4)),
    ("ConstantLR", dict(factor=0.5, total_iters=3)),
    ("PolynomialLR", dict(total_iters=6, power=2.0)),
    ("CosineAnnealingWarmRestarts", dict(T_0=3, T_mult=2, eta_min=0.001)),
    ("CyclicLR", dict(base_lr=0.01, max_lr=0.1, step_size_up=3)),
    ("CyclicLR", dict(base_lr=0.01, max_lr=0.1, step_size_up=2, step_size_down=4,
                      mode="triangular2", base_momentum=0.7, max_momentum=0.95)),
    ("CyclicLR", dict(base_lr=[0.01], max_lr=0.2, step_size_up=4, mode="exp_range",
                      gamma=0.9)),
    ("CyclicLR", dict(base_lr=0.01, max_lr=0.1, step_size_up=3, cycle_momentum=False,
                      scale_fn=lambda x: 0.5 ** x, scale_mode="iterations")),
]


@pytest.mark.parametrize("name,kw", SCHEDS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(SCHEDS)])
@pytest.mark.parametrize("opt_name", ["SGD", "Adam"])
def test_scheduler_matches_torch(name, kw, opt_name):
    okw = dict(lr=0.1, momentum=0.9) if opt_name == "SGD" else dict(lr=0.1)
    eo = getattr(eopt, opt_name)([ember.nn.Parameter(ember.zeros(1))], **okw)
    to = getattr(torch.optim, opt_name)([torch.nn.Parameter(torch.zeros(1))], **okw)
    es = getattr(eopt.lr_scheduler, name)(eo, **kw)
    ts = getattr(torch.optim.lr_scheduler, name)(to, **kw)
    steps = 19 if name == "OneCycleLR" else 15
    for _ in range(steps):
        assert es.get_last_lr() == pytest.approx(ts.get_last_lr(), rel=1e-12, abs=1e-15)
        for key in ("momentum", "betas"):
            if key in to.param_groups[0]:
                assert eo.param_groups[0][key] == pytest.approx(to.param_groups[0][key])
        eo.step()
        to.step()
        es.step()
        ts.step()


def test_reduce_lr_on_plateau_matches_torch():
    eo = eopt.SGD([ember.nn.Parameter(ember.zeros(1))], lr=1.0)
    to = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    kw = dict(mode="min", factor=0.5, patience=2, cooldown=1, min_lr=0.05, threshold=0.01)
    es = eopt.lr_scheduler.ReduceLROnPlateau(eo, **kw)
    ts = torch.optim.lr_scheduler.ReduceLROnPlateau(to, **kw)
    metrics = [5, 4, 4, 4, 4, 3.99, 3.99, 3.99, 3.99, 2, 2, 2, 2, 2, 2, 2, 2, 2]
    for m in metrics:
        es.step(m)
        ts.step(m)
        assert eo.param_groups[0]["lr"] == pytest.approx(to.param_groups[0]["lr"])


def _composite(L, kind, opt):
    S = L.optim.lr_scheduler
    if kind == "warmup_cosine":      # the common warm-up then cosine decay
        return S.SequentialLR(opt, [S.LinearLR(opt, start_factor=0.1, total_iters=5),
                                    S.CosineAnnealingLR(opt, T_max=12)], milestones=[5])
    if kind == "three":
        return S.SequentialLR(opt, [S.ConstantLR(opt, factor=0.5, total_iters=2),
                                    S.ExponentialLR(opt, gamma=0.8),
                                    S.StepLR(opt, step_size=2, gamma=0.5)], milestones=[3, 8])
    if kind == "chained":
        return S.ChainedScheduler([S.ConstantLR(opt, factor=0.1, total_iters=2),
                                   S.ExponentialLR(opt, gamma=0.9)])
    return S.SequentialLR(opt, [S.ChainedScheduler([S.LinearLR(opt, 0.5, total_iters=3),
                                                    S.ExponentialLR(opt, gamma=0.95)]),
                                S.CosineAnnealingLR(opt, T_max=6)], milestones=[4])


@pytest.mark.parametrize("kind", ["warmup_cosine", "three", "chained", "nested"])
def test_sequential_and_chained_schedulers_match_torch(kind):
    eo = eopt.SGD([ember.nn.Parameter(ember.zeros(1))], lr=0.1, momentum=0.9)
    to = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1, momentum=0.9)
    es, ts = _composite(ember, kind, eo), _composite(torch, kind, to)
    for i in range(18):
        assert es.get_last_lr() == pytest.approx(ts.get_last_lr(), rel=1e-12, abs=1e-15), i
        assert eo.param_groups[0]["lr"] == pytest.approx(to.param_groups[0]["lr"], rel=1e-12)
        eo.step()
        to.step()
        es.step()
        ts.step()
        if i == 6:      # a state_dict taken mid-way, loaded into fresh ones, on both sides
            state, tstate = es.state_dict(), ts.state_dict()
            assert len(state["_schedulers"]) == len(es._schedulers)
            es, ts = _composite(ember, kind, eo), _composite(torch, kind, to)
            es.load_state_dict(state)
            ts.load_state_dict(tstate)
    with pytest.raises(ember.errors.EmberError, match="milestone"):
        ember.optim.lr_scheduler.SequentialLR(eo, [ember.optim.lr_scheduler.StepLR(eo, 2)], [1])
    other = eopt.SGD([ember.nn.Parameter(ember.zeros(1))], lr=0.1)
    with pytest.raises(ember.errors.EmberError, match="same optimizer"):
        ember.optim.lr_scheduler.ChainedScheduler(
            [ember.optim.lr_scheduler.StepLR(eo, 2), ember.optim.lr_scheduler.StepLR(other, 2)])


@pytest.mark.parametrize("name,kw", [
    ("ExponentialLR", dict(gamma=0.9)), ("CosineAnnealingLR", dict(T_max=8, eta_min=0.01)),
    ("PolynomialLR", dict(total_iters=8, power=2.0)), ("StepLR", dict(step_size=3)),
    ("MultiplicativeLR", dict(lr_lambda=lambda e: 0.95)), ("LinearLR", dict(total_iters=6))])
def test_a_scheduler_resumed_with_last_epoch_continues_as_torchs(name, kw):
    """Built with ``last_epoch`` set (resuming a run whose optimizer holds ``initial_lr``): the
    constructor's initial step keeps the lr where the schedule does (torch 2.x)."""
    lrs = []
    for L in (torch, ember):
        opt = L.optim.SGD([L.nn.Parameter(L.zeros(1))], lr=0.05)
        opt.param_groups[0]["initial_lr"] = 0.1
        sch = getattr(L.optim.lr_scheduler, name)(opt, last_epoch=4, **kw)
        seq = [opt.param_groups[0]["lr"]]
        for _ in range(6):
            opt.step()
            sch.step()
            seq.append(opt.param_groups[0]["lr"])
        lrs.append(seq)
    assert lrs[1] == pytest.approx(lrs[0], rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("later", ["ConstantLR", "LinearLR", "PolynomialLR"])
def test_sequential_lr_restarts_a_later_scheduler_from_the_base_lr_as_torch(later):
    """At a milestone SequentialLR sets the next scheduler to its epoch 0 through its closed
    form (ConstantLR, LinearLR and PolynomialLR had none: their factor multiplied the lr the
    previous scheduler left)."""
    kwargs = {"ConstantLR": dict(factor=0.5, total_iters=2),
              "LinearLR": dict(start_factor=0.25, end_factor=0.75, total_iters=3),
              "PolynomialLR": dict(total_iters=4, power=2.0)}
    seen = []
    for m in (torch, ember):
        L = m.optim.lr_scheduler
        p = m.nn.Parameter(m.ones(1))
        opt = m.optim.SGD([p], lr=1.0)
        sched = L.SequentialLR(opt, [L.LinearLR(opt, start_factor=0.1, total_iters=3),
                                     getattr(L, later)(opt, **kwargs[later]),
                                     L.ExponentialLR(opt, gamma=0.9)], milestones=[3, 7])
        lrs = []
        for _ in range(10):
            opt.step()
            sched.step()
            lrs.append(opt.param_groups[0]["lr"])
        seen.append(lrs)
    np.testing.assert_allclose(seen[1], seen[0], rtol=1e-12)


def test_stepping_the_scheduler_before_the_optimizer_warns_as_torch():
    import warnings
    for m in (torch, ember):
        for optimizer_first in (False, True):
            p = m.nn.Parameter(m.ones(1))
            p.grad = m.ones(1)
            opt = m.optim.SGD([p], lr=0.1)
            sched = m.optim.lr_scheduler.StepLR(opt, 1)
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                if optimizer_first:
                    opt.step()
                sched.step()
            assert any("before `optimizer.step()`" in str(w.message) for w in seen) \
                is not optimizer_first, (m.__name__, optimizer_first)


def test_warm_restarts_stepped_with_fractional_epochs_as_torch():
    """The docs' ``scheduler.step(epoch + i / iters)`` inside the batch loop, mixed with plain
    steps; a negative epoch is refused as torch."""
    def run(m):
        o = m.optim.SGD([m.nn.Parameter(m.zeros(1))], lr=0.1, momentum=0.9)
        s = m.optim.lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=2, eta_min=1e-3)
        lrs = []
        for epoch in range(5):
            for i in range(3):
                o.step()
                s.step(epoch + i / 3)
                lrs.append(o.param_groups[0]["lr"])
        for _ in range(4):
            s.step()
            lrs.append(o.param_groups[0]["lr"])
        with pytest.raises(ValueError, match="Expected non-negative epoch, but got -1"):
            s.step(-1)
        return lrs, s.T_i, s.T_cur, s.last_epoch
    ours, theirs = run(ember), run(torch)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-12)
    assert ours[1:] == theirs[1:]


class _WarmupCosine:
    """A callable lr_lambda object: torch saves its attributes in ``lr_lambdas``."""

    def __init__(self, warmup, total):
        self.warmup, self.total = warmup, total

    def __call__(self, step):
        if step < self.warmup:
            return (step + 1) / self.warmup
        return 0.5 * (1 + np.cos(np.pi * (step - self.warmup) / (self.total - self.warmup)))


@pytest.mark.parametrize("name", ["LambdaLR", "MultiplicativeLR"])
def test_lambda_schedulers_state_dict_as_torch(name):
    """``lr_lambdas`` holds None for a function and a callable object's attributes; loading
    (a torch state dict included) keeps the scheduler's own functions."""
    def make(lib, opt_lib, fn_obj):
        opt = opt_lib.SGD([{"params": [lib.nn.Parameter(lib.ones(1))]} for _ in range(2)],
                          lr=1.0)
        return getattr(opt_lib.lr_scheduler, name)(opt, [lambda s: 0.9, fn_obj])

    ours, theirs = make(ember, eopt, _WarmupCosine(2, 8)), make(torch, torch.optim,
                                                                 _WarmupCosine(2, 8))
    for s in (ours, theirs):
        for _ in range(3):
            s.optimizer.step()
            s.step()
    a, b = ours.state_dict(), theirs.state_dict()
    assert sorted(a) == sorted(b) and a["lr_lambdas"] == b["lr_lambdas"] == [
        None, {"warmup": 2, "total": 8}]
    fresh = make(ember, eopt, _WarmupCosine(5, 5))
    fresh.load_state_dict(b)
    assert fresh.lr_lambdas[1].warmup == 2 and callable(fresh.lr_lambdas[0])
    assert fresh.last_epoch == 3 and "lr_lambdas" in b
    for g, h in zip(fresh.optimizer.param_groups, theirs.optimizer.param_groups):
        g["lr"] = h["lr"]           # what loading the optimizer's state dict would restore
    fresh.optimizer.step()
    theirs.optimizer.step()
    fresh.step()
    theirs.step()
    np.testing.assert_allclose(fresh.get_last_lr(), theirs.get_last_lr(), rtol=1e-12)
