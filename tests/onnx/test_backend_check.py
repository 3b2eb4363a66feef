"""The backend-test runner shared by tests/onnx/test_backend.py and ``ember onnx check-backend``
(ember/onnx/backend_check.py): the comparison, one case's status, the grouping of failures and
refusals by reason, and the summary."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402

from ember.onnx.backend_check import reason, run_case  # noqa: E402
from ember.onnx.importer import UnsupportedOnnxError  # noqa: E402


class _Case:
    """What run_case reads of an onnx backend TestCase."""

    def __init__(self, model, data_sets, rtol=1e-3, atol=1e-7):
        self.model, self.data_sets, self.rtol, self.atol = model, data_sets, rtol, atol


def _add_model(op="Add"):
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in ("a", "b", "y")]
    g = helper.make_graph([helper.make_node(op, ["a", "b"], ["y"])], "g", vi[:2], vi[2:])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_run_case_passes_fails_and_refuses():
    a, b = np.float32([1, 2]), np.float32([3, 5])
    assert run_case(_Case(_add_model(), [([a, b], [a + b])])) == ("pass", None)
    status, msg = run_case(_Case(_add_model(), [([a, b], [a - b])]))
    assert status == "fail" and msg.startswith("AssertionError")
    status, msg = run_case(_Case(_add_model(), [([a, b], [a + b, a])]))
    assert status == "fail" and "1 outputs, expected 2" in msg
    status, msg = run_case(_Case(_add_model("NoSuchOp"), [([a, b], [a + b])]))
    assert status == "unsupported" and msg.startswith("NoSuchOp: no importer for this op")


def test_reason_groups_errors_of_one_kind():
    exc = UnsupportedOnnxError([("Foo", 17, "n0", None, "no importer for this op")])
    assert reason(exc) == "op Foo: no importer for this op"
    exc = UnsupportedOnnxError([("Conv", 17, "n0", "auto_pad", "is not supported")])
    assert reason(exc) == "op Conv: attribute 'auto_pad' is not supported"
    # sizes and values vary per case: one key for all of them
    assert reason(ValueError("shape (2, 3, 4) vs 5")) == reason(ValueError("shape (7, 1) vs 9")) \
        == "ValueError: shape (N, ...) vs N"


def test_summary_groups_failures_and_refusals_by_reason():
    from ember.onnx.backend_check import Result, summary
    res = {"test_a": Result("pass", None, None, True),
           "test_b": Result("fail", "x", "Add: wrong result (Not equal)", True),
           "test_c": Result("fail", "x", "Add: wrong result (Not equal)", True),
           "test_d": Result("unsupported", "x", "op Foo: no importer for this op", False),
           "test_e": Result("fail", "x", "Mul: wrong result", True)}
    text = summary(res, known={"test_e": "random mask"})
    assert text.splitlines()[:2] == ["1/5 passed (20.0%), 3 failed, 1 unsupported at load",
                                     "1/4 of the cases the importer accepts"]
    assert "      2  Add: wrong result (Not equal)  (e.g. test_b)" in text
    assert "      1  known: random mask  (e.g. test_e)" in text
    assert "unsupported by reason (1 cases):\n      1  op Foo: no importer for this op" in text


def test_shared_comparison():
    from ember.onnx.backend_check import compare
    compare(np.float32([1, 2]), np.float32([1, 2 + 1e-7]), 1e-6, 0)
    for got, want, msg in ((np.float64([1]), np.float32([1]), "dtype"),
                           (np.float32([1, 2]), np.float32([[1, 2]]), "shape"),
                           (np.int64([1]), np.int64([2]), "Mismatch"),
                           ([np.float32(1)], None, "got list"),
                           ([np.float32([1])], [np.float32([1]), np.float32([2])], "sequence")):
        with pytest.raises(AssertionError, match=msg):
            compare(got, want, 1e-3, 1e-7)

