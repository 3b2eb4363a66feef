"""ONNX export of the factories (zeros/ones/full/empty and their *_like, arange, linspace, eye, the
random ones) registered by ember/onnx/symbolics/creation.py: each op on its spec samples,
checked by onnx.checker and run in onnxruntime against ember at opsets 13, 17 and 21."""
import io

import numpy as np
import pytest

import ember
import ember.onnx

from tests.onnx.symbolics.op_export import check_op_exports_and_matches, onnx, ort, params

PARAMS, IDS = params("creation")


@pytest.mark.parametrize("op,opset", PARAMS, ids=IDS)
def test_op_exports_and_matches(op, opset):
    check_op_exports_and_matches(op, opset)


def _factories(x):
    n = x.shape[0]          # a traced size: the factories follow the batch in ONNX
    a = ember.zeros(n, 3) + ember.ones(n, 3) + ember.full((n, 3), 2.5) + x
    b = ember.arange(0.0, 3.0, 1.0) + ember.linspace(-1.0, 1.0, 3) + ember.eye(3)[1]
    c = ember.empty(n, 3) * 0 + ember.randn(n, 3) * 0 + ember.rand(n, 3) * 0
    return a + b + c, ember.arange(n)


@pytest.mark.parametrize("opset", [13, 17, 21])
def test_factories_and_size_follow_dynamic_batch(opset):
    x = ember.randn(4, 3)
    buf = io.BytesIO()
    mp = ember.onnx.export(_factories, (x,), buf, opset_version=opset, input_names=["x"],
                           dynamic_axes={"x": [0]})
    onnx.checker.check_model(mp, full_check=True)
    kinds = {n.op_type for n in mp.graph.node}
    assert {"Shape", "Gather", "ConstantOfShape", "Range"} <= kinds
    sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    for n in (4, 7):
        xn = ember.randn(n, 3)
        got = sess.run(None, {"x": xn.numpy()})
        exp = _factories(xn)
        np.testing.assert_allclose(got[0], exp[0].numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(got[1], exp[1].numpy())
