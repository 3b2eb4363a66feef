"""The sequence and optional importers (ember/onnx/importer/ops_sequence.py) against ONNX's
reference evaluator: construct, insert, at, erase, length, SplitToSequence and
ConcatFromSequence (with a new axis), and Optional's has/get element."""
import numpy as np

from tests.onnx.importer.reference import helper, model, run_both, same_as_reference

A = np.arange(6, dtype=np.float32).reshape(2, 3)
B = A + 10


def test_construct_insert_at_erase_length():
    same_as_reference([helper.make_node("SequenceConstruct", ["a", "b"], ["s"]),
                       helper.make_node("SequenceInsert", ["s", "a", "p"], ["s2"]),
                       helper.make_node("SequenceErase", ["s2", "q"], ["s3"]),
                       helper.make_node("SequenceAt", ["s3", "q"], ["last"]),
                       helper.make_node("SequenceLength", ["s3"], ["n"])],
                      {"a": A, "b": B, "p": np.array(1, np.int64), "q": np.array(-1, np.int64)},
                      ["last", "n"])


def test_split_to_sequence_and_concat_back():
    same_as_reference([helper.make_node("SplitToSequence", ["a", "sp"], ["s"], axis=1),
                       helper.make_node("ConcatFromSequence", ["s"], ["c"], axis=1),
                       helper.make_node("SplitToSequence", ["a"], ["t"], axis=0, keepdims=0),
                       helper.make_node("ConcatFromSequence", ["t"], ["d"], axis=0, new_axis=1)],
                      {"a": A, "sp": np.array([1, 2], np.int64)}, ["c", "d"])


def test_optional_has_and_get_element():
    nodes = [helper.make_node("Optional", ["a"], ["o"]),
             helper.make_node("OptionalHasElement", ["o"], ["has"]),
             helper.make_node("OptionalGetElement", ["o"], ["v"])]
    same_as_reference(nodes[:2], {"a": A}, ["has"])
    # the element is the tensor itself (the spec; the reference evaluator adds an axis here)
    (has, v), _ = run_both(model(nodes, {"a": A}, ["has", "v"]), {"a": A})
    assert bool(has) and np.array_equal(v, A) and v.dtype == A.dtype
