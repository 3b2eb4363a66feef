"""Errors raised by the ONNX importer."""
from ember.errors import EmberRuntimeError, UnsupportedError

__all__ = ["OnnxImportError", "UnsupportedOnnxError"]


class OnnxImportError(EmberRuntimeError):
    """The file or graph cannot be read as a model (corrupt file, dangling input, missing
    initializer)."""


class UnsupportedOnnxError(OnnxImportError, UnsupportedError):
    """Nodes ember cannot run. ``problems``: [(op, opset, node name, attribute or None, reason)]."""

    def __init__(self, problems):
        self.problems = list(problems)
        lines = []
        for op, opset, node, attr, why in self.problems:
            where = f"'{op}' (opset {opset}) at node '{node}'"
            lines.append(f"  - {where}: attribute '{attr}' {why}" if attr else
                         f"  - {where}: {why}")
        super().__init__("onnx.load_model: the model uses what ember cannot run:\n" +
                         "\n".join(lines))
