"""Inference plans over live parameters (ember.jit.plan_live): a trace that keeps its parameters
and buffers as formals runs the plan of its graph frozen on their current values, equal to
eager's outputs, and never a stale plan once a parameter changes."""
import warnings

import numpy as np
import pytest

import ember
import ember.jit as jit
import ember.nn as nn
import ember.jit.plan_live as plan_live
from ember.jit.plan_live import STABLE_CALLS, LivePlanner

pytest.importorskip("numba")

from tests.jit.test_plan import MODELS  # noqa: E402


@pytest.fixture(autouse=True)
def _kernels_loaded():
    assert plan_live.wait_kernels(600)   # the plan's kernels imported: builds at STABLE_CALLS


def _live(model, x):
    """The trace's graph with live parameters, as ``ember.compile`` optimises it, and its
    planner."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = jit.optimize(jit.trace(model, (x,)), freeze_params=False)
    state = list(traced.state_tensors())
    assert state   # parameters stay formals
    return traced, LivePlanner(traced.graph, traced._n_inputs), state


def _run(planner, x, state, calls):
    """The last of ``calls`` planned runs (None where a call takes the ordinary path)."""
    out = None
    for _ in range(calls):
        out = planner.run((x._data,), state)
    return out


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_live_plan_equals_eager(name, dtype):
    ember.manual_seed(3)
    build, shape = MODELS[name]
    dt = getattr(ember, dtype)
    model = build().to(dt).eval()
    tol = 1e-5 if dtype == "float32" else 1e-12
    with ember.no_grad():
        x = ember.randn((2,) + shape, dtype=dt)
        traced, planner, state = _live(model, x)
        for batch in (1, 3):
            xb = ember.randn((batch,) + shape, dtype=dt)
            got = _run(planner, xb, state, STABLE_CALLS + 3)
            assert got is not None, planner.errors
            want = model(xb).numpy()
            assert got[0].dtype == want.dtype and got[0].shape == want.shape
            np.testing.assert_allclose(got[0], want, rtol=tol, atol=tol)
    assert planner.builds == 1 and not planner.errors
    assert {k[0][0] for k in planner.plans()} == {1, 3}
    if name == "resnet":   # batch norm folded into the convolutions: no batch_norm step left
        assert "batch_norm" not in {n.kind for n in planner._planner.graph.nodes}


def test_first_calls_take_the_ordinary_path():
    ember.manual_seed(4)
    model = MODELS["mlp"][0]().eval()
    x = ember.randn(2, 784)
    with ember.no_grad():
        _, planner, state = _live(model, x)
        outs = [planner.run((x._data,), state) for _ in range(STABLE_CALLS)]
    assert all(o is None for o in outs[:-1]) and planner.builds == 1


@pytest.mark.parametrize("change", ["in_place", "optimizer", "load_state_dict", "data",
                                    "data_write", "other_tensor"])
def test_changed_parameters_are_never_stale(change):
    ember.manual_seed(5)
    build, shape = MODELS["lenet"]
    model = build().eval()
    x = ember.randn((1,) + shape)
    with ember.no_grad():
        _, planner, state = _live(model, x)
        before = _run(planner, x, state, STABLE_CALLS + 1)[0].copy()
    weight = model[-1].weight
    if change == "in_place":
        with ember.no_grad():
            weight.mul_(2.0)
    elif change == "optimizer":
        loss = model(x).sum()
        loss.backward()
        ember.optim.SGD(model.parameters(), lr=0.5).step()
    elif change == "load_state_dict":
        sd = {k: v * 3 if k.endswith("bias") else v for k, v in model.state_dict().items()}
        model.load_state_dict(sd)
    elif change == "data":
        weight.data = weight.data * 0.5
    elif change == "data_write":   # through a .data alias: the tensor's version stays
        weight.data.mul_(0.5)
    else:   # another tensor bound to the formal (the planner watched the first one)
        i = next(i for i, t in enumerate(state) if t is weight)
        state[i] = nn.Parameter(ember.tensor(weight.detach().numpy() * 0.5))
        model[-1].weight = state[i]
    with ember.no_grad():
        state = [t for t in state]
        want = model(x).numpy()
        assert not np.allclose(want, before)
        first = planner.run((x._data,), state)
        assert first is None                        # stale: the ordinary path
        got = _run(planner, x, state, STABLE_CALLS)  # then a plan of the new values
    assert got is not None and planner.builds == 2
    np.testing.assert_allclose(got[0], want, rtol=1e-5, atol=1e-6)


def test_a_graph_writing_its_buffers_is_never_planned():
    ember.manual_seed(6)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()).train()
    x = ember.randn(2, 3, 6, 6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = jit.optimize(jit.trace(model, (x,)), freeze_params=False)
    planner = LivePlanner(traced.graph, traced._n_inputs)
    state = list(traced.state_tensors())
    with ember.no_grad():
        outs = [planner.run((x._data,), state) for _ in range(STABLE_CALLS + 2)]
    assert all(o is None for o in outs)
    assert planner.builds == 0 or planner.errors


def test_no_plan_is_built_while_its_kernels_load(monkeypatch):
    import threading
    loading = threading.Event()
    monkeypatch.setattr(plan_live, "_warm", None)
    monkeypatch.setattr(plan_live, "_warm_up", loading.wait)   # the thread waits for the test
    ember.manual_seed(7)
    model = MODELS["mlp"][0]().eval()
    x = ember.randn(2, 784)
    with ember.no_grad():
        _, planner, state = _live(model, x)
        outs = [planner.run((x._data,), state) for _ in range(STABLE_CALLS + 3)]
        assert all(o is None for o in outs) and planner.builds == 0   # the ordinary path
        loading.set()
        assert plan_live.wait_kernels(60)
        got = planner.run((x._data,), state)
        want = model(x).numpy()
    assert got is not None and planner.builds == 1
    np.testing.assert_allclose(got[0], want, rtol=1e-5, atol=1e-6)
