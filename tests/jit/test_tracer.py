"""Tracer behaviour: dynamic shapes, nesting, cross-trace values, warnings, structures."""
import warnings

import numpy as np
import pytest

import ember
import ember.jit as jit


def test_shape_reads_become_size_nodes_and_follow_batch():
    def f(x):
        n = x.shape[0]
        return x.reshape(n * 2, -1) + x.shape[0] + x.size(1) // 2
    x = ember.randn(4, 6)
    t = jit.trace(f, (x,))
    kinds = [n.kind for n in t.graph.nodes]
    assert "size" in kinds
    assert "int(%" in str(t.graph)
    for b in (1, 3, 8):
        y = ember.randn(b, 6)
        np.testing.assert_allclose(t(y)._data, f(y)._data)


def test_len_is_frozen_with_a_warning():
    with pytest.warns(jit.TracerWarning, match="len"):
        t = jit.trace(lambda x: x * len(x), (ember.ones(4, 2),))
    assert (t(ember.ones(2, 2))._data == 4).all()


def test_shape_as_factory_size():
    def f(x):
        return x + ember.zeros(x.size(0), 1)
    t = jit.trace(f, (ember.randn(2, 3),))
    assert t(ember.randn(5, 3)).shape == (5, 3)


def test_nested_trace_records_into_both():
    inner_graphs = []

    def inner(a):
        return (a * 2).relu()

    def outer(x):
        ti = jit.trace(inner, (x + 1,))
        inner_graphs.append(ti.graph)
        return ti(x + 1) - 3
    x = ember.randn(3)
    t = jit.trace(outer, (x,))
    assert [n.kind for n in inner_graphs[0].nodes] == ["mul", "relu"]
    kinds = [n.kind for n in t.graph.nodes]
    assert "mul" in kinds and "relu" in kinds and "sub" in kinds
    y = ember.randn(3)
    np.testing.assert_allclose(t(y)._data, ((y + 1) * 2).relu()._data - 3)


def test_cross_trace_value_is_an_error():
    def outer(x):
        h = x * 2

        def inner(a):
            return a + h          # h belongs to the outer trace, not an input of the inner one
        jit.trace(inner, (x,), check_trace=False)
        return h
    with pytest.raises(jit.TracingError, match="cross traces|not one of its inputs"):
        jit.trace(outer, (ember.randn(3),))


def test_tracer_warning_names_user_line():
    def f(x):
        if x.sum() > 0:     # data-dependent control flow
            return x * 2
        return x
    with pytest.warns(jit.TracerWarning) as rec:
        jit.trace(f, (ember.ones(3),))
    w = rec[0]
    assert w.filename == __file__
    assert "x.sum() > 0" in str(w.message)
    for conv in (lambda x: float(x.sum()), lambda x: x.sum().item(), lambda x: len(x.tolist()),
                 lambda x: int(x.max())):
        with pytest.warns(jit.TracerWarning):
            jit.trace(lambda x, c=conv: x + c(x), (ember.ones(3),), check_trace=False)


def test_no_warning_for_clean_trace():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jit.trace(lambda x: x.relu() * x.shape[0], (ember.randn(3, 2),))


def test_check_trace_detects_frozen_python_value():
    def f(x):
        return x * float(x.sum())   # frozen constant
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jit.TracerWarning)
        t = jit.trace(f, (ember.ones(3),))  # check passes on the example itself
    y = ember.full((3,), 2.0)
    assert not np.allclose(t(y)._data, f(y)._data)


def test_structures_in_and_out():
    def f(d, pair):
        a, b = pair
        return {"sum": d["x"] + a, "list": [b * 2, d["y"]]}
    d = {"x": ember.randn(2), "y": ember.randn(2)}
    pair = (ember.randn(2), ember.randn(2))
    t = jit.trace(f, (d, pair))
    names = [v.name for v in t.graph.inputs]
    assert names == ["d.x", "d.y", "pair.0", "pair.1"]
    out = t(d, pair)
    ref = f(d, pair)
    assert set(out) == {"sum", "list"} and isinstance(out["list"], list)
    np.testing.assert_allclose(out["sum"]._data, ref["sum"]._data)
    np.testing.assert_allclose(out["list"][1]._data, ref["list"][1]._data)


def test_strict_rejects_python_outputs():
    with pytest.raises(jit.TracingError, match="non-tensor"):
        jit.trace(lambda x: (x, 3), (ember.randn(2),))
    t = jit.trace(lambda x: (x * 1.5, 3), (ember.randn(2),), strict=False)
    assert t(ember.ones(2))[1] == 3


def test_captured_tensors_param_or_constant():
    w = ember.randn(3, requires_grad=True)
    c = ember.randn(3)
    t = jit.trace(lambda x: x * w + c, (ember.randn(3),))
    roles = [v.role for v in t.graph.inputs]
    assert roles == ["input", "param"]
    assert t.graph.find_nodes("constant")
    x = ember.randn(3)
    t(x).sum().backward()
    np.testing.assert_allclose(w.grad._data, x._data)


def test_inplace_ops_recorded():
    buf = ember.zeros(3)

    def f(x):
        y = x * 2
        y.add_(1)
        buf.add_(y)          # a side effect on captured state
        return y
    t = jit.trace(f, (ember.ones(3),), check_trace=False)
    assert len(t.graph.find_nodes("copy_")) == 2
    buf._data[...] = 0
    with ember.no_grad():
        out = t(ember.ones(3))
    np.testing.assert_allclose(out._data, 3.0)


def test_custom_function_node():
    class Double(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2
    t = jit.trace(lambda x: Double.apply(x) + 1, (ember.randn(3),))
    assert [n.kind for n in t.graph.nodes] == ["python_function", "add"]
    x = ember.randn(3, requires_grad=True)
    t(x).sum().backward()
    np.testing.assert_allclose(x.grad._data, 2.0)


def test_tracer_is_thread_local_and_uninstalled():
    from ember.autograd.state import STATE
    jit.trace(lambda x: x + 1, (ember.randn(2),))
    assert STATE.tracer is None
    with pytest.raises(ZeroDivisionError):
        jit.trace(lambda x: 1 / 0, (ember.randn(2),))
    assert STATE.tracer is None


def test_a_tensor_passed_as_a_value_is_stored_as_its_array():
    # linalg.pinv(x, atol=<tensor>): the kernel reads atol's values in Python; the tensor was
    # stored in the node's attributes as is, and the graph could not be written or copied
    # ("cannot write constant tensor(1.) (Tensor) in the IR text")
    from ember.jit.ir import ArrayRef, parse
    x = ember.randn(3, 3, dtype=ember.float64)
    c = ember.tensor(0.5, dtype=ember.float64)
    traced = jit.trace(lambda x: ember.linalg.pinv(x, atol=c), (x,))
    node = traced.graph.find_nodes("linalg_pinv")[0]
    assert isinstance(node.attrs["atol"], ArrayRef)
    assert str(parse(str(traced.graph), constants=dict(traced.graph.constants))) == \
        str(traced.graph)
    y = ember.randn(3, 3, dtype=ember.float64)
    np.testing.assert_allclose(traced(y).numpy(), ember.linalg.pinv(y, atol=c).numpy(),
                               rtol=0, atol=1e-12)
    # a traced tensor there is a value read in Python: warned (frozen)
    with pytest.warns(jit.TracerWarning, match="a traced tensor passed as a value the op "
                      "reads in Python"):
        jit.trace(lambda x, a: ember.linalg.pinv(x, atol=a), (x, c), check_trace=False)
