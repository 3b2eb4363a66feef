"""ember.amp.GradScaler against torch.amp.GradScaler("cpu"): the scale over a run with injected
inf/nan gradients (skipped steps, backoff, growth), parameters after each step, the
state_dict round trip, errors, and the disabled pass-through (enabled=False, "cuda")."""
import warnings

import numpy as np
import pytest
import torch

import ember


def _run(m, bad_steps, n_steps=8, **kw):
    lin = m.nn.Linear(3, 2)
    with m.no_grad():
        lin.weight.copy_(m.tensor(np.arange(6, dtype=np.float32).reshape(2, 3) / 10))
        lin.bias.fill_(0.5)
    opt = m.optim.SGD(lin.parameters(), lr=0.1)
    scaler = m.amp.GradScaler("cpu", **kw)
    x = m.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3))
    scales, weights, rets = [], [], []
    for i in range(n_steps):
        opt.zero_grad()
        loss = (lin(x) ** 2).mean()
        scaler.scale(loss).backward()
        if i in bad_steps:
            lin.weight.grad[0, 0] = bad_steps[i]
        rets.append(scaler.step(opt))
        scaler.update()
        scales.append(scaler.get_scale())
        weights.append(lin.weight.detach().numpy().copy())
    return scales, weights, scaler.state_dict(), rets


def test_scale_sequence_and_parameters_match_torch_with_injected_inf():
    bad = {1: float("inf"), 2: float("nan"), 6: float("-inf")}
    kw = dict(init_scale=2.0 ** 10, growth_factor=2.0, backoff_factor=0.25, growth_interval=2)
    ts, tw, tsd, _ = _run(torch, bad, **kw)
    es, ew, esd, erets = _run(ember, bad, **kw)
    assert es == ts
    assert esd == tsd
    for a, b in zip(ew, tw):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert [r is None for r in erets] == [True] * 8      # SGD.step returns None either way


def test_scale_multiplies_outputs_and_nested_iterables():
    s = ember.amp.GradScaler("cpu", init_scale=4.0)
    assert s.get_scale() == 4.0 and s.is_enabled()
    a, (b, c) = s.scale([ember.ones(2), (ember.ones(1), ember.full((), 2.0))])
    assert a.tolist() == [4.0, 4.0] and b.tolist() == [4.0] and c.item() == 8.0
    t = torch.amp.GradScaler("cpu", init_scale=4.0)
    assert t.scale(torch.ones(2, dtype=torch.bfloat16)).dtype == torch.bfloat16
    assert s.scale(ember.ones(2, dtype=ember.bfloat16)).dtype == ember.bfloat16


def test_unscale_then_step_and_misuse_errors():
    for m, err in ((torch, RuntimeError), (ember, ember.errors.EmberRuntimeError)):
        p = m.nn.Parameter(m.ones(2))
        opt = m.optim.SGD([p], lr=1.0)
        s = m.amp.GradScaler("cpu", init_scale=8.0)
        with pytest.raises((AssertionError, err), match="_scale is None"):
            s.unscale_(opt)
        s.scale((p * 2).sum()).backward()
        assert p.grad.tolist() == [16.0, 16.0]
        s.unscale_(opt)
        assert p.grad.tolist() == [2.0, 2.0]
        with pytest.raises(err, match="already been called on this optimizer"):
            s.unscale_(opt)
        s.step(opt)
        assert p.detach().tolist() == [-1.0, -1.0]
        with pytest.raises(err, match="unscale_\\(\\) is being called after step"):
            s.unscale_(opt)
        with pytest.raises(err, match="step\\(\\) has already been called"):
            s.step(opt)
        with pytest.raises(err, match="Closure use is not currently supported"):
            s.step(opt, closure=lambda: 0)
        s.update()
        assert s.get_scale() == 8.0


def test_update_with_new_scale_and_state_dict_round_trip():
    for m in (torch, ember):
        s = m.amp.GradScaler("cpu", init_scale=8.0)
        p = m.nn.Parameter(m.ones(2))
        opt = m.optim.SGD([p], lr=1.0)
        s.scale(p.sum()).backward()
        s.step(opt)
        s.update(3.0)
        assert s.get_scale() == 3.0
        s.update(m.tensor(5.0))
        assert s.get_scale() == 5.0
        sd = s.state_dict()
        s2 = m.amp.GradScaler("cpu")
        s2.load_state_dict(sd)
        assert s2.state_dict() == sd and s2.get_scale() == 5.0
    with pytest.raises(ember.errors.EmberRuntimeError, match="state dict is empty"):
        ember.amp.GradScaler("cpu").load_state_dict({})


@pytest.mark.parametrize("make", ["disabled", "cuda", "cuda.amp"])
def test_disabled_scaler_passes_through_and_still_steps_as_torch(make):
    for m in (torch, ember):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            s = {"disabled": lambda: m.amp.GradScaler("cpu", enabled=False),
                 "cuda": lambda: m.amp.GradScaler(),
                 "cuda.amp": lambda: m.cuda.amp.GradScaler()}[make]()
        if make != "disabled":
            assert any("CUDA is not available" in str(x.message) for x in w)
        if make == "cuda.amp":
            assert any(x.category is FutureWarning for x in w)
        assert not s.is_enabled() and s.get_scale() == 1.0 and s.state_dict() == {}
        p = m.nn.Parameter(m.ones(2))
        opt = m.optim.SGD([p], lr=1.0)
        loss = (p * 2).sum()
        assert s.scale(loss) is loss
        loss.backward()
        s.unscale_(opt)
        assert p.grad.tolist() == [2.0, 2.0]
        s.step(opt)
        s.update()
        assert p.detach().tolist() == [-1.0, -1.0]
        s.load_state_dict({})


def test_bad_factors_raise_and_fp16_grads_refused():
    with pytest.raises(ember.errors.EmberValueError):
        ember.amp.GradScaler("cpu", growth_factor=1.0)
    with pytest.raises(ember.errors.EmberValueError):
        ember.amp.GradScaler("cpu", backoff_factor=1.0)
    p = ember.nn.Parameter(ember.ones(2, dtype=ember.float16))
    s = ember.amp.GradScaler("cpu", init_scale=2.0)
    s.scale(p.float().sum()).backward()
    with pytest.raises(ember.errors.EmberValueError, match="Attempting to unscale FP16"):
        s.unscale_(ember.optim.SGD([p], lr=1.0))
