"""Human-readable form of an ONNX model: ONNX's own text syntax (``onnx.printer``) plus a
summary (opset, inputs and outputs with shapes, initializer count and bytes, op histogram)."""
import collections
import os

from ember._optional import require

__all__ = ["to_text", "summary", "load_model"]


def load_model(model_or_path):
    """A ModelProto from a ModelProto, a path, bytes or a binary file object (a file's external
    data read from its folder only, ``importer.load.read_model``)."""
    onnx = require("onnx", feature="ember.onnx.to_text", extra="onnx")
    from ember.errors import EmberTypeError
    if isinstance(model_or_path, onnx.ModelProto):
        return model_or_path
    if isinstance(model_or_path, (bytes, bytearray)):   # external data stays unread
        return onnx.load_from_string(bytes(model_or_path))
    if isinstance(model_or_path, (str, os.PathLike)) or hasattr(model_or_path, "read"):
        from ember.onnx.importer.load import read_model
        return read_model(model_or_path)
    raise EmberTypeError(f"expected an onnx.ModelProto, a path, bytes or a file, got "
                    f"{type(model_or_path).__name__}")


def _dims(vi):
    t = vi.type.tensor_type
    if not t.HasField("shape"):
        return "?"
    out = []
    for d in t.shape.dim:
        if d.HasField("dim_value"):
            out.append(str(d.dim_value))
        elif d.HasField("dim_param"):
            out.append(d.dim_param)
        else:
            out.append("?")
    return "[" + ", ".join(out) + "]"


def _elem(vi):
    import onnx
    try:
        return onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type).name
    except Exception:  # noqa: BLE001
        return str(vi.type.tensor_type.elem_type)


def summary(model_or_path):
    """A few lines: opsets, inputs/outputs with dtype and shape, initializers, op histogram."""
    import numpy as np
    from onnx import helper
    m = load_model(model_or_path)
    g = m.graph
    inits = {i.name for i in g.initializer}
    nbytes = 0
    for t in g.initializer:
        n = int(np.prod(t.dims)) if len(t.dims) else 1
        nbytes += n * np.dtype(helper.tensor_dtype_to_np_dtype(t.data_type)).itemsize
    ops = collections.Counter(n.op_type if not n.domain else f"{n.domain}::{n.op_type}"
                              for n in g.node)
    lines = [f"model: {g.name}  ir_version={m.ir_version}  producer={m.producer_name} "
             f"{m.producer_version}".rstrip(),
             "opsets: " + ", ".join(f"{o.domain or 'ai.onnx'}={o.version}"
                                    for o in m.opset_import)]
    lines.append("inputs:")
    for i in g.input:
        if i.name not in inits:
            lines.append(f"  {i.name}: {_elem(i)}{_dims(i)}")
    lines.append("outputs:")
    for o in g.output:
        lines.append(f"  {o.name}: {_elem(o)}{_dims(o)}")
    lines.append(f"initializers: {len(g.initializer)} ({nbytes:,} bytes)")
    lines.append(f"nodes: {len(g.node)}")
    lines.append("ops: " + ", ".join(f"{k} x{v}" for k, v in sorted(ops.items(),
                                                                     key=lambda kv: (-kv[1],
                                                                                     kv[0]))))
    return "\n".join(lines)


def to_text(model_or_path, with_summary=True, elide_initializers=True):
    """ONNX text syntax of the model (``onnx.printer.to_text``), preceded by ``summary``.
    With ``elide_initializers`` large initializer values are not printed in full."""
    m = load_model(model_or_path)
    import onnx
    from onnx import printer
    shown = m
    if elide_initializers and any(_nelem(t) > 16 for t in m.graph.initializer):
        shown = onnx.ModelProto()
        shown.CopyFrom(m)
        for t in shown.graph.initializer:
            if _nelem(t) > 16:
                _elide(t)
    text = printer.to_text(shown)
    if with_summary:
        return "# " + summary(m).replace("\n", "\n# ") + "\n" + text
    return text


def _nelem(t):
    n = 1
    for d in t.dims:
        n *= d
    return n


def _elide(t):
    """Keep name, type and shape; drop the values (printed as an external-data reference)."""
    from onnx import TensorProto
    t.ClearField("raw_data")
    for f in ("float_data", "int32_data", "int64_data", "double_data", "uint64_data",
              "string_data"):
        t.ClearField(f)
    t.data_location = TensorProto.EXTERNAL
    e = t.external_data.add()
    e.key, e.value = "location", "<elided>"
