"""Errors raised by the ONNX exporter."""
from ember.errors import EmberRuntimeError

__all__ = ["OnnxExportError", "UnsupportedOperatorError"]


class OnnxExportError(EmberRuntimeError):
    """The model cannot be exported as asked (bad arguments, an op ONNX cannot express here)."""


class UnsupportedOperatorError(OnnxExportError):
    """An op has no symbolic function for the requested opset. ``ops``: [(op, opset, source)]."""

    def __init__(self, ops):
        self.ops = list(ops)
        lines = [f"  - '{op}' at opset {opset}, called at {src or '<unknown source>'}"
                 for op, opset, src in self.ops]
        head = ("ONNX export failed: no symbolic function for " +
                ("this op" if len(self.ops) == 1 else f"these {len(self.ops)} ops"))
        super().__init__(head + ":\n" + "\n".join(lines) +
                         "\nRegister one with @ember.onnx.symbolic(op_name), or give a custom "
                         "autograd.Function a `symbolic(g, *inputs)` staticmethod.")
