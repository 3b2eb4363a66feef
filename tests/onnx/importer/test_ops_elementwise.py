"""The elementwise importers (ember/onnx/importer/ops_elementwise.py) against ONNX's reference
evaluator: arithmetic with broadcasting, Mod in both modes, comparisons, logical and bitwise ops,
IsNaN/IsInf, Where, Cast/CastLike, Clip in both opset forms and the activations."""
import numpy as np
import pytest

from tests.onnx.importer.reference import helper, same_as_reference

RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4)).astype(np.float32)
B = RNG.standard_normal((4,)).astype(np.float32) + 2.0
I = RNG.integers(-20, 20, (3, 4)).astype(np.int64)
J = RNG.integers(1, 7, (4,)).astype(np.int64)


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mean", "Sum"])
def test_binary_float_ops_broadcast(op):
    x = np.abs(A) + 0.1 if op == "Pow" else A
    same_as_reference([helper.make_node(op, ["a", "b"], ["y"])], {"a": x, "b": B}, ["y"])


@pytest.mark.parametrize("fmod", [0, 1])
def test_mod_integer_and_float(fmod):
    same_as_reference([helper.make_node("Mod", ["a", "b"], ["y"], fmod=fmod)],
                      {"a": I if not fmod else A * 10, "b": J if not fmod else B}, ["y"])


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
def test_comparisons(op):
    same_as_reference([helper.make_node(op, ["a", "b"], ["y"])], {"a": I, "b": J}, ["y"])


def test_logical_bitwise_and_shifts():
    p, q = I > 0, I % 3 == 0
    same_as_reference([helper.make_node("And", ["p", "q"], ["y0"]),
                       helper.make_node("Or", ["p", "q"], ["y1"]),
                       helper.make_node("Xor", ["p", "q"], ["y2"]),
                       helper.make_node("Not", ["p"], ["y3"])], {"p": p, "q": q},
                      ["y0", "y1", "y2", "y3"])
    u = RNG.integers(0, 200, (3, 4)).astype(np.uint8)
    s = np.array([1, 2, 3, 0], np.uint8)
    same_as_reference([helper.make_node("BitShift", ["u", "s"], ["l"], direction="LEFT"),
                       helper.make_node("BitShift", ["u", "s"], ["r"], direction="RIGHT"),
                       helper.make_node("BitwiseNot", ["u"], ["n"]),
                       helper.make_node("BitwiseAnd", ["u", "s"], ["a"])], {"u": u, "s": s},
                      ["l", "r", "n", "a"])


def test_isnan_isinf_where_and_casts():
    x = np.array([1.0, np.nan, np.inf, -np.inf, 0.0], np.float32)
    same_as_reference([helper.make_node("IsNaN", ["x"], ["n"]),
                       helper.make_node("IsInf", ["x"], ["i"], detect_negative=0),
                       helper.make_node("Where", ["n", "x", "z"], ["w"]),
                       helper.make_node("Cast", ["x"], ["c"], to=helper.np_dtype_to_tensor_dtype(
                           np.dtype(np.float64))),
                       helper.make_node("CastLike", ["c", "k"], ["cl"])],
                      {"x": x, "z": np.zeros(5, np.float32), "k": np.zeros(1, np.float16)},
                      ["n", "i", "w", "c", "cl"])


def test_clip_as_inputs_and_as_attributes():
    same_as_reference([helper.make_node("Clip", ["a", "lo", "hi"], ["y"])],
                      {"a": A, "lo": np.float32(-0.5), "hi": np.float32(0.7)}, ["y"])
    same_as_reference([helper.make_node("Clip", ["a"], ["y"], min=-0.5, max=0.7)], {"a": A},
                      ["y"], opset=6)


@pytest.mark.parametrize("op,attrs", [("Relu", {}), ("LeakyRelu", {"alpha": 0.2}),
                                      ("Elu", {"alpha": 0.7}), ("Celu", {"alpha": 1.3}),
                                      ("Selu", {}), ("Sigmoid", {}), ("Tanh", {}),
                                      ("HardSigmoid", {"alpha": 0.3}), ("Softplus", {}),
                                      ("Softsign", {}), ("Exp", {}), ("Abs", {}), ("Neg", {}),
                                      ("Sign", {}), ("Floor", {}), ("Ceil", {}), ("Erf", {})])
def test_unary_ops(op, attrs):
    same_as_reference([helper.make_node(op, ["a"], ["y"], **attrs)], {"a": A}, ["y"],
                      rtol=1e-5, atol=1e-6)
