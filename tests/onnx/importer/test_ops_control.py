"""The control-flow importers (ember/onnx/importer/ops_control.py) against ONNX's reference
evaluator: If choosing a branch that reads the outer scope, Loop with a trip count, a condition
and scan outputs, and Scan accumulating a state."""
import numpy as np
import pytest

from tests.onnx.importer.reference import TensorProto, helper, same_as_reference


def _vi(name, t=TensorProto.FLOAT, shape=None):
    return helper.make_tensor_value_info(name, t, shape)


@pytest.mark.parametrize("cond", [True, False])
def test_if_reads_the_outer_scope(cond):
    then = helper.make_graph([helper.make_node("Mul", ["x", "x"], ["z"])], "then", [], [_vi("z")])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["z"])], "else", [], [_vi("z")])
    same_as_reference([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
                      {"c": np.array(cond), "x": np.array([1.5, -2.0], np.float32)}, ["y"])


def test_loop_with_trip_count_condition_and_scan_output():
    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["i_f"], to=TensorProto.FLOAT),
         helper.make_node("Add", ["acc_in", "i_f"], ["acc_out"]),
         helper.make_node("Less", ["acc_out", "limit"], ["cond_out"]),
         helper.make_node("Identity", ["acc_out"], ["scan"])], "body",
        [_vi("i", TensorProto.INT64, []), _vi("cond_in", TensorProto.BOOL, []), _vi("acc_in")],
        [_vi("cond_out", TensorProto.BOOL), _vi("acc_out"), _vi("scan")])
    same_as_reference([helper.make_node("Loop", ["n", "c", "a0"], ["acc", "scans"], body=body)],
                      {"n": np.array(10, np.int64), "c": np.array(True),
                       "a0": np.array([0.5], np.float32), "limit": np.array([7.0], np.float32)},
                      ["acc", "scans"])


def test_scan_accumulates_a_state():
    body = helper.make_graph([helper.make_node("Add", ["s_in", "x"], ["s_out"]),
                              helper.make_node("Identity", ["s_out"], ["y"])], "body",
                             [_vi("s_in", shape=[2]), _vi("x", shape=[2])],
                             [_vi("s_out", shape=[2]), _vi("y", shape=[2])])
    same_as_reference([helper.make_node("Scan", ["s0", "xs"], ["s", "ys"], body=body,
                                        num_scan_inputs=1)],
                      {"s0": np.zeros(2, np.float32),
                       "xs": np.arange(8, dtype=np.float32).reshape(4, 2)}, ["s", "ys"])
