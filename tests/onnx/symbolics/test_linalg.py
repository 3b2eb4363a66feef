"""ONNX export of the linear-algebra ops (matmul/mm/bmm, addmm, linear, dot, outer, einsum, det)
registered by ember/onnx/symbolics/linalg.py: each op on its spec samples, checked by
onnx.checker and run in onnxruntime against ember at opsets 13, 17 and 21."""
import pytest

from tests.onnx.symbolics.op_export import check_op_exports_and_matches, params

PARAMS, IDS = params("linalg")


@pytest.mark.parametrize("op,opset", PARAMS, ids=IDS)
def test_op_exports_and_matches(op, opset):
    check_op_exports_and_matches(op, opset)
