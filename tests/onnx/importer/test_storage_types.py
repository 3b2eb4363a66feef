"""ONNX element types ember computes in a wider dtype (ember.onnx.importer.storage_types):
results match ONNX's reference evaluator where the narrow type wraps or rounds, which the node
tests do not reach; what cannot be held is a clear error."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ml_dtypes = pytest.importorskip("ml_dtypes")

from onnx import TensorProto as TP  # noqa: E402
from onnx import helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import ember  # noqa: E402
from ember.errors import EmberRuntimeError  # noqa: E402
from ember.onnx import backend  # noqa: E402
from ember.onnx.importer import UnsupportedOnnxError, load_model  # noqa: E402


def _model(nodes, inputs, outputs, opset=21):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, None)
                                       for n, t in inputs],
                          [helper.make_tensor_value_info(n, t, None) for n, t in outputs])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _same_as_reference(model, feeds):
    got = backend.prepare(model).run(feeds)
    want = ReferenceEvaluator(model).run(
        None, {i.name: v for i, v in zip(model.graph.input, feeds)})
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g.astype(np.float64) if g.dtype.kind == "V" else g,
                                      w.astype(np.float64) if w.dtype.kind == "V" else w)
    return got


def test_uint32_arithmetic_wraps_modulo_2_32():
    m = _model([helper.make_node("Sub", ["x", "y"], ["d"]),
                helper.make_node("Mul", ["d", "y"], ["p"]),
                helper.make_node("Add", ["p", "x"], ["z"])],
               [("x", TP.UINT32), ("y", TP.UINT32)], [("z", TP.UINT32), ("d", TP.UINT32)])
    x = np.array([1, 5, 4000000000], dtype=np.uint32)
    y = np.array([3, 2, 3000000000], dtype=np.uint32)
    with np.errstate(over="ignore"):
        z, d = _same_as_reference(m, [x, y])
    assert d[0] == 2 ** 32 - 2 and z.dtype == np.uint32


def test_uint16_bitwise_not_wraps():
    m = _model([helper.make_node("BitwiseNot", ["x"], ["y"])], [("x", TP.UINT16)],
               [("y", TP.UINT16)], opset=18)
    (y,) = _same_as_reference(m, [np.array([0, 1, 65535], dtype=np.uint16)])
    assert y.tolist() == [65535, 65534, 0]


def test_uint64_beyond_int64_is_an_error_naming_the_value():
    m = _model([helper.make_node("Sub", ["x", "y"], ["z"])],
               [("x", TP.UINT64), ("y", TP.UINT64)], [("z", TP.UINT64)])
    rep = backend.prepare(m)
    small = np.array([1, 2], dtype=np.uint64)
    assert rep.run([small + 5, small])[0].tolist() == [5, 5]
    with pytest.raises(EmberRuntimeError, match="input 'x'.*2\\*\\*63"):
        rep.run([np.array([2 ** 63, 0], dtype=np.uint64), small])
    with pytest.raises(EmberRuntimeError, match="node .*output 'z'"):   # 1 - 2 < 0
        rep.run([small, small + 1])


def test_bfloat16_rounds_at_every_node():
    m = _model([helper.make_node("Add", ["x", "y"], ["s"]),
                helper.make_node("Sub", ["s", "x"], ["z"])],
               [("x", TP.BFLOAT16), ("y", TP.BFLOAT16)], [("z", TP.BFLOAT16)])
    x = np.array([1.0, 256.0], dtype=ml_dtypes.bfloat16)
    y = np.array([2.0 ** -9, 1.0], dtype=ml_dtypes.bfloat16)
    (z,) = _same_as_reference(m, [x, y])
    assert z.astype(np.float32).tolist() == [0.0, 0.0]   # float32 would keep 2**-9 and 1


@pytest.mark.parametrize("saturate", [1, 0])
def test_float8_cast_saturates_only_when_asked(saturate):
    m = _model([helper.make_node("Cast", ["x"], ["y"], to=TP.FLOAT8E4M3FN, saturate=saturate),
                helper.make_node("Cast", ["y"], ["z"], to=TP.FLOAT)],
               [("x", TP.FLOAT)], [("z", TP.FLOAT), ("y", TP.FLOAT8E4M3FN)])
    z, y = _same_as_reference(m, [np.array([1000.0, -0.3, 17.0], dtype=np.float32)])
    assert y.dtype == ml_dtypes.float8_e4m3fn
    assert (z[0] == 448.0) if saturate else np.isnan(z[0])


def test_int4_cast_and_quantize_match_the_reference():
    m = _model([helper.make_node("Cast", ["x"], ["c"], to=TP.INT4),
                helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"]),
                helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["d"])],
               [("x", TP.FLOAT), ("s", TP.FLOAT), ("zp", TP.INT4)],
               [("c", TP.INT4), ("q", TP.INT4), ("d", TP.FLOAT)])
    x = np.array([-7.6, -3.4, 0.5, 6.6, 2.5], dtype=np.float32)   # quantized: saturates
    _same_as_reference(m, [x, np.array(0.5, np.float32), np.array(1, ml_dtypes.int4)])


def test_bitcast_reads_the_declared_bits():
    m = _model([helper.make_node("BitCast", ["x"], ["y"], to=TP.FLOAT)],
               [("x", TP.UINT32)], [("y", TP.FLOAT)], opset=26)
    (y,) = backend.prepare(m).run([np.array([0x3F800000, 0xBF000000], dtype=np.uint32)])
    assert y.tolist() == [1.0, -0.5]


def test_bfloat16_rounding_passes_gradients_straight_through():
    m = _model([helper.make_node("Cast", ["x"], ["b"], to=TP.BFLOAT16),
                helper.make_node("Mul", ["b", "b"], ["y"])],
               [("x", TP.FLOAT)], [("y", TP.BFLOAT16)])
    x = ember.tensor(np.array([1.00390625, 3.0], dtype=np.float32), requires_grad=True)
    y = load_model(m)(x)
    y.sum().backward()
    b = np.array([1.0, 3.0])   # 1 + 2**-8 rounds to 1 in bfloat16
    np.testing.assert_allclose(x.grad.numpy(), 2 * b)


def test_a_string_tensor_into_a_numeric_op_is_refused_at_load():
    m = _model([helper.make_node("Identity", ["x"], ["y"])], [("x", TP.STRING)],
               [("y", TP.STRING)])
    with pytest.raises(UnsupportedOnnxError, match="Identity.*STRING tensor 'x'.*StringConcat"):
        load_model(m)
