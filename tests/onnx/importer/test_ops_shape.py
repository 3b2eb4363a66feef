"""The shape importers (ember/onnx/importer/ops_shape.py) against ONNX's reference evaluator:
Reshape (with 0 and -1, allowzero), Flatten, Transpose, Concat, Squeeze/Unsqueeze in both opset
forms, Gather/GatherElements/GatherND, Shape with start/end, Size, ConstantOfShape, Expand,
Slice with negative steps, Pad modes, Split, Tile, Range."""
import numpy as np
import pytest

from tests.onnx.importer.reference import helper, onnx, same_as_reference

X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


def _i(*v):
    return np.array(v, np.int64)


@pytest.mark.parametrize("shape", [(0, -1), (4, 0, -1), (-1,), (6, 4)])
def test_reshape(shape):
    same_as_reference([helper.make_node("Reshape", ["x", "s"], ["y"])], {"x": X, "s": _i(*shape)},
                      ["y"])


def test_flatten_transpose_concat():
    same_as_reference([helper.make_node("Flatten", ["x"], ["f"], axis=2),
                       helper.make_node("Transpose", ["x"], ["t"], perm=[2, 0, 1]),
                       helper.make_node("Concat", ["x", "x"], ["c"], axis=-2)], {"x": X},
                      ["f", "t", "c"])


def test_squeeze_unsqueeze_both_forms():
    x = X.reshape(2, 1, 3, 4)
    same_as_reference([helper.make_node("Squeeze", ["x", "a"], ["s"]),
                       helper.make_node("Unsqueeze", ["s", "b"], ["u"])],
                      {"x": x, "a": _i(1), "b": _i(0, -1)}, ["s", "u"])
    same_as_reference([helper.make_node("Squeeze", ["x"], ["s"], axes=[1]),
                       helper.make_node("Unsqueeze", ["s"], ["u"], axes=[0, 4])], {"x": x},
                      ["s", "u"], opset=11)


def test_gathers():
    same_as_reference([helper.make_node("Gather", ["x", "i"], ["g"], axis=1),
                       helper.make_node("GatherElements", ["x", "e"], ["ge"], axis=2),
                       helper.make_node("GatherND", ["x", "n"], ["gn"], batch_dims=1)],
                      {"x": X, "i": _i(2, -1, 0), "e": np.zeros((2, 3, 2), np.int64) + _i(3, 1),
                       "n": np.array([[1, 2], [0, 3]], np.int64)}, ["g", "ge", "gn"])


def test_shape_size_constant_of_shape_expand():
    value = onnx.numpy_helper.from_array(np.array([2.5], np.float32))
    same_as_reference([helper.make_node("Shape", ["x"], ["s"], start=1, end=-1),
                       helper.make_node("Size", ["x"], ["n"]),
                       helper.make_node("ConstantOfShape", ["s"], ["c"], value=value),
                       helper.make_node("Expand", ["x", "e"], ["x2"])],
                      {"x": X, "e": _i(3, 1, 1, 4)}, ["s", "n", "c", "x2"])


def test_slice_with_negative_steps_and_axes():
    same_as_reference([helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["y"])],
                      {"x": X, "st": _i(-1, 0), "en": _i(-100, 4), "ax": _i(2, 1),
                       "sp": _i(-2, 2)}, ["y"])


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_modes(mode):
    same_as_reference([helper.make_node("Pad", ["x", "p", "v"], ["y"], mode=mode)],
                      {"x": X, "p": _i(0, 1, 2, 0, 1, 1), "v": np.float32(1.5)}, ["y"])


def test_split_tile_range():
    same_as_reference([helper.make_node("Split", ["x", "s"], ["a", "b"], axis=2),
                       helper.make_node("Tile", ["x", "r"], ["t"]),
                       helper.make_node("Range", ["lo", "hi", "d"], ["rg"])],
                      {"x": X, "s": _i(1, 3), "r": _i(1, 2, 1), "lo": np.float32(1.0),
                       "hi": np.float32(-2.0), "d": np.float32(-0.75)}, ["a", "b", "t", "rg"])
