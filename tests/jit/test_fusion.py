"""Pointwise fusion: what the pass groups and what it must not, printing/parsing of fused graphs,
forward and backward of fused groups against the unfused graph (every JIT test model), every
spec op with a ``pointwise:`` entry (fused forward and derived backward against eager, on its spec
samples), and the compiled (Numba) path on a few kernels."""
import sys
import warnings

import numpy as np
import pytest

import ember
from ember.autograd._generated import functions as G
import ember.jit as jit
from ember.jit import fused
from ember.jit.passes import fuse
from ember.kernels.pointwise import has_compiler
from ember.kernels.pointwise.expr import Builder
from tests.autograd.spec_samples import Leaf, cases
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


@pytest.mark.parametrize("mode", [None, "kernel", "unfused"])
def test_run_arrays_into_writes_outputs_into_arguments(mode, monkeypatch):
    # ember.compile's whole step: an optimizer update's outputs written into the parameter
    # and its state (attrs["into"]), one pass, same values as the allocating run
    monkeypatch.setattr(fused, "FORCE", mode)
    t = _trace(lambda x, m, g: (m * 0.9 + g, x - 0.1 * (m * 0.9 + g)), x_(300, 300),
               x_(300, 300, seed=1), x_(300, 300, seed=2))
    (grp,) = _groups(jit.optimize(t).graph)
    fg = fused.fused_group(grp.attrs["graph"])
    x, m, g = (x_(300, 300, seed=s)._data for s in range(3))
    names = [v.name for v in grp.args]
    args = [{"x": x, "m": m, "g": g}[n] for n in names]
    want = fg.run_arrays(*args)
    into = tuple(names.index(n) for n in ("m", "x"))
    keep = [a.copy() for a in (x, m, g)]
    got = fg.run_arrays_into(into, *args)
    assert got[0] is m and got[1] is x
    np.testing.assert_allclose(m, want[0], rtol=1e-6)
    np.testing.assert_allclose(x, want[1], rtol=1e-6)
    np.testing.assert_array_equal(g, keep[2])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_zero_d_inputs_run_as_scalars_only_when_typed_alike(dtype, force):
    # an optimizer update's hyper-parameters (0-d arrays of the parameter's dtype) go to the
    # kernel as Python floats: the same values as 0-d arrays, into arguments and arena buffers
    force.setattr(fused, "BACKEND", None)
    x, m, g = (np.random.default_rng(s).standard_normal((50, 40)).astype(dtype)
               for s in range(3))
    lr, mom = np.array(0.1, dtype), np.array(0.9, dtype)
    # a product of two 0-d inputs: scalars only where the engine types them as the 0-d arrays
    fg = fused.FusedGroup(_trace(lambda x, lr, mom: (x * (lr * mom),),
                                 *(ember.tensor(a) for a in (x, lr, mom))).graph.copy())
    assert [n.kind for n in fg.graph.nodes] == ["mul", "mul"]
    kernel, mask = fg._scalar_kernel([x, lr, mom])
    assert mask is None or fused._same_typing(kernel.typing, fg.kernel([x, lr, mom]).typing)
    np.testing.assert_array_equal(fg.run_arrays(x, lr, mom)[0], fg.unfused("array")(x, lr, mom)[0])
    t = _trace(lambda x, m, g, lr, mom: (m * mom + g, x - lr * (m * mom + g)),
               *(ember.tensor(a) for a in (x, m, g, lr, mom)))
    (grp,) = _groups(jit.optimize(t).graph)
    fg = fused.fused_group(grp.attrs["graph"])
    names = [v.name for v in grp.args]
    args = [dict(x=x, m=m, g=g, lr=lr, mom=mom)[n] for n in names]
    want = fg.unfused("array")(*args)
    kernel, mask = fg._scalar_kernel(args)
    assert mask is not None and sum(mask) == 2
    outs = (np.empty_like(x), np.empty_like(x))
    for got in (fg.run_arrays(*args), fg.run_arrays_out(outs, *args)):
        for a, b in zip(got, want):
            assert a.dtype == dtype
            np.testing.assert_array_equal(a, b)
    assert all(a is b for a, b in zip(fg.run_arrays_out(outs, *args), outs))


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


# ---------------------------------------------------------------------------------- spec ops
POINTWISE = [c for c in cases() if c.entry.get("pointwise") is not None]


def _tensor_args(case):
    return [a for a in case.args if a.is_tensor]


def _bind(case, args, kwargs, rng):
    """(values by spec argument name, leaves): a spec sample with its Leafs made as float32."""
    vals = {}
    for a, v in zip(case.args, args):
        vals[a.name] = v
    vals.update(kwargs)
    for a in case.args:
        if a.name not in vals and a.default is not None:
            vals[a.name] = {"None": None, "true": True, "false": False}.get(a.default) \
                if a.default in ("None", "true", "false") else eval(a.default)
        v = vals.get(a.name)
        if isinstance(v, Leaf):
            vals[a.name] = v.make(rng, np.float32)
    return vals


def _eager(case, vals, grad_names):
    """Eager forward (and the leaves that require grad) through the generated op."""
    leaves = {}
    pos, kw = [], {}
    for a in case.args:
        v = vals[a.name]
        if isinstance(v, np.ndarray):
            v = ember.from_numpy(v.copy())
            if a.name in grad_names:
                v.requires_grad_(True)
                leaves[a.name] = v
        (kw.__setitem__(a.name, v) if a.kwonly else pos.append(v))
    return getattr(G, case.name)(*pos, **kw), leaves


def _fused_forward(case, vals):
    """The op's pointwise form from the spec, as an Expr over its array operands."""
    arrays = [a.name for a in _tensor_args(case) if isinstance(vals[a.name], np.ndarray)]
    b = Builder(tuple(f"a{i}" for i in range(len(arrays))))
    syms = dict(zip(arrays, b.inputs))
    operands = [syms.get(a.name, vals[a.name]) for a in _tensor_args(case)]
    consts = {a.name: vals[a.name] for a in case.args if not a.is_tensor}
    out = fused.TRANSLATE[case.name](*operands, **consts)
    return b.expr(out), [vals[n] for n in arrays], arrays


@pytest.mark.parametrize("case", POINTWISE, ids=lambda c: c.name)
def test_spec_pointwise_op_fused_forward_and_backward_match_eager(case):
    """Every spec op with a ``pointwise:`` entry, on its spec samples: the fused kernel (NumPy
    backend) equals the eager op, and the backward derived from the spec's formulas equals
    eager autograd, input by input, with dtypes and shapes."""
    from ember.kernels.pointwise import compile_pointwise
    from ember.kernels.pointwise.autodiff import derive
    from ember.kernels.shape import sum_to_shape
    assert case.samples, f"{case.name}: a pointwise op needs test samples"
    rng = np.random.default_rng(0)
    for args, kwargs in case.samples:
        vals = _bind(case, args, kwargs, rng)
        expr, arrays, names = _fused_forward(case, vals)
        diff = {a.name for a in _tensor_args(case)
                if case.differentiable and isinstance(vals[a.name], np.ndarray)
                and vals[a.name].dtype.kind == "f"
                and case.entry.get(a.name) not in ("non_differentiable", "refuses_grad")}
        out, leaves = _eager(case, vals, diff)
        k = compile_pointwise(expr, arrays)
        (got,) = k(*arrays, backend="numpy")
        want = out._data
        assert got.dtype == want.dtype and got.shape == want.shape, (case.name, args, kwargs)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"{case.name} {args}")
        if not leaves or want.dtype.kind != "f":
            continue
        g = rng.standard_normal(want.shape).astype(want.dtype)
        out.backward(ember.from_numpy(g))
        needs = [n in leaves for n in names]
        bwd = derive(expr, k.typing, (True,), needs, fused.RULES)
        outs = iter(compile_pointwise(bwd.expr, arrays + [g])(*arrays, g, backend="numpy")
                    if bwd.expr is not None else ())
        for n, a, kind in zip(names, arrays, bwd.kinds):
            if n not in leaves:
                continue
            ref = leaves[n].grad
            assert kind is not None and ref is not None, (case.name, n, args)
            mine = np.zeros(a.shape, a.dtype) if kind == "zero" else sum_to_shape(next(outs), a.shape)
            assert mine.dtype == ref._data.dtype and mine.shape == ref._data.shape, (case.name, n)
            np.testing.assert_allclose(mine, ref._data, rtol=1e-5, atol=1e-6,
                                       err_msg=f"d {case.name} / d {n} on {args} {kwargs}")


@pytest.mark.parametrize("case", POINTWISE, ids=lambda c: c.name)
def test_spec_pointwise_op_is_fused_when_traced(case):
    """The fusion pass takes every spec op with a ``pointwise:`` entry (first float sample)."""
    for args, kwargs in case.samples:
        vals = _bind(case, args, kwargs, np.random.default_rng(1))
        arrays = [a.name for a in _tensor_args(case) if isinstance(vals[a.name], np.ndarray)]
        if not arrays or any(vals[n].ndim == 0 or vals[n].size == 0 for n in arrays):
            continue
        if case.name != "to" and any(vals[n].dtype.kind not in "fb" for n in arrays):
            continue

        def f(*ts):
            v = dict(vals)
            v.update(zip(arrays, ts))
            return _eager(case, v, ())[0]
        t = _trace(f, *(ember.from_numpy(vals[n]) for n in arrays))
        (node,) = [n for n in t.graph.nodes if n.kind == case.name]
        assert fuse_mod.fusible(node), f"{case.name} {args} {kwargs} is not fusible"
        return
    pytest.skip(f"{case.name}: no sample the fusion pass takes (all 0-d, empty or integer)")


def test_every_emitted_vocabulary_op_has_a_derivative_rule():
    """Each floating vocabulary op a translation can emit has a rule derived from the spec."""
    from ember.kernels.pointwise.ops import OPS
    emitted = set()
    for case in POINTWISE:
        for args, kwargs in case.samples:
            expr = _fused_forward(case, _bind(case, args, kwargs, np.random.default_rng(0)))[0]
            emitted |= {op for _, op, _ in expr.steps}
    emitted.add("floor_divide")  # div(rounding_mode='floor'), not in the samples
    missing = {op for op in emitted if OPS[op].kind not in ("compare", "predicate", "logical")
               and op != "cast"} - set(fused.RULES)
    assert not missing


def test_broadcast_input_gradient_is_summed_to_its_shape(force):
    f = lambda x, b: (x * b[0]).tanh()  # noqa: E731
    shapes = [(3, 4), (1, 4)]
    o = jit.optimize(_trace(f, *(x_(*s, seed=i) for i, s in enumerate(shapes))))
    assert _groups(o.graph)
    grads = []
    for run in (f, o):
        ins = [x_(*s, seed=10 + i, grad=True) for i, s in enumerate(shapes)]
        (run(*ins) * x_(3, 4, seed=99)).sum().backward()
        grads.append([t.grad._data for t in ins])
    for a, b in zip(*grads):
        assert a.shape == b.shape
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


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


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_fused_gradient_becomes_grad_uncopied_and_accumulates(force, backend):
    """The fused backward's input gradient is memory its kernel just made: the leaf's .grad is
    that array (no copy), a second backward adds into it in place, and neither the incoming
    gradient nor the input changes."""
    if backend == "numba" and not has_compiler():
        pytest.skip("numba not importable")
    force.setattr(fused, "BACKEND", backend)
    f = lambda x: (x * 2.0).tanh() + x  # noqa: E731
    o = jit.optimize(_trace(f, x_(5, 7)))
    assert _groups(o.graph)
    made = []
    real = fused.FusedGroup.backward_arrays
    force.setattr(fused.FusedGroup, "backward_arrays",
                  lambda self, *a: made.extend(real(self, *a)) or made[-1:])
    gy = x_(5, 7, seed=2)
    kept = gy._data.copy()
    refs = []
    for run in (f, o):
        x = x_(5, 7, seed=1, grad=True)
        x0 = x._data.copy()
        run(x).backward(gy)
        if run is o:
            assert x.grad._data is made[0]
        first = x.grad._data.copy()
        run(x).backward(gy)
        refs.append((first, x.grad._data))
        np.testing.assert_array_equal(x._data, x0)
    np.testing.assert_array_equal(gy._data, kept)
    for a, b in zip(*refs):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(refs[1][1], 2 * refs[1][0], rtol=1e-6)


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
