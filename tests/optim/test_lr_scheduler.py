"""Learning-rate schedulers (ember/optim/lr_scheduler.py) against torch: the same lr sequences."""
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
