"""torch.autograd.graph's saved-tensor hooks: what the pack hook returns is all autograd keeps,
the unpack hook gives it back to the backward; the gradients are torch's."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _model(m, x):
    h = (x * x).sin()
    return (h.exp() * m.tanh(h) + (x @ x.T).sum(0)).sum()


@pytest.mark.parametrize("hooks", ["clone", "float16", "nested"])
def test_gradients_through_pack_and_unpack_hooks_are_torchs(hooks):
    data = np.random.default_rng(0).standard_normal((3, 3))
    out = []
    for m in (torch, ember):
        graph = __import__(f"{m.__name__}.autograd.graph", fromlist=["graph"])
        counts = {"pack": 0, "unpack": 0}

        def pack(t):
            counts["pack"] += 1
            return t.detach().half() if hooks == "float16" else t.detach().clone()

        def unpack(p):
            counts["unpack"] += 1
            return p.double() if hooks == "float16" else p
        x = m.tensor(data, requires_grad=True)
        with graph.saved_tensors_hooks(pack, unpack):
            if hooks == "nested":
                with graph.saved_tensors_hooks(lambda t: ("inner", t), lambda p: p[1]):
                    loss = _model(m, x)
            else:
                loss = _model(m, x)
        loss.backward()
        assert counts["pack"] == counts["unpack"]
        assert (counts["pack"] > 0) == (hooks != "nested")   # the innermost pair applies
        out.append(x.grad.numpy())
    np.testing.assert_allclose(out[1], out[0], rtol=1e-12)


def test_save_on_cpu_keeps_copies_and_disable_refuses_hooks():
    from ember.autograd import graph
    x = ember.tensor([0.5, 1.0], requires_grad=True)
    with graph.save_on_cpu():
        y = x * 1
        z = (y * y).sum()
    y.data.mul_(10)                # the saved copy is what the backward reads
    z.backward()
    assert x.grad.tolist() == [1.0, 2.0]
    with graph.disable_saved_tensors_hooks("not while checkpointing"):
        with pytest.raises(ember.errors.EmberRuntimeError, match="not while checkpointing"):
            with graph.saved_tensors_hooks(lambda t: t, lambda t: t):
                pass
    with graph.saved_tensors_hooks(lambda t: t, lambda p: 3):
        w = x.sin().sum()
    with pytest.raises(TypeError, match="expected to be a Tensor but got result of type int"):
        w.backward()


def test_increment_version_makes_a_saved_tensor_stale():
    from ember.autograd import graph
    x = ember.ones(2, requires_grad=True)
    h = x * 2
    y = (h * h).sum()
    graph.increment_version(h)
    with pytest.raises(ember.errors.EmberRuntimeError, match="modified by an inplace operation"):
        y.backward()
