"""The optimizer's update of every parameter in one call (ember/compiler/grouped_update.py): the
step program's in-place update groups written as one ``FusedGroups`` call, against eager over
10 steps (float64 within 1e-10) and against running each group on its own."""
import copy

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.compiler import grouped_update
from ember.jit import fused
from tests.compiler.models import LeNet5Flatten as LeNet5, MLP


@pytest.fixture(autouse=True)
def _reset():
    ember.compiler.reset()
    yield
    ember.compiler.reset()


def _step(model, opt):
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def _data(model, seed):
    g = np.random.default_rng(seed)
    shape = (4, 1, 28, 28) if isinstance(model, LeNet5) else (4, 20)
    n = 10 if isinstance(model, LeNet5) else 5
    return ember.tensor(g.standard_normal(shape)), ember.tensor(g.integers(0, n, 4))


def _train(cls, make_opt, steps=10):
    """(eager model, compiled model, the compiled step's program) after ``steps`` float64
    steps, the losses equal to 1e-10 at each."""
    ember.manual_seed(0)
    model = cls().double()
    twin = copy.deepcopy(model)
    eager, compiled = _step(model, make_opt(model)), ember.compile(_step(twin, make_opt(twin)))
    for i in range(steps):
        x, y = _data(model, i)
        assert abs(eager(x, y).item() - compiled(x, y).item()) <= 1e-10
    return model, twin, compiled._compiled._last.traced


def _assert_equal_models(a, b):
    for p, q in zip(a.parameters(), b.parameters()):
        np.testing.assert_allclose(q.numpy(force=True), p.numpy(force=True), rtol=0, atol=1e-10)


OPTIMIZERS = {
    "sgd_momentum": lambda m: ember.optim.SGD(m.parameters(), lr=0.05, momentum=0.9),
    "adamw": lambda m: ember.optim.AdamW(m.parameters(), lr=1e-2),
    # two groups: their learning rates and momenta are each member's own scalars
    "two_groups": lambda m: ember.optim.SGD(
        [{"params": [p for n, p in m.named_parameters() if n.endswith("weight")]},
         {"params": [p for n, p in m.named_parameters() if n.endswith("bias")], "lr": 0.2,
          "momentum": 0.5}], lr=0.05, momentum=0.9),
}


@pytest.mark.parametrize("cls", [MLP, LeNet5])
@pytest.mark.parametrize("opt", sorted(OPTIMIZERS))
def test_every_parameters_update_is_one_call_and_matches_eager(cls, opt):
    model, twin, runner = _train(cls, OPTIMIZERS[opt])
    _assert_equal_models(model, twin)
    calls = [line for line in runner.code.splitlines() if "update_groups" in line]
    n_params = len(list(model.parameters()))
    assert len(calls) == 1 and calls[0].count(" = ") == 1
    # every parameter's new value, written by that one call, and no group of its own
    assert all(f"{name.replace('.', '_')}," in calls[0] or f"{name.replace('.', '_')})"
               in calls[0] for name, _ in twin.named_parameters())
    groups = [n for n in runner.graph.find_nodes("fusion_group") if n.attrs.get("into")]
    assert len(groups) == n_params


def test_a_parameter_above_max_size_runs_its_own_group(monkeypatch):
    """A parameter of more than MAX_SIZE elements (its group splits over the threads) keeps
    its own group call; the others are still one call."""
    monkeypatch.setattr(grouped_update, "MAX_SIZE", 100)
    model, twin, runner = _train(MLP, OPTIMIZERS["sgd_momentum"])
    _assert_equal_models(model, twin)
    big = [p for p in twin.parameters() if p.numel() > 100]
    assert big
    assert runner.code.count("update_groups") == 1
    assert sum(line.lstrip().split(" = ")[-1].startswith("fusion_group")
               for line in runner.code.splitlines() if "_weight)" in line) >= len(big)


def _update_groups(runner):
    """The ``FusedGroups`` of a step program and the update nodes it runs."""
    fg = next(v for k, v in runner._fn.__globals__.items() if k.startswith("update_groups"))
    nodes = [n for n in runner.graph.find_nodes("fusion_group") if n.attrs.get("into")]
    return fg, nodes


def _arguments(nodes, seed, fortran=False):
    """Arrays for the nodes' arguments (0-d ones as hyper-parameters); with ``fortran`` the
    first 2-D output argument in Fortran order."""
    g = np.random.default_rng(seed)
    args, flipped = [], False
    for n in nodes:
        into = set(n.attrs["into"])
        for i, v in enumerate(n.args):
            a = np.asarray(g.uniform(0.1, 0.9, v.shape), v.dtype)
            if fortran and not flipped and i in into and a.ndim == 2:
                a, flipped = np.asfortranarray(a), True
            args.append(a)
    return args


@pytest.mark.parametrize("fortran", [False, True])
@pytest.mark.parametrize("force", [None, "unfused"])
def test_grouped_call_equals_each_group_on_its_own(fortran, force, monkeypatch):
    """One ``FusedGroups`` call writes what its members' own group calls write, bit for bit,
    into the same arrays; where one kernel cannot take them (an output in Fortran order, fusion
    forced off) each member runs its own group."""
    *_, runner = _train(MLP, OPTIMIZERS["adamw"], steps=3)
    fg, nodes = _update_groups(runner)
    monkeypatch.setattr(fused, "FORCE", force)
    args = _arguments(nodes, 0, fortran)
    each = [a.copy(order="K") for a in args]
    out = fg(*args)
    k, pos = fg.n_inputs, 0
    want = ()
    for n in nodes:
        want += tuple(fused.fused_group(n.attrs["graph"]).run_arrays_into(
            n.attrs["into"], *each[pos:pos + k]))
        pos += k
    assert len(out) == len(want)
    for a, b in zip(out, want):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(args, each):
        np.testing.assert_array_equal(a, b)
    into = [pos * k + i for pos, n in enumerate(nodes) for i in n.attrs["into"]]
    assert all(o is args[i] for o, i in zip(out, into))


def test_members_reading_another_members_output_are_not_grouped():
    """A group that reads a value an earlier group of the run computed starts a run of its own
    (grouping would read it before it exists)."""
    ember.manual_seed(0)
    model = nn.Linear(3, 2).double()
    opt = ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    compiled = ember.compile(_step(model, opt))
    g = np.random.default_rng(0)
    for _ in range(3):
        compiled(ember.tensor(g.standard_normal((4, 3))), ember.tensor(g.integers(0, 2, 4)))
    graph = compiled._compiled._last.traced.graph
    rule = grouped_update.GroupedUpdates(graph)
    nodes = [n for n in graph.nodes if n.kind == "fusion_group" and n.attrs.get("into")]
    assert len(nodes) == 2 and list(rule.runs.values()) == [nodes]
    # the second update reads the first one's new parameter: two runs of one, no grouping
    second = nodes[1]
    second.args = [nodes[0].outputs[1] if i == len(second.args) - 1 else a
                   for i, a in enumerate(second.args)]
    assert grouped_update.GroupedUpdates(graph).runs == {}
