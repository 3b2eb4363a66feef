"""The exporter's errors (ember/onnx/errors.py): their place in ember's hierarchy and the message
of an unsupported op, which names each op, its opset and the user's line."""
import pytest

import ember
from ember.errors import EmberRuntimeError
from ember.onnx.errors import OnnxExportError, UnsupportedOperatorError


def test_one_unsupported_op_names_op_opset_and_source():
    e = UnsupportedOperatorError([("stft", 17, "model.py:12: y = x.stft(8)")])
    assert isinstance(e, OnnxExportError) and isinstance(e, EmberRuntimeError)
    assert e.ops == [("stft", 17, "model.py:12: y = x.stft(8)")]
    text = str(e)
    assert text.startswith("ONNX export failed: no symbolic function for this op:\n")
    assert "  - 'stft' at opset 17, called at model.py:12: y = x.stft(8)\n" in text
    assert "@ember.onnx.symbolic(op_name)" in text and "symbolic(g, *inputs)" in text


def test_several_ops_are_counted_and_a_missing_source_is_said():
    text = str(UnsupportedOperatorError([("a", 13, None), ("b", 21, "m.py:3")]))
    assert "no symbolic function for these 2 ops:" in text
    assert "  - 'a' at opset 13, called at <unknown source>" in text
    assert "  - 'b' at opset 21, called at m.py:3" in text


def test_the_errors_are_exported_by_ember_onnx():
    assert ember.onnx.OnnxExportError is OnnxExportError
    assert ember.onnx.UnsupportedOperatorError is UnsupportedOperatorError
    with pytest.raises(OnnxExportError):
        raise UnsupportedOperatorError([("x", 13, None)])
