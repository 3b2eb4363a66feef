"""The decomposition pass (``passes.decompose``): layer_norm into spec ops, bias-linear into
linear + add where a fusible pointwise reader follows; what is and is not rewritten, lint,
metadata, dynamic shapes, forward and backward equality on every JIT test model with fusion
forced on, and that after ``optimize`` the tails end up in fusion groups."""
import sys
import warnings

import numpy as np
import pytest

import ember
from ember.autograd._generated import functions as G
import ember.jit as jit
from ember.jit import fused
from ember.jit.passes import PIPELINE, decompose, fuse
from tests.jit.models import MODELS, example

dec_mod = sys.modules["ember.jit.passes.decompose"]


@pytest.fixture(autouse=True)
def decompose_small(monkeypatch):
    """The tests' tensors are small: decompose layer_norm at any size (the size gate has its own
    test below)."""
    monkeypatch.setattr(dec_mod, "MIN_LAYER_NORM_SIZE", 0)


@pytest.fixture
def force(monkeypatch):
    monkeypatch.setattr(fused, "FORCE", "kernel")
    monkeypatch.setattr(fused, "BACKEND", "numpy")
    return monkeypatch


def _trace(fn, *xs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return jit.trace(fn, xs)


def x_(*shape, seed=0, dtype=np.float32):
    return ember.tensor(np.random.default_rng(seed).standard_normal(shape).astype(dtype))


def _kinds(g):
    return [n.kind for n in g.nodes]


def _groups(g):
    return [[n.kind for n in grp.attrs["graph"].nodes] for grp in g.find_nodes("fusion_group")]


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    return [out]


# ---------------------------------------------------------------------------------- layer_norm
def test_layer_norm_becomes_spec_ops_with_metadata():
    def f(x, w, b):
        return G.layer_norm(x, (4, 5), w, b, 1e-3)
    t = _trace(f, x_(3, 4, 5), x_(4, 5, seed=1), x_(4, 5, seed=2))
    g = t.graph.copy()
    out_name = g.outputs[0].name
    decompose(g).lint()
    assert _kinds(g) == ["mean", "sub", "mul", "mean", "add", "rsqrt", "mul", "mul", "add"]
    m1, sub, sq, m2, add_eps, rs, mul, mulw, addb = g.nodes
    assert m1.attrs == {"dim": (-2, -1), "keepdim": True, "dtype": None} == m2.attrs
    assert add_eps.args[1] == 1e-3 and add_eps.attrs == {"alpha": 1}
    assert sub.attrs == {"alpha": 1} and addb.attrs == {"alpha": 1}
    for n, shape in zip(g.nodes, [(3, 1, 1), (3, 4, 5), (3, 4, 5), (3, 1, 1), (3, 1, 1),
                                  (3, 1, 1), (3, 4, 5), (3, 4, 5), (3, 4, 5)]):
        assert n.outputs[0].shape == shape and n.outputs[0].dtype == np.float32
    assert mulw.args[1] is g.inputs[1] and addb.args[1] is g.inputs[2]
    assert g.outputs[0].name == out_name  # the result keeps the layer_norm's name
    assert jit.parse(str(g)) == g
    xs = (x_(3, 4, 5, seed=7), x_(4, 5, seed=8), x_(4, 5, seed=9))
    with ember.no_grad():
        np.testing.assert_allclose(jit.optimize(t, passes=["decompose"])(*xs)._data,
                                   f(*xs)._data, rtol=1e-5, atol=1e-6)


def test_small_layer_norm_stays_one_node(monkeypatch):
    monkeypatch.setattr(dec_mod, "MIN_LAYER_NORM_SIZE", fused.MIN_FUSED_SIZE)
    assert dec_mod.MIN_LAYER_NORM_SIZE == 1 << 14   # below it fused groups run op by op
    g = _trace(lambda x: G.layer_norm(x, (64,), None, None, 1e-5).relu(), x_(255, 64)).graph.copy()
    decompose(g)
    assert _kinds(g) == ["layer_norm", "relu"]
    g = _trace(lambda x: G.layer_norm(x, (64,), None, None, 1e-5).relu(), x_(256, 64)).graph.copy()
    decompose(g)
    assert "layer_norm" not in _kinds(g)


def test_layer_norm_without_affine_and_float64():
    t = _trace(lambda x: G.layer_norm(x, (6,), None, None, 1e-5), x_(2, 6, dtype=np.float64))
    g = decompose(t.graph.copy()).lint()
    assert _kinds(g) == ["mean", "sub", "mul", "mean", "add", "rsqrt", "mul"]
    assert all(n.outputs[0].dtype == np.float64 for n in g.nodes)
    x = x_(2, 6, seed=3, dtype=np.float64)
    with ember.no_grad():
        np.testing.assert_allclose(jit.optimize(t, passes=["decompose"])(x)._data,
                                   G.layer_norm(x, (6,), None, None, 1e-5)._data, rtol=1e-12)


def test_layer_norm_with_mismatched_dtypes_is_kept():
    g = _trace(lambda x: G.layer_norm(x, (6,), None, None, 1e-5), x_(2, 6)).graph.copy()
    ln = g.nodes[0]
    ln.outputs[0].dtype = np.dtype("float16")  # a recorded dtype the spec ops would not give
    decompose(g)
    assert _kinds(g) == ["layer_norm"]


def test_layer_norm_traced_size_stays_dynamic():
    def f(x, w, b):
        return G.layer_norm(x, (x.shape[-1],), w, b, 1e-5).relu()
    t = _trace(f, x_(2, 8), x_(8, seed=1), x_(8, seed=2))
    assert "size" in _kinds(t.graph)
    o = jit.optimize(t)
    o.graph.lint()
    assert "layer_norm" not in _kinds(o.graph)
    assert ["mul", "mul", "add", "relu"] in _groups(o.graph)
    xs = (x_(5, 8, seed=4), x_(8, seed=5), x_(8, seed=6))  # another batch size
    with ember.no_grad():
        np.testing.assert_allclose(o(*xs)._data, f(*xs)._data, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------- linear
def test_linear_bias_split_only_before_a_fusible_reader():
    x, w, b = x_(4, 3), x_(5, 3, seed=1), x_(5, seed=2)
    g = decompose(_trace(lambda x, w, b: G.linear(x, w, b).relu(), x, w, b).graph.copy()).lint()
    assert _kinds(g) == ["linear", "add", "relu"]
    lin, add, _ = g.nodes
    assert lin.args == [g.inputs[0], g.inputs[1], None] and lin.outputs[0].shape == (4, 5)
    assert add.args == [lin.outputs[0], g.inputs[2]] and add.attrs == {"alpha": 1}
    assert add.outputs[0].dtype == np.float32 and add.outputs[0].shape == (4, 5)
    kept = {
        "returned": lambda x, w, b: G.linear(x, w, b),
        "reduction reader": lambda x, w, b: G.linear(x, w, b).sum(1),
        "view reader": lambda x, w, b: G.linear(x, w, b).reshape(-1).relu(),
        "no bias": lambda x, w, b: G.linear(x, w, None).relu() + b,
        "reader of another shape": lambda x, w, b: G.linear(x, w, b) + x_(3, 4, 5, seed=3),
    }
    for why, f in kept.items():
        g = decompose(_trace(f, x, w, b).graph.copy()).lint()
        (lin,) = g.find_nodes("linear")
        if why == "no bias":
            assert lin.args[2] is None and _kinds(g)[:2] == ["linear", "relu"]
        else:
            assert lin.args[2] is g.inputs[2] and "add" not in _kinds(g)[:2], why


def test_linear_split_is_equal_forward_and_backward():
    def f(x, w, b):
        return G.gelu(G.linear(x, w, b)) * 0.5
    xs = [x_(6, 3), x_(5, 3, seed=1), x_(5, seed=2)]
    o = jit.optimize(_trace(f, *xs), passes=["decompose"])
    assert _kinds(o.graph)[:2] == ["linear", "add"]
    grads = []
    for run in (f, o):
        ins = [x_(6, 3, seed=10), x_(5, 3, seed=11), x_(5, seed=12)]
        for t in ins:
            t.requires_grad_(True)
        (run(*ins) * x_(6, 5, seed=13)).sum().backward()
        grads.append([t.grad._data for t in ins])
    for a, b in zip(*grads):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------- pipeline
def test_pipeline_runs_decompose_just_before_fuse():
    names = [n for n, _ in PIPELINE]
    assert names.index("decompose") == names.index("fuse") - 1
    assert names.index("fold_batchnorm") < names.index("decompose")


def test_optimize_fuses_transformer_layer_norm_tail_and_mlp_bias_relu():
    model = MODELS["transformer"]().eval()
    t = _trace(model, example(model))
    o = jit.optimize(t)
    o.graph.lint()
    assert not o.graph.find_nodes("layer_norm")
    groups = _groups(o.graph)
    assert groups.count(["mul", "mul", "add"]) == 2     # both layer_norm tails
    assert ["add", "gelu"] in groups                      # linear1 bias + GELU
    assert ["sub", "mul"] in groups                       # centre + square
    assert all(n.args[2] is None for n in o.graph.find_nodes("linear")[1:])
    x = example(model, 3, seed=4)
    with ember.no_grad():
        np.testing.assert_allclose(o(x)._data, t(x)._data, rtol=1e-5, atol=1e-6)

    model = MODELS["mlp"]().eval()
    t = _trace(model, example(model))
    o = jit.optimize(t)
    assert _groups(o.graph) == [["add", "relu"]] * 2
    lins = o.graph.find_nodes("linear")
    assert [n.args[2] is None for n in lins] == [True, True, False]  # fc3 is returned: kept
    x = example(model, 5, seed=4)
    with ember.no_grad():
        np.testing.assert_allclose(o(x)._data, t(x)._data, rtol=1e-5, atol=1e-6)


# Which models gain decomposed nodes (the others must come out unchanged by the pass).
REWRITES = {"mlp": True, "transformer": True, "lenet_bn": False, "resnet": False,
            "densenet": False, "lstm_lm": False}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_models_decomposed_and_fused_equal_original(name, force):
    model = MODELS[name]().eval()
    t = _trace(model, example(model))
    before = t.graph.copy()
    after = decompose(t.graph.copy()).lint()
    assert (after != before) == REWRITES[name]
    o = jit.optimize(t, freeze_params=False,
                     passes=["decompose", lambda g: fuse(g, min_size=1), "dce"])
    o.graph.lint()
    assert jit.parse(str(o.graph), constants=o.graph.constants) == o.graph
    x = example(model, 3, seed=5)
    with ember.no_grad():
        for a, b in zip(_flat(t(x)), _flat(o(x))):
            np.testing.assert_allclose(b._data, a._data, rtol=1e-5, atol=1e-6)
        for a, b in zip(_flat(t(x)), _flat(o.run_interpreter(x, mode="array"))):
            np.testing.assert_allclose(b._data, a._data, rtol=1e-5, atol=1e-6)
    if x.dtype == ember.float32:
        x.requires_grad_(True)
    grads = []
    for fn in (t, o):
        for p in model.parameters():
            p.grad = None
        x.grad = None
        out = _flat(fn(x))[0]
        # a random projection, not square().sum(): sum(layer_norm(.)**2) is constant per row,
        # so gradients before the last layer_norm would be pure cancellation noise
        (out * x_(*out.shape, seed=99)).sum().backward()
        grads.append([p.grad._data.copy() for p in model.parameters()] +
                     ([x.grad._data.copy()] if x.requires_grad else []))
    for a, b in zip(*grads):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_lenet_linear_before_batch_norm_is_folded_not_split():
    # fold_batchnorm runs first and needs the bias slot; the folded linear -> relu then splits.
    model = MODELS["lenet_bn"]().eval()
    o = jit.optimize(_trace(model, example(model)))
    assert not o.graph.find_nodes("native_batch_norm")
    assert ["add", "relu"] in _groups(o.graph)
