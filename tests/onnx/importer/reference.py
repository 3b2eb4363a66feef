"""One-graph ONNX models run by ember's importer and by ONNX's reference evaluator, shared by the
importer tests (tests/onnx/importer/test_ops_*.py)."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from ember.onnx import backend  # noqa: E402


def model(nodes, feeds, outputs, opset=21, domains=(), inits=()):
    """A model of ``nodes`` whose inputs are ``feeds`` {name: array} (typed by the arrays, any
    shape) and whose outputs are the names ``outputs``; ``domains``: extra (domain, version)."""
    ins = [helper.make_tensor_value_info(
        n, TensorProto.STRING if a.dtype.kind in "OU" else
        helper.np_dtype_to_tensor_dtype(a.dtype), None) for n, a in feeds.items()]
    outs = [helper.make_tensor_value_info(n, TensorProto.UNDEFINED, None) for n in outputs]
    g = helper.make_graph(nodes, "g", ins, outs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)] +
                             [helper.make_opsetid(d, v) for d, v in domains])


def run_both(m, feeds):
    """(ember's outputs, the reference evaluator's) for ``feeds``."""
    got = backend.prepare(m).run([feeds[i.name] for i in m.graph.input])
    want = ReferenceEvaluator(m).run(None, feeds)
    return got, want


def same_as_reference(nodes, feeds, outputs, rtol=1e-6, atol=1e-7, **kw):
    """Run ``nodes`` both ways and compare every output (dtype, shape, values)."""
    got, want = run_both(model(nodes, feeds, outputs, **kw), feeds)
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, (outputs[k], g.shape, w.shape)
        if w.dtype.kind in "OU":
            assert g.tolist() == w.tolist(), outputs[k]
            continue
        assert g.dtype == w.dtype, (outputs[k], g.dtype, w.dtype)
        if w.dtype.kind in "fc":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=outputs[k])
        else:
            np.testing.assert_array_equal(g, w, err_msg=outputs[k])
    return got
