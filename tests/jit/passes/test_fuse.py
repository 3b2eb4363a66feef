"""The pointwise fusion pass (ember/jit/passes/fuse.py) on traced graphs: which nodes are
fusible (float pointwise ops and casts; not reductions, random ops or integer arithmetic), the size limits (``min_size``, ``max_nodes``, ``max_outputs``), values read outside a
group becoming its outputs, and fused graphs computing eager's values."""
import sys
import warnings

import numpy as np
import pytest

import ember
import ember.jit as jit
import ember.jit.passes.fuse  # noqa: F401  (the module; ember.jit.passes.fuse is the function)

F = sys.modules["ember.jit.passes.fuse"]


def _trace(fn, *xs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return jit.trace(fn, xs)


def _x(*shape, seed=0, dtype=np.float32):
    return ember.tensor(np.random.default_rng(seed).standard_normal(shape).astype(dtype))


def _groups(graph):
    return [n for n in graph.nodes if n.kind == "fusion_group"]


def test_fusible_nodes():
    def f(x, i):
        a = x * 2.0
        s = a.sum()
        d = x.to(ember.float64)                  # a cast to another dtype fuses
        j = i + 1                                # integer arithmetic does not
        return a, s, d, j
    t = _trace(f, _x(3, 4), ember.tensor(np.arange(4)))
    assert [(n.kind, F.fusible(n)) for n in t.graph.nodes] == \
        [("mul", True), ("sum", False), ("to", True), ("add", False)]


def test_random_ops_are_never_fused():
    t = _trace(lambda x: ember.nn.functional.dropout(x * 2.0, 0.5, True) + 1.0, _x(4, 4))
    F.fuse(t.graph)
    for grp in _groups(t.graph):
        assert "dropout" not in {n.kind for n in grp.attrs["graph"].nodes}


@pytest.mark.parametrize("max_nodes, sizes", [(64, [18]), (4, [4, 4, 4, 4, 2]), (3, [3] * 6)])
def test_max_nodes_splits_a_long_chain(max_nodes, sizes):
    def f(x):
        for _ in range(9):
            x = (x * 1.1).tanh()
        return x
    x = _x(5, 6)
    t = _trace(f, x)
    F.fuse(t.graph, max_nodes=max_nodes)
    t.graph.lint()
    assert [len(g.attrs["graph"].nodes) for g in _groups(t.graph)] == sizes
    t.recompile()
    with ember.no_grad():
        np.testing.assert_allclose(t(x).numpy(), f(x).numpy(), rtol=1e-6)


def test_min_size_leaves_small_runs_unfused():
    t = _trace(lambda x: (x * 2.0).sum() + 1.0, _x(4))
    F.fuse(t.graph)                                  # mul alone, add alone: below MIN_SIZE
    assert not _groups(t.graph)
    t = _trace(lambda x: (x * 2.0).exp().sum(), _x(4))
    F.fuse(t.graph, min_size=3)
    assert not _groups(t.graph)
    F.fuse(t.graph, min_size=2)
    assert len(_groups(t.graph)) == 1


def test_values_read_outside_a_group_are_its_outputs_and_max_outputs_holds():
    def f(x):
        a = x * 2.0
        b = a + 1.0
        c = b.exp()
        d = c - a
        return a.sum(), b.sum(), c.sum(), d.sum(), d
    x = _x(3, 5)
    t = _trace(f, x)
    F.fuse(t.graph, max_outputs=2)
    t.graph.lint()
    assert _groups(t.graph)
    assert all(len(g.outputs) <= 2 for g in _groups(t.graph))
    t.recompile()
    with ember.no_grad():
        for got, want in zip(t(x), f(x)):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5)
