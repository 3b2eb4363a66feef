"""GraphContext (ember/onnx/context.py), what symbolic functions build ONNX nodes with: names,
nodes, cached constants, int lists holding traced sizes, and the opset-aware helpers; each graph
is run by ONNX's reference evaluator and checked against NumPy."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from ember.onnx.context import Dyn, GraphContext, SymbolicError  # noqa: E402
from ember.onnx.errors import OnnxExportError  # noqa: E402


def _run(g, inputs, outputs):
    """Run the nodes of ``g`` with ``inputs`` {name: array}; returns the ``outputs`` values."""
    vi = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
          for n, a in inputs.items()]
    outs = [helper.make_tensor_value_info(n, TensorProto.UNDEFINED, None) for n in outputs]
    inits = [onnx.numpy_helper.from_array(a, n) for n, a in g.initializers.items()]
    model = helper.make_model(helper.make_graph(g.nodes, "g", vi, outs, inits),
                              opset_imports=[helper.make_opsetid("", g.opset)])
    return ReferenceEvaluator(model).run(None, inputs)


def test_fresh_names_never_repeat_a_reserved_one():
    g = GraphContext(17, helper)
    g.reserve("t_2")
    names = [g.fresh() for _ in range(3)]
    assert names == ["t_1", "t_3", "t_4"]


def test_op_drops_trailing_absent_inputs_and_none_attributes():
    g = GraphContext(17, helper)
    out = g.op("Clip", "x", None, None, foo=None)
    node = g.nodes[-1]
    assert list(node.input) == ["x"] and not node.attribute and list(node.output) == [out]
    g.op("Clip", "x", None, "hi")
    assert list(g.nodes[-1].input) == ["x", "", "hi"]
    with pytest.raises(SymbolicError, match="Clip: input 3 is not an ONNX value name"):
        g.op("Clip", 3)


def test_constants_are_cached_by_value_and_python_floats_are_float32():
    g = GraphContext(17, helper)
    a = g.const(1.5)
    assert g.const(1.5) == a and g.dtype(a) == np.float32
    b = g.const(np.array(1.5))          # a float64 array keeps its dtype: another constant
    assert b != a and g.dtype(b) == np.float64
    c = g.const([1, 2], np.int64)
    assert g.shape(c) == (2,)
    assert [n.op_type for n in g.nodes] == ["Constant"] * 3


def test_ints_concatenates_static_runs_and_traced_sizes():
    g = GraphContext(17, helper)
    out = g.ints([2, Dyn("n"), 3, 4, Dyn("m")])
    got, = _run(g, {"n": np.array(5, np.int64), "m": np.array(7, np.int64)}, [out])
    np.testing.assert_array_equal(got, [2, 5, 3, 4, 7])
    g = GraphContext(17, helper)
    static = g.ints([1, 2])
    assert [n.op_type for n in g.nodes] == ["Constant"]
    np.testing.assert_array_equal(_run(g, {}, [static])[0], [1, 2])


def test_a_traced_size_used_as_an_int_is_an_export_error():
    with pytest.raises(OnnxExportError, match="traced"):
        int(Dyn("n"))
    with pytest.raises(SymbolicError, match="traced"):
        range(Dyn("n"))


def test_cast_is_skipped_when_the_dtype_already_matches():
    g = GraphContext(17, helper)
    g.set_type("x", np.float32, (2,))
    assert g.cast("x", np.float32) == "x" and not g.nodes
    y = g.cast("x", np.int64)
    assert g.dtype(y) == np.int64 and g.shape(y) == (2,)
    got, = _run(g, {"x": np.array([1.0, -2.0], np.float32)}, [y])
    assert got.dtype == np.int64 and list(got) == [1, -2]


@pytest.mark.parametrize("opset,as_input", [(13, False), (17, False), (18, True)])
def test_reduce_passes_axes_as_an_input_from_opset_18(opset, as_input):
    g = GraphContext(opset, helper)
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    out = g.reduce("ReduceMax", "x", axes=[0, 2], keepdims=True)
    node = g.nodes[-1]
    assert (len(node.input) == 2) == as_input
    assert ("axes" in {a.name for a in node.attribute}) == (not as_input)
    np.testing.assert_array_equal(_run(g, {"x": x}, [out])[0], x.max(axis=(0, 2), keepdims=True))
    g = GraphContext(opset, helper)
    s = g.reduce("ReduceSum", "x", axes=[1])         # ReduceSum: axes an input from opset 13
    assert len(g.nodes[-1].input) == 2
    np.testing.assert_array_equal(_run(g, {"x": x}, [s])[0], x.sum(axis=1))


def test_shape_helpers_match_numpy():
    g = GraphContext(17, helper)
    x = np.zeros((2, 3, 5, 7), np.float32)
    full, tail, mid, d = (g.shape_of("x"), g.shape_of("x", start=2), g.shape_of("x", 1, 3),
                          g.dim("x", 2))
    u = g.unsqueeze("x", [0, 5])
    s = g.squeeze(u, [0])
    got = _run(g, {"x": x}, [full, tail, mid, d, u, s])
    assert [list(v) for v in got[:3]] == [[2, 3, 5, 7], [5, 7], [3, 5]]
    assert got[3].shape == () and int(got[3]) == 5
    assert got[4].shape == (1, 2, 3, 5, 7, 1) and got[5].shape == (2, 3, 5, 7, 1)


def test_scalar_and_initializer():
    g = GraphContext(17, helper)
    g.set_type("n", np.int64, ())
    a = g.scalar(2, np.float64)
    b = g.scalar(Dyn("n"), np.float32)
    w = g.initializer(np.arange(3, dtype=np.float32), name="w")
    assert w == "w" and "w" in g.used and g.shape("w") == (3,)
    got = _run(g, {"n": np.array(4, np.int64)}, [a, b, w])
    assert got[0].dtype == np.float64 and float(got[0]) == 2.0
    assert got[1].dtype == np.float32 and float(got[1]) == 4.0
    np.testing.assert_array_equal(got[2], [0, 1, 2])
