"""ONNX export of pointwise ops through the one table (ember/onnx/pointwise.py): every spec op
with a ``pointwise:`` entry exports (native ONNX op or its formula on ONNX values) and matches
ember in onnxruntime, on float32 values that are negative, zero, tiny and large."""
import inspect
import io

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import ember  # noqa: E402
import ember.onnx  # noqa: E402
from ember.autograd._generated import functions as G  # noqa: E402
from ember.autograd._generated.records import OPS as RECORDS  # noqa: E402
from ember.kernels.pointwise.ops import OPS as VOCABULARY_OPS  # noqa: E402
from ember.onnx import pointwise as P  # noqa: E402

SPEC_POINTWISE = sorted(P.pointwise_ops())
VALUES = np.array([-1e4, -50.0, -20.5, -3.5, -1.0, -0.5, -1e-3, -0.0, 0.0, 1e-3, 0.5, 1.0, 2.5,
                   3.0, 20.5, 50.0, 1e4, 7.0], np.float32).reshape(3, 6)
# constants an op needs that have no default in its signature
CONSTS = {"to": {"dtype": np.dtype(np.float64)}}
# ops whose reference onnxruntime computes with looser accuracy on these values (the tolerance)
TOL = {"tan": 2e-3}


def _inputs(op):
    rec = RECORDS[op]
    xs = []
    for i, name in enumerate(rec.tensor_names):
        if op == "where" and name == "condition":
            xs.append(ember.from_numpy(VALUES > 0))
        elif op in ("lerp",) and name == "weight":
            xs.append(ember.from_numpy(np.linspace(-1.5, 1.5, VALUES.size, dtype=np.float32)
                                       .reshape(VALUES.shape)))
        else:
            xs.append(ember.from_numpy(np.roll(VALUES, 5 * i).copy()))
    return xs


def _run(fn, xs, opset):
    buf = io.BytesIO()
    mp = ember.onnx.export(fn, tuple(xs), buf, opset_version=opset)
    onnx.checker.check_model(mp, full_check=True)
    sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    return mp, sess.run(None, {n: x.numpy() for n, x in zip(names, xs)})


@pytest.mark.parametrize("opset", [13, 20])
@pytest.mark.parametrize("op", SPEC_POINTWISE)
def test_every_pointwise_spec_op_exports_and_matches(op, opset):
    xs = _inputs(op)
    consts = CONSTS.get(op, {})

    def fn(*ts):
        return getattr(G, op)(*ts, **consts)

    expected = fn(*xs).numpy()
    mp, (got,) = _run(fn, xs, opset)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    if expected.dtype.kind == "f":
        tol = TOL.get(op, 1e-4)
        np.testing.assert_allclose(got, expected, rtol=tol, atol=1e-5, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("op,native,attrs", [
    ("leaky_relu", "LeakyRelu", {"alpha": 0.2}), ("elu", "Elu", {"alpha": 0.5}),
    ("selu", "Selu", {}), ("relu", "Relu", {}), ("sigmoid", "Sigmoid", {}),
])
def test_table_exports_the_native_op_with_its_attributes(op, native, attrs):
    consts = {"leaky_relu": {"negative_slope": 0.2}, "elu": {"alpha": 0.5}}.get(op, {})
    x = ember.from_numpy(VALUES.copy())
    mp, (got,) = _run(lambda t: getattr(G, op)(t, **consts), [x], 17)
    nodes = [n for n in mp.graph.node if n.op_type == native]
    assert len(nodes) == 1
    got_attrs = {a.name: onnx.helper.get_attribute_value(a) for a in nodes[0].attribute}
    for k, v in attrs.items():
        assert got_attrs[k] == pytest.approx(v)
    np.testing.assert_allclose(got, getattr(G, op)(x, **consts).numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("opset,native", [(17, False), (20, True)])
def test_gelu_is_native_from_opset_20_and_its_formula_before(opset, native):
    x = ember.from_numpy(VALUES.copy())
    for approximate in ("none", "tanh"):
        mp, (got,) = _run(lambda t: G.gelu(t, approximate=approximate), [x], opset)
        kinds = {n.op_type for n in mp.graph.node}
        assert ("Gelu" in kinds) == native
        np.testing.assert_allclose(got, G.gelu(x, approximate=approximate).numpy(), rtol=1e-5, atol=1e-6)


def test_float16_and_int_inputs_follow_engine_typing():
    h = ember.from_numpy(VALUES.astype(np.float16))
    i = ember.from_numpy(np.arange(-6, 12, dtype=np.int64).reshape(3, 6))

    def fn(a, b):
        return (G.sigmoid(a), G.div(b, 4), G.relu(b), G.add(a, b), G.floor_divide(b, 4),
                G.remainder(b, -4), G.maximum(a, b))
    _, got = _run(fn, [h, i], 17)
    for g_, e in zip(got, fn(h, i)):
        e = e.numpy()
        assert g_.dtype == e.dtype
        np.testing.assert_allclose(g_.astype(np.float64), e.astype(np.float64), rtol=1e-3, atol=1e-3)


def test_every_vocabulary_op_has_an_onnx_row():
    """A row of the table, or the op's ``math`` on ONNX values (a row the table does not list)."""
    assert set(P.VOCABULARY) <= set(VOCABULARY_OPS)
    derived = {n for n, op in VOCABULARY_OPS.items() if n not in P.VOCABULARY}
    assert "hardshrink" in derived and all(VOCABULARY_OPS[n].math is not None for n in derived)


MATH_ROWS = sorted(n for n, op in VOCABULARY_OPS.items() if op.math is not None and n in RECORDS)


@pytest.mark.parametrize("op", MATH_ROWS)
def test_a_math_row_exports_by_its_math_without_a_table_entry(monkeypatch, op):
    """Every engine row written as ``math``, its table entry removed, exports as its ``math``
    on ONNX values (``_from_math``) and matches ember in onnxruntime."""
    monkeypatch.delitem(P.VOCABULARY, op, raising=False)
    xs = _inputs(op)
    expected = getattr(G, op)(*xs).numpy()
    _, (got,) = _run(lambda *ts: getattr(G, op)(*ts), xs, 17)
    assert got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5, equal_nan=True)


def test_hardshrink_exports_by_its_math_in_float64_with_nan_and_its_bounds():
    x = ember.tensor([-0.5, 0.5, -0.7, 0.7, 0.3, float("nan"), float("inf"), -float("inf"), 1.25],
                     dtype=ember.float64)
    mp, (got,) = _run(lambda t: ember.hardshrink(t, 0.7), [x], 17)
    assert {n.op_type for n in mp.graph.node} <= {"Where", "GreaterOrEqual", "LessOrEqual", "And",
                                                  "Constant", "Cast", "Identity"}
    np.testing.assert_array_equal(got, [0.0, 0.0, 0.0, 0.0, 0.0, np.nan, np.inf, -np.inf, 1.25])


def test_a_step_without_a_row_is_an_error_naming_the_op(monkeypatch):
    monkeypatch.delitem(P.VOCABULARY, "erf")
    x = ember.from_numpy(VALUES.copy())
    with pytest.raises(ember.onnx.OnnxExportError, match=r"'erfc'|'erf'") as e:
        ember.onnx.export(lambda t: G.erf(t), (x,), io.BytesIO(), opset_version=17)
    assert "engine op 'erf'" in str(e.value)


def test_no_hand_written_symbolic_for_a_table_op():
    """Every pointwise spec op's symbolic is the table's; no module of symbolics/ registers
    one by hand for them (or for a NATIVE op)."""
    from ember.onnx import registry
    registry._load()
    covered = set(P.pointwise_ops()) | set(P.NATIVE)
    for name in covered:
        for since, fn in registry._REGISTRY[name]:
            assert fn.__module__ == "ember.onnx.symbolics.pointwise", (name, fn)
            assert fn.__name__ in (f"sym_{name}", f"sym_{P.NATIVE.get(name, ('',))[0].lower()}")
    src = inspect.getsource(__import__("ember.onnx.symbolics.pointwise", fromlist=["x"]))
    for name in covered:
        assert f'@symbolic("{name}"' not in src and f'symbolic("{name}")' not in src


def test_clamp_constant_bounds_are_clip_and_tensor_bounds_keep_nan():
    x = ember.from_numpy(VALUES.copy())
    lo = ember.from_numpy(np.where(VALUES > 10, np.nan, -2.0).astype(np.float32))
    mp, got = _run(lambda t, b: (G.clamp(t, -1.0, 2.0), G.clamp(t, b)), [x, lo], 17)
    assert "Clip" in {n.op_type for n in mp.graph.node}
    for g_, e in zip(got, (G.clamp(x, -1.0, 2.0), G.clamp(x, lo))):
        np.testing.assert_allclose(g_, e.numpy(), rtol=1e-6, atol=0, equal_nan=True)


def test_traced_size_operand_follows_the_batch():
    def f(x):
        return x / x.shape[0] + x * x.shape[0]
    buf = io.BytesIO()
    ember.onnx.export(f, (ember.randn(4, 3),), buf, input_names=["x"], dynamic_axes={"x": [0]})
    sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    for n in (4, 7):
        xn = ember.randn(n, 3)
        (got,) = sess.run(None, {"x": xn.numpy()})
        np.testing.assert_allclose(got, f(xn).numpy(), rtol=1e-6, atol=1e-6)


def test_a_form_typed_once_is_replayed_with_the_same_graph_and_no_new_plan():
    x = ember.from_numpy(VALUES.copy())

    def fn(t):
        return G.relu(G.add(G.relu(t), G.mul(t, 0.5)))

    first = ember.onnx.build_model(fn, (x,)).SerializeToString()
    plans = len(P._PLANS)
    second = ember.onnx.build_model(fn, (x,)).SerializeToString()
    assert second == first
    assert len(P._PLANS) == plans


@pytest.mark.parametrize("a,b", [(1, 1.0), (True, 1), (0.0, -0.0)])
def test_constants_equal_in_python_keep_their_own_typing_and_value(a, b):
    """1 == 1.0 == True and 0.0 == -0.0 in Python: the replayed forms must not mix them up."""
    i = ember.from_numpy(np.arange(-6, 12, dtype=np.int64).reshape(3, 6))
    f = ember.from_numpy(VALUES.copy())
    for c in (a, b, a):
        def fn(ti, tf):
            return G.add(ti, c), G.div(tf, c)
        _, got = _run(fn, [i, f], 17)
        for g_, e in zip(got, fn(i, f)):
            e = e.numpy()
            assert g_.dtype == e.dtype
            np.testing.assert_array_equal(g_, e)
