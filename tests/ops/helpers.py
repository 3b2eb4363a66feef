"""Helpers of the tests of ember/ops: tensors from arrays, an ONNX round trip through onnxruntime."""
import numpy as np
import pytest

import ember


def t_of(a, grad=False):
    """A C-contiguous ember tensor of ``a`` (requiring grad if asked)."""
    t = ember.from_numpy(np.array(a, order="C"))
    return t.requires_grad_(True) if grad else t


def onnx_roundtrip(fn, *arrays, opset=17):
    """Export ``fn`` on tensors of ``arrays``, run it in onnxruntime, compare with ember."""
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    import io
    import ember.onnx
    xs = tuple(t_of(a) for a in arrays)
    expected = fn(*xs)
    expected = expected if isinstance(expected, tuple) else (expected,)
    buf = io.BytesIO()
    ember.onnx.export(fn, xs, buf, opset_version=opset)
    sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {i.name: x.numpy() for i, x in zip(sess.get_inputs(), xs)})
    for g_, e in zip(got, expected):
        np.testing.assert_allclose(g_, e.numpy(), rtol=1e-6, equal_nan=True)
