"""ONNX export: ``export`` traces a model with ember.jit and writes an ONNX model (one symbolic
function per op, chosen by opset); ``verify`` checks it against onnxruntime; ``to_text`` prints
it in ONNX's text syntax.

    ember.onnx.export(model, (x,), "model.onnx", input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    print(ember.onnx.verify(model, (x,)).report())
    print(ember.onnx.to_text("model.onnx"))

The ``onnx`` package is imported only when these functions run (``import ember`` never does).
"""
from ember._optional import require
from ember.onnx.errors import OnnxExportError, UnsupportedOperatorError
from ember.onnx.exporter import TrainingMode, build_model, export
from ember.onnx.registry import (MAX_OPSET, MIN_OPSET, lookup, register, registered_ops,
                                 symbolic)


def verify(model, args, opset_version=17, rtol=1e-4, atol=1e-5, **kwargs):
    """Export ``model`` on ``args``, run onnxruntime, report the largest difference per output
    (see ``ember.onnx.verification.verify``)."""
    from ember.onnx.verification import verify as _verify
    return _verify(model, args, opset_version=opset_version, rtol=rtol, atol=atol, **kwargs)


def to_text(model_or_path, with_summary=True):
    """The model in ONNX's text syntax (onnx.printer), preceded by a summary."""
    from ember.onnx.text import to_text as _to_text
    return _to_text(model_or_path, with_summary=with_summary)


def load_model(model, base_dir=None):
    """Read an ONNX model (path, bytes, file object or ``onnx.ModelProto``) as an
    ``ember.nn.Module``, external data only from ``base_dir`` (default: the model file's folder;
    see ``ember.onnx.importer.load_model``)."""
    require("onnx", feature="ember.onnx.load_model", extra="onnx")
    from ember.onnx.importer import load_model as _load_model
    return _load_model(model, base_dir)


def register_custom_op_symbolic(op_name, fn, opset_version=MIN_OPSET):
    """Register ``fn(g, node, *tensor_args, **const_args)`` for spec op ``op_name``."""
    return register(op_name, fn, opset_version)


__all__ = ["export", "load_model", "verify", "to_text", "TrainingMode", "symbolic", "register",
           "register_custom_op_symbolic", "lookup", "registered_ops", "build_model",
           "OnnxExportError", "UnsupportedOperatorError", "MIN_OPSET", "MAX_OPSET"]
