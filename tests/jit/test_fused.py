"""Running fusion groups (ember/jit/fused.py): a group's kernel against its own op-by-op code and
torch, in array and tensor mode; the fused forward and derived backward (``FusedFunction``)
against torch autograd in float64, broadcast inputs' gradients summed back, inputs that need no
gradient, double backward through the op-by-op path; groups shared by equal subgraphs;
``NotFusible`` for ops without a translation."""
import sys
import warnings

import numpy as np
import pytest

import ember
import ember.jit as jit
import ember.jit.passes.fuse  # noqa: F401
from ember.jit import fused

torch = pytest.importorskip("torch")
fuse = sys.modules["ember.jit.passes.fuse"].fuse


@pytest.fixture
def force(monkeypatch):
    """Groups run their kernel at every size (the engine's NumPy backend)."""
    monkeypatch.setattr(fused, "FORCE", "kernel")
    monkeypatch.setattr(fused, "BACKEND", "numpy")


def _group(fn, *xs):
    """The FusedGroup of the one fusion group of ``fn``'s trace."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = jit.trace(fn, xs)
    fuse(t.graph)
    (node,) = [n for n in t.graph.nodes if n.kind == "fusion_group"]
    return fused.fused_group(node.attrs["graph"]), [v.name for v in node.args]


def _f(x, b):
    return ((x * 2.0 + b).tanh() - 1.0) * x


def test_kernel_equals_the_groups_op_by_op_code_and_torch(force):
    rng = np.random.default_rng(0)
    x, b = rng.standard_normal((4, 6)), rng.standard_normal(6)
    group, names = _group(_f, ember.tensor(x), ember.tensor(b))
    assert names == ["x", "b"]
    (got,) = group.run_arrays(x, b)
    (op_by_op,) = group.unfused("array")(x, b)
    want = _f(torch.tensor(x), torch.tensor(b)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(op_by_op, want, rtol=1e-14, atol=1e-14)
    with ember.no_grad():
        (t,) = group.run_tensors(ember.tensor(x), ember.tensor(b))
    np.testing.assert_allclose(t.numpy(), want, rtol=1e-14, atol=1e-14)


def test_fused_backward_matches_torch_with_broadcast_inputs(force):
    rng = np.random.default_rng(1)
    x, b = rng.standard_normal((4, 6)), rng.standard_normal(6)
    group, _ = _group(_f, ember.tensor(x), ember.tensor(b))
    ex, eb = ember.tensor(x, requires_grad=True), ember.tensor(b, requires_grad=True)
    (y,) = group.run_tensors(ex, eb)
    assert repr(y.grad_fn) == "<FusedFunctionBackward>"
    g = rng.standard_normal((4, 6))
    y.backward(ember.tensor(g))
    tx, tb = torch.tensor(x, requires_grad=True), torch.tensor(b, requires_grad=True)
    _f(tx, tb).backward(torch.tensor(g))
    assert eb.grad.shape == (6,)
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(eb.grad.numpy(), tb.grad.numpy(), rtol=1e-12, atol=1e-12)
    gx, gb = group.backward_arrays([x, b], [g], (True, False))
    assert gb is None
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_double_backward_runs_op_by_op(force):
    rng = np.random.default_rng(2)
    x, b = rng.standard_normal((3, 5)), rng.standard_normal(5)
    group, _ = _group(_f, ember.tensor(x), ember.tensor(b))
    ex = ember.tensor(x, requires_grad=True)
    (y,) = group.run_tensors(ex, ember.tensor(b))
    (gx,) = ember.autograd.grad(y.sum(), [ex], create_graph=True)
    (ggx,) = ember.autograd.grad(gx.sum(), [ex])
    tx = torch.tensor(x, requires_grad=True)
    (tgx,) = torch.autograd.grad(_f(tx, torch.tensor(b)).sum(), [tx], create_graph=True)
    (tggx,) = torch.autograd.grad(tgx.sum(), [tx])
    np.testing.assert_allclose(ggx.numpy(), tggx.numpy(), rtol=1e-10, atol=1e-12)


def test_equal_subgraphs_share_one_group():
    a, _ = _group(_f, ember.randn(4, 6), ember.randn(6))
    b, _ = _group(_f, ember.randn(4, 6), ember.randn(6))
    assert a is b
    c, _ = _group(lambda x, b: (x + b).sigmoid() * 3.0, ember.randn(4, 6), ember.randn(6))
    assert c is not a


def test_a_node_without_translation_is_not_fusible():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = jit.trace(lambda x: x.sum(0) * 2.0, (ember.randn(3, 4),))
    with pytest.raises(fused.NotFusible):
        fused.translate_nodes(t.graph.inputs, t.graph.nodes, t.graph.outputs)
