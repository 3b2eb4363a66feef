"""The quantization importers (ember/onnx/importer/ops_quant.py) against ONNX's reference
evaluator: QuantizeLinear / DequantizeLinear per tensor and per axis, DynamicQuantizeLinear,
MatMulInteger, QLinearMatMul, ConvInteger and QLinearConv."""
import numpy as np

from tests.onnx.importer.reference import helper, same_as_reference

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 3, 4)).astype(np.float32) * 3


def test_quantize_dequantize_per_tensor_and_per_axis():
    same_as_reference([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
                       helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"])],
                      {"x": X, "s": np.float32(0.05), "z": np.uint8(128)}, ["q", "d"])
    same_as_reference([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1),
                       helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"], axis=1)],
                      {"x": X, "s": np.array([0.02, 0.05, 0.1], np.float32),
                       "z": np.array([-3, 0, 7], np.int8)}, ["q", "d"])


def test_dynamic_quantize_linear():
    same_as_reference([helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"])],
                      {"x": X.reshape(6, 4)}, ["q", "s", "z"])


def test_integer_matmuls():
    a = RNG.integers(0, 255, (3, 4)).astype(np.uint8)
    b = RNG.integers(0, 255, (4, 2)).astype(np.uint8)
    same_as_reference([helper.make_node("MatMulInteger", ["a", "b", "za", "zb"], ["y"])],
                      {"a": a, "b": b, "za": np.uint8(12), "zb": np.uint8(130)}, ["y"])
    same_as_reference([helper.make_node("QLinearMatMul", ["a", "sa", "za", "b", "sb", "zb",
                                                          "sy", "zy"], ["y"])],
                      {"a": a, "sa": np.float32(0.02), "za": np.uint8(12), "b": b,
                       "sb": np.float32(0.01), "zb": np.uint8(130), "sy": np.float32(0.05),
                       "zy": np.uint8(100)}, ["y"])


def test_integer_convolutions():
    x = RNG.integers(0, 255, (1, 2, 5, 5)).astype(np.uint8)
    w = RNG.integers(0, 255, (3, 2, 3, 3)).astype(np.uint8)
    same_as_reference([helper.make_node("ConvInteger", ["x", "w", "zx", "zw"], ["y"],
                                        pads=[1, 1, 1, 1])],
                      {"x": x, "w": w, "zx": np.uint8(100), "zw": np.uint8(120)}, ["y"])
    same_as_reference([helper.make_node("QLinearConv", ["x", "sx", "zx", "w", "sw", "zw", "sy",
                                                        "zy"], ["y"], strides=[2, 2])],
                      {"x": x, "sx": np.float32(0.02), "zx": np.uint8(100), "w": w,
                       "sw": np.float32(0.01), "zw": np.uint8(120), "sy": np.float32(0.3),
                       "zy": np.uint8(90)}, ["y"])
