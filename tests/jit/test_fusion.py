"""Pointwise fusion: what the pass groups and what it must not, printing/parsing of fused graphs,
forward and backward of fused groups against the unfused graph (every JIT test model), every
derivative rule against ember's autograd, and the compiled (Numba) path on a few kernels."""
import sys
import warnings

import numpy as np
import pytest

import ember
import ember.autograd._generated as G
import ember.jit as jit
from ember.jit import fused
from ember.jit.passes import fuse
from ember.kernels.pointwise import has_compiler
from tests.jit.models import MODELS, example

fuse_mod = sys.modules["ember.jit.passes.fuse"]


@pytest.fixture
def force(monkeypatch):
    """Fused groups run their kernel at every size (the engine's NumPy backend unless asked)."""
    monkeypatch.setattr(fused, "FORCE", "kernel")
    monkeypatch.setattr(fused, "BACKEND", "numpy")
    return monkeypatch


def _trace(fn, *xs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return jit.trace(fn, xs)


def _groups(g):
    return g.find_nodes("fusion_group")


def _kinds(node):
    return [n.kind for n in node.attrs["graph"].nodes]


def x_(*shape, seed=0, grad=False):
    t = ember.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))
    return t.requires_grad_(True) if grad else t


# ---------------------------------------------------------------------------------- the pass
def test_chain_fuses_into_one_group_and_roundtrips():
    def f(x, b):
        return ((x * 2.0 + b).relu() - 1.0).sigmoid() * x
    t = _trace(f, x_(4, 8), x_(8, seed=1))
    o = jit.optimize(t)
    (grp,) = _groups(o.graph)
    assert _kinds(grp) == ["mul", "add", "relu", "sub", "sigmoid", "mul"]
    assert len(o.graph.nodes) == 1
    text = str(o.graph)
    assert "= fusion_group_0(%x, %b)" in text and "\nwith fusion_group_0 = graph(%x : f32[4, 8]," in text
    g2 = jit.parse(text)
    g2.lint()
    assert g2 == o.graph and str(g2) == text
    assert str(o.graph.copy()) == text
    x, b = x_(4, 8, seed=3), x_(8, seed=4)
    with ember.no_grad():
        np.testing.assert_allclose(o(x, b)._data, f(x, b)._data, rtol=1e-6)


def test_not_fused_across_a_non_pointwise_consumer():
    def f(x):
        e = x.exp()
        s = e.sum(1, keepdim=True)  # reads e before the division
        return (e * 2.0) / s + 1.0
    o = jit.optimize(_trace(f, x_(3, 5)))
    for grp in _groups(o.graph):
        assert not ("exp" in _kinds(grp) and "div" in _kinds(grp))
    (grp,) = _groups(o.graph)  # the ops after the reduction fuse
    assert _kinds(grp) == ["mul", "div", "add"]
    x = x_(3, 5, seed=2)
    with ember.no_grad():
        np.testing.assert_allclose(o(x)._data, f(x)._data, rtol=1e-6)


def test_random_ops_and_matmul_are_not_fused():
    def f(x, w):
        h = ember.dropout((x * 3.0).tanh(), 0.5, True)
        return (h @ w + 1.0).relu()
    g = _trace(f, x_(4, 4), x_(4, 4, seed=1)).graph.copy()
    fuse(g, min_size=1)
    g.lint()
    assert g.find_nodes("native_dropout") and g.find_nodes("matmul")
    assert [_kinds(n) for n in _groups(g)] == [["mul", "tanh"], ["add", "relu"]]


def test_output_cap_and_min_size():
    def f(x):
        a, b, c = x.exp(), x.sin(), x.cos()
        return a, b, c, a * b * c
    g = _trace(f, x_(6)).graph.copy()
    fuse(g, max_outputs=2)
    for grp in _groups(g):
        assert len(grp.outputs) <= 2
    g2 = _trace(lambda x: x.relu() @ x.t(), x_(3, 3)).graph.copy()
    fuse(g2)
    assert not _groups(g2)  # a lone pointwise node stays as it is


def test_copy_and_integer_values_stop_fusion():
    def f(x, i):
        return (x * 2.0).relu() + i.to(ember.float32) * 0.5
    t = _trace(f, x_(5), ember.tensor(np.arange(5)))
    g = t.graph.copy()
    fuse(g)
    (grp,) = _groups(g)
    assert "to" in _kinds(grp)  # the int64 -> float32 cast joins; int arithmetic would not
    assert fuse_mod.fusible(g.find_nodes("fusion_group")[0]) is False


def test_optimize_pipeline_includes_fusion():
    from ember.jit.passes import PIPELINE
    names = [n for n, _ in PIPELINE]
    assert names.index("fuse") < names.index("cse")


# ---------------------------------------------------------------------------------- models
@pytest.mark.parametrize("name", sorted(MODELS))
def test_models_fused_forward_and_backward_equal_unfused(name, force):
    model = MODELS[name]().eval()
    t = _trace(model, example(model))
    o = jit.optimize(t, freeze_params=False, passes=[lambda g: fuse(g, min_size=1), "dce"])
    assert _groups(o.graph)
    text = str(o.graph)
    assert jit.parse(text, constants=o.graph.constants) == o.graph
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
        _flat(fn(x))[0].square().sum().backward()
        grads.append([p.grad._data.copy() for p in model.parameters()] +
                     ([x.grad._data.copy()] if x.requires_grad else []))
    for a, b in zip(*grads):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)


def test_optimized_resnet_fuses_add_relu_and_matches():
    model = MODELS["resnet"]().eval()
    t = _trace(model, example(model))
    o = jit.optimize(t)
    assert [_kinds(n) for n in _groups(o.graph)] == [["add", "relu"]] * 3
    x = example(model, 2, seed=9)
    with ember.no_grad():
        np.testing.assert_allclose(o(x)._data, t(x)._data, rtol=1e-5, atol=1e-6)


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    return [out]


# ---------------------------------------------------------------------------------- rules
U = lambda op, **kw: (lambda x: op(x, **kw))  # noqa: E731
RULE_CASES = {
    "add": (lambda x, y: G.add(x, y, alpha=2), 2), "sub": (lambda x, y: G.sub(x, y), 2),
    "mul": (G.mul, 2), "div": (G.div, 2), "pow": (lambda x, y: G.pow(x.abs() + 0.5, y), 2),
    "pow_scalar": (lambda x: G.pow(x, 3), 1), "rpow": (lambda x: G.pow(2.0, x), 1),
    "remainder": (lambda x, y: G.remainder(x, y.abs() + 0.5), 2),
    "floor_div": (lambda x, y: G.div(x, y.abs() + 0.5, rounding_mode="floor"), 2),
    "maximum": (lambda x, y: G.maximum(x, G.where(G.gt(y, 0.5), x, y)), 2),
    "minimum": (lambda x, y: G.minimum(x, G.where(G.gt(y, 0.5), x, y)), 2),
    "where": (lambda x, y: G.where(G.gt(x, y), x, y), 2),
    "lerp": (lambda x, y, w: G.lerp(x, y, G.sigmoid(w)), 3),
    "clamp": (lambda x, y, z: G.clamp(x, y - 1.0, z + 1.0), 3),
    "clamp_scalar": (lambda x: G.clamp(x, -0.5, 0.5), 1),
    "neg": (G.neg, 1), "abs": (G.abs, 1), "sign": (G.sign, 1), "reciprocal": (G.reciprocal, 1),
    "exp": (G.exp, 1), "exp2": (G.exp2, 1), "expm1": (G.expm1, 1),
    "log": (lambda x: G.log(x.abs() + 0.1), 1), "log2": (lambda x: G.log2(x.abs() + 0.1), 1),
    "log1p": (lambda x: G.log1p(x.abs()), 1), "sqrt": (lambda x: G.sqrt(x.abs() + 0.1), 1),
    "rsqrt": (lambda x: G.rsqrt(x.abs() + 0.1), 1), "sin": (G.sin, 1), "cos": (G.cos, 1),
    "tan": (lambda x: G.tan(x * 0.5), 1), "tanh": (G.tanh, 1), "sigmoid": (G.sigmoid, 1),
    "erf": (G.erf, 1), "relu": (G.relu, 1), "leaky_relu": (U(G.leaky_relu, negative_slope=0.2), 1),
    "elu": (U(G.elu, alpha=1.5), 1), "selu": (G.selu, 1), "gelu": (G.gelu, 1),
    "gelu_tanh": (U(G.gelu, approximate="tanh"), 1), "silu": (G.silu, 1),
    "softplus": (U(G.softplus, beta=2.0, threshold=1.0), 1),
    "hardtanh": (U(G.hardtanh, min_val=-0.5, max_val=0.7), 1),
    "floor": (G.floor, 1), "ceil": (G.ceil, 1), "trunc": (G.trunc, 1), "round": (G.round, 1),
    "to_f64": (lambda x: G.to(x, np.dtype("float64")), 1),
    "broadcast": (lambda x, b: (x * b[0]).tanh(), 2),
}


@pytest.mark.parametrize("case", sorted(RULE_CASES))
def test_derivative_rule_matches_autograd(case, force):
    fn, arity = RULE_CASES[case]

    def f(*xs):
        return G.mul(fn(*xs), 1.5) + 0.25
    shapes = [(3, 4)] * arity if case != "broadcast" else [(3, 4), (1, 4)]
    xs = [x_(*s, seed=i) for i, s in enumerate(shapes)]
    o = jit.optimize(_trace(f, *xs))
    assert _groups(o.graph), f"{case} did not fuse"
    calls = []
    orig = fused.FusedGroup.backward_arrays
    force.setattr(fused.FusedGroup, "backward_arrays",
                  lambda self, *a: calls.append(1) or orig(self, *a))
    grads = []
    for run in (f, o):
        ins = [x_(*s, seed=10 + i, grad=True) for i, s in enumerate(shapes)]
        out = run(*ins)
        (out * x_(*out.shape, seed=99)).sum().backward()
        grads.append([t.grad._data if t.grad is not None else None for t in ins])
    assert calls
    for a, b in zip(*grads):
        assert (a is None) == (b is None)
        if a is not None:
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_rule_table_covers_the_translated_ops():
    from ember.kernels.pointwise.autodiff import RULES
    emitted = {"add", "sub", "mul", "div", "floor_divide", "trunc", "round", "cast", "leaky_relu",
               "elu", "gelu", "softplus", "hardtanh"} | set(fused._DIRECT)
    assert emitted - {"cast"} <= set(RULES)


def test_double_backward_through_a_fused_group(force):
    f = lambda x: (x * x).tanh() * 2.0  # noqa: E731
    o = jit.optimize(_trace(f, x_(4)))
    for run in (f, o):
        x = x_(4, seed=3, grad=True)
        (g,) = ember.autograd.grad(run(x).sum(), [x], create_graph=True)
        g.sum().backward()
        if run is f:
            ref = x.grad._data.copy()
    np.testing.assert_allclose(x.grad._data, ref, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------- compiled
@pytest.mark.skipif(not has_compiler(), reason="numba not importable")
def test_compiled_fused_forward_backward(force):
    force.setattr(fused, "BACKEND", "numba")
    f = lambda x, b: G.gelu(x + b, approximate="tanh")  # noqa: E731
    x, b = x_(64, 300, seed=1), x_(300, seed=2)
    o = jit.optimize(_trace(f, x, b))
    (grp,) = _groups(o.graph)
    with ember.no_grad():
        np.testing.assert_allclose(o(x, b)._data, f(x, b)._data, rtol=1e-5, atol=1e-6)
    grads = []
    for run in (f, o):
        xx, bb = x_(64, 300, seed=5, grad=True), x_(300, seed=6, grad=True)
        (run(xx, bb) * x_(64, 300, seed=7)).sum().backward()
        grads.append((xx.grad._data, bb.grad._data))
    for a, b2 in zip(*grads):
        np.testing.assert_allclose(b2, a, rtol=1e-4, atol=1e-5)


def test_small_inputs_run_the_unfused_code():
    f = lambda x: (x * 2.0).relu() + 1.0  # noqa: E731
    o = jit.optimize(_trace(f, x_(4, 4)))
    grp = fused.fused_group(_groups(o.graph)[0].attrs["graph"])
    assert not grp._use_kernel([np.zeros((4, 4), np.float32)])
    with ember.no_grad():
        np.testing.assert_allclose(o(x_(4, 4, seed=2))._data, f(x_(4, 4, seed=2))._data)


def test_node_reading_one_grouped_value_twice_fuses_once():
    import ember
    from ember import jit
    x = ember.randn(4, 5)
    opt = jit.optimize(jit.trace(lambda t: (t - 1.0).square() + (t - 1.0) * (t - 1.0), (x,)))
    np.testing.assert_allclose(opt(x).numpy(), (2 * (x - 1.0) ** 2).numpy(), rtol=1e-6)
    opt.graph.lint()
