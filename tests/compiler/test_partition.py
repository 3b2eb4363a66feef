"""Save versus recompute (ember/compiler/partition.py): the compiled backward recomputes cheap
pointwise chains, views and dropout's output from smaller saved values, never GEMMs or
transcendental functions, and its gradients are eager's."""
import copy
import sys

import numpy as np
import pytest

import ember
import ember.compiler.partition as partition
import ember.nn as nn
import ember.nn.functional as F
from ember.compiler.frontend import CompiledAutograd
from tests.compiler.models import GPT

f64 = ember.float64


@pytest.fixture(autouse=True)
def _reset():
    ember.compiler.reset()
    yield
    ember.compiler.reset()


class Chain(nn.Module):
    """``a = x W1^T``; the backward reads ``a`` (sin's derivative) and ``c = 2a + 1`` (W2's
    gradient): saving ``a`` alone and recomputing ``c`` holds one activation instead of two."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 8, bias=False)
        self.fc2 = nn.Linear(8, 3, bias=False)

    def forward(self, x):
        a = self.fc1(x)
        c = a * 2.0 + 1.0
        return (self.fc2(c) + a.sin().sum(1, keepdim=True)).sum()


class Gelu(Chain):
    """As ``Chain`` with ``c = gelu(a)``: a transcendental function is saved, not recomputed."""

    def forward(self, x):
        a = self.fc1(x)
        return (self.fc2(F.gelu(a)) + a.sin().sum(1, keepdim=True)).sum()


class Dropout(Chain):
    """``y = dropout(relu(a))`` read by W2's gradient: the backward rebuilds ``y`` as the saved
    ReLU output times the saved mask, as the dropout kernel computed it."""

    def forward(self, x):
        a = self.fc1(x)
        return (self.fc2(F.dropout(F.relu(a), 0.5, training=True)) + a.sin().sum()).sum()


class InPlace(Chain):
    """``Chain`` with the ``+ 1`` written in place: nothing is recomputed."""

    def forward(self, x):
        a = self.fc1(x)
        c = a * 2.0
        c.add_(1.0)
        return (self.fc2(c) + a.sin().sum(1, keepdim=True)).sum()


def _runner(cls, enabled, monkeypatch, seed=0):
    """(compiled program pair, eager gradients, compiled gradients) of three calls."""
    monkeypatch.setattr(partition, "ENABLED", enabled)
    ember.manual_seed(0)
    eager = cls().double()
    twin = copy.deepcopy(eager)
    compiled = ember.compile(twin)
    x = ember.tensor(np.random.default_rng(seed).standard_normal((5, 6)), dtype=f64)
    for _ in range(3):
        for m in (eager, twin):
            m.zero_grad()
        ember.manual_seed(7)
        eager(x).backward()
        ember.manual_seed(7)
        compiled(x).backward()
    runner = compiled._compiled._last.traced
    assert isinstance(runner, CompiledAutograd)
    return runner, [p.grad.numpy() for p in eager.parameters()], \
        [p.grad.numpy() for p in twin.parameters()]


def _saved_nodes(runner):
    """The kinds of the forward program's saved node values (after its outputs)."""
    return [v.node.kind for v in runner.graph.outputs[runner._n_out:]]


def _kinds(graph):
    out = []
    for n in graph.nodes:
        if n.kind == "fusion_group":
            out += [m.kind for m in n.attrs["graph"].nodes]
        else:
            out.append(n.kind)
    return out


@pytest.mark.parametrize("cls", [Chain, Gelu, Dropout, InPlace])
def test_gradients_are_eager_s(cls, monkeypatch):
    _, want, got = _runner(cls, True, monkeypatch)
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-12)


def test_a_cheap_chain_is_recomputed_from_the_gemm_output(monkeypatch):
    off, _, _ = _runner(Chain, False, monkeypatch)
    on, _, _ = _runner(Chain, True, monkeypatch)
    assert len(off.graph.outputs) - off._n_out == 2   # a and c
    assert len(on.graph.outputs) - on._n_out == 1     # a
    saved = on.graph.outputs[on._n_out]
    assert saved.shape == (5, 8)
    assert "linear" in _kinds(on.graph)
    assert "linear" not in _kinds(on.backward_graph)   # the GEMM is never recomputed
    assert {"mul", "add"} <= set(_kinds(on.backward_graph))


def test_a_transcendental_function_is_saved(monkeypatch):
    on, _, _ = _runner(Gelu, True, monkeypatch)
    assert len(on.graph.outputs) - on._n_out == 2    # a and gelu(a)
    bwd = _kinds(on.backward_graph)
    assert "gelu" not in bwd and "linear" not in bwd


def test_dropout_output_is_rebuilt_from_its_mask(monkeypatch):
    off, _, _ = _runner(Dropout, False, monkeypatch)
    on, _, _ = _runner(Dropout, True, monkeypatch)
    assert _saved_nodes(off).count("native_dropout") == 2   # output and mask
    assert _saved_nodes(on).count("native_dropout") == 1    # the mask
    assert "native_dropout" not in _kinds(on.backward_graph)   # never drawn again
    assert "mul" in _kinds(on.backward_graph)


def test_a_forward_writing_in_place_saves_everything(monkeypatch):
    off, _, _ = _runner(InPlace, False, monkeypatch)
    on, _, _ = _runner(InPlace, True, monkeypatch)
    assert _saved_nodes(on) == _saved_nodes(off)


def test_without_scipy_everything_is_saved(monkeypatch):
    off, _, _ = _runner(Chain, False, monkeypatch)
    monkeypatch.setitem(sys.modules, "scipy.sparse.csgraph", None)
    on, want, got = _runner(Chain, True, monkeypatch)
    assert _saved_nodes(on) == _saved_nodes(off)
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-12)


def test_gpt_with_dropout_saves_less_and_matches_eager(monkeypatch):
    def run(enabled):
        monkeypatch.setattr(partition, "ENABLED", enabled)
        ember.compiler.reset()
        ember.manual_seed(0)
        eager = GPT(vocab=13, n_embd=16, n_head=2, block=8, n_layer=2, dropout=0.2).double()
        twin = copy.deepcopy(eager)
        compiled = ember.compile(twin)
        g = np.random.default_rng(0)
        idx, tgt = ember.tensor(g.integers(0, 13, (3, 8))), ember.tensor(g.integers(0, 13, (3, 8)))
        for step in range(3):
            for m in (eager, twin):
                m.zero_grad()
            ember.manual_seed(step)
            eager(idx, tgt).backward()
            ember.manual_seed(step)
            compiled(idx, tgt).backward()
        for p, q in zip(eager.parameters(), twin.parameters()):
            np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), rtol=0, atol=1e-10)
        runner = compiled._compiled._last.traced
        assert isinstance(runner, CompiledAutograd)
        return sum(int(np.prod(v.shape)) * v.dtype.itemsize
                   for v in runner.graph.outputs[runner._n_out:])
    assert run(True) < run(False)
