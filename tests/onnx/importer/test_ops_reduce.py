"""The reduction importers (ember/onnx/importer/ops_reduce.py) against ONNX's reference evaluator:
every Reduce* op with axes as an attribute (opset 13) and as an input (opset 18), keepdims, empty
axes with noop_with_empty_axes, and ArgMax/ArgMin."""
import numpy as np
import pytest

from tests.onnx.importer.reference import helper, same_as_reference

X = np.random.default_rng(0).uniform(0.1, 2.0, (3, 4, 5)).astype(np.float32)
OPS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
       "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("keepdims", [0, 1])
def test_axes_as_input(op, keepdims):
    same_as_reference([helper.make_node(op, ["x", "axes"], ["y"], keepdims=keepdims)],
                      {"x": X, "axes": np.array([0, -1], np.int64)}, ["y"], opset=18,
                      rtol=1e-5)


@pytest.mark.parametrize("op", [o for o in OPS if o != "ReduceSum"])
def test_axes_as_attribute_before_opset_18(op):
    same_as_reference([helper.make_node(op, ["x"], ["y"], axes=[1], keepdims=1)], {"x": X},
                      ["y"], opset=13, rtol=1e-5)


@pytest.mark.parametrize("noop", [0, 1])
def test_empty_axes(noop):
    same_as_reference([helper.make_node("ReduceMean", ["x", "axes"], ["y"],
                                        noop_with_empty_axes=noop)],
                      {"x": X, "axes": np.array([], np.int64)}, ["y"], opset=18)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("last", [0, 1])
def test_argmax_argmin(op, last):
    x = np.array([[1, 3, 3, 0], [2, 2, 1, 2]], np.float32)
    same_as_reference([helper.make_node(op, ["x"], ["y"], axis=1, keepdims=0,
                                        select_last_index=last)], {"x": x}, ["y"])
