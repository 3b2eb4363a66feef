"""ONNX import: ``load_model`` reads an ONNX model as an ``ember.nn.Module`` (see docs/onnx.md,
"Import"); one importer function per ONNX op and opset range, in ``registry``."""
from ember.onnx.importer.errors import OnnxImportError, UnsupportedOnnxError
from ember.onnx.importer.load import OnnxModule, load_model
from ember.onnx.importer.registry import importer, lookup, registered_importers

__all__ = ["load_model", "OnnxModule", "importer", "lookup", "registered_importers",
           "OnnxImportError", "UnsupportedOnnxError"]
