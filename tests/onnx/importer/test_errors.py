"""The importer's errors (ember/onnx/importer/errors.py): their place in ember's hierarchy and the
message of an unsupported model, one line per problem naming op, opset, node and attribute."""
from ember.errors import EmberRuntimeError, UnsupportedError
from ember.onnx.importer.errors import OnnxImportError, UnsupportedOnnxError


def test_unsupported_model_lists_each_problem():
    problems = [("Conv", 11, "conv_1", "auto_pad", "value 'VALID' is not supported"),
                ("ImageDecoder", 20, "dec", None, "no importer for this op")]
    e = UnsupportedOnnxError(problems)
    assert e.problems == problems
    assert str(e).splitlines() == [
        "onnx.load_model: the model uses what ember cannot run:",
        "  - 'Conv' (opset 11) at node 'conv_1': attribute 'auto_pad' value 'VALID' is not "
        "supported",
        "  - 'ImageDecoder' (opset 20) at node 'dec': no importer for this op"]


def test_hierarchy():
    assert issubclass(UnsupportedOnnxError, OnnxImportError)
    assert issubclass(UnsupportedOnnxError, UnsupportedError)
    assert issubclass(OnnxImportError, EmberRuntimeError)
