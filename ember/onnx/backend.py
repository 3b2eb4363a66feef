"""``ember.onnx.backend``: ONNX's backend interface (``onnx.backend.base.Backend``) on ember, so
ONNX's own test runner can drive the importer.

    rep = ember.onnx.backend.prepare(model_proto)      # load_model + load-time checks
    outputs = rep.run([x])                             # a list of NumPy arrays
"""
import numpy as np

from ember._optional import require

onnx = require("onnx", feature="ember.onnx.backend", extra="onnx")
from onnx.backend.base import Backend, BackendRep  # noqa: E402

import ember  # noqa: E402
from ember.onnx.importer import load_model  # noqa: E402
from ember.onnx.importer import storage_types as st  # noqa: E402

__all__ = ["EmberBackend", "EmberRep", "prepare", "run_model", "run_node", "supports_device"]


def _array(v):
    if isinstance(v, onnx.TensorProto):
        return onnx.numpy_helper.to_array(v)
    return np.asarray(v)


def _value(v):
    """A backend input as ember: arrays of an ember dtype become tensors, lists (sequences)
    lists, None stays; arrays of other types (bfloat16, float8, uint32, strings...) go to the
    module as they are, which widens them to their storage dtype (``storage_types``)."""
    if v is None:
        return None
    if isinstance(v, (list, tuple)):
        return [_value(e) for e in v]
    a = _array(v)
    return ember.tensor(a) if a.dtype in st.NATIVE else a


class EmberRep(BackendRep):
    """A prepared model: ``run(inputs)`` takes a list (graph inputs in order) or a dict by name
    and returns the outputs as NumPy arrays."""

    def __init__(self, module):
        self.module = module

    def run(self, inputs, **kwargs):
        if isinstance(inputs, dict):
            args, named = (), {k: _value(v) for k, v in inputs.items()}
        else:
            if not isinstance(inputs, (list, tuple)):
                inputs = [inputs]
            args, named = tuple(_value(v) for v in inputs), {}
        with ember.no_grad():
            out = self.module(*args, **named)
        return self.module.declared_outputs(out)


class EmberBackend(Backend):
    """ember as an ONNX backend (CPU)."""

    @classmethod
    def supports_device(cls, device):
        return str(device).upper().startswith("CPU")

    @classmethod
    def prepare(cls, model, device="CPU", **kwargs):
        if not cls.supports_device(device):
            raise ember.UnsupportedError(f"ember.onnx.backend: device '{device}' is not "
                                         f"supported (CPU only)")
        return EmberRep(load_model(model))

    @classmethod
    def run_model(cls, model, inputs, device="CPU", **kwargs):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node, inputs, device="CPU", outputs_info=None, **kwargs):
        """Run one NodeProto on NumPy ``inputs`` (in node-input order)."""
        from onnx import helper
        arrays = [_array(v) for v in inputs]
        names = [n for n in node.input if n]
        vis = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype),
                                             a.shape) for n, a in zip(names, arrays)]
        outs = [helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None)
                for o in node.output if o]
        graph = helper.make_graph([node], "run_node", vis, outs)
        opset = kwargs.get("opset_version", onnx.defs.onnx_opset_version())
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid(node.domain or "",
                                                                            opset)])
        return cls.prepare(model, device).run(arrays)


prepare = EmberBackend.prepare
run_model = EmberBackend.run_model
run_node = EmberBackend.run_node
supports_device = EmberBackend.supports_device
