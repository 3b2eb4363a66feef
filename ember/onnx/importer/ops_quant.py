"""QuantizeLinear / DequantizeLinear / DynamicQuantizeLinear, simulated in float (per-tensor,
per-axis and blocked scales) for the integer dtypes ember has (int8, uint8, int16, int32)."""
import numpy as np

import ember
from ember.errors import EmberRuntimeError
from ember.onnx.importer._util import ember_dtype, norm_axis, onnx_np_dtype
from ember.onnx.importer.registry import importer


def _expand(s, x, axis, block):
    """Broadcast a scale / zero point to ``x``: scalar, 1-d per axis, or blocked."""
    if s.dim() == 0 or s.numel() == 1 and block == 0:
        return s.reshape(())
    ax = norm_axis(axis, x.dim())
    if block:
        s = s.repeat_interleave(block, dim=ax)
        return ember.narrow(s, ax, 0, x.shape[ax])
    shape = [1] * x.dim()
    shape[ax] = -1
    return s.reshape(*shape)


def _check_out(a, n):
    if a.get("output_dtype"):
        from ember.onnx.importer.load import _EMBER_NP
        d = onnx_np_dtype(a["output_dtype"])
        if d is None or d not in _EMBER_NP:
            return ("output_dtype", "names a dtype ember does not have")
    if a.get("precision"):
        return ("precision", "is not supported")
    return None


@importer("DequantizeLinear", since=10, check=_check_out,
          attrs={"axis": 1, "block_size": 0, "output_dtype": 0, "precision": 0})
def dequantize(a, x, scale, zp=None):
    xf = x.to(scale.dtype)
    if zp is not None:
        xf = xf - _expand(zp, x, a["axis"], a["block_size"]).to(scale.dtype)
    y = xf * _expand(scale, x, a["axis"], a["block_size"])
    if a["output_dtype"]:
        y = y.to(ember_dtype(onnx_np_dtype(a["output_dtype"])))
    return y


@importer("QuantizeLinear", since=10, check=_check_out,
          attrs={"axis": 1, "block_size": 0, "output_dtype": 0, "saturate": 1, "precision": 0})
def quantize(a, x, scale, zp=None):
    if zp is not None:
        dt = zp.dtype
    elif a["output_dtype"]:
        dt = ember_dtype(onnx_np_dtype(a["output_dtype"]))
    else:
        dt = ember.uint8
    if dt.is_floating_point or dt == ember.bool:
        raise EmberRuntimeError(f"QuantizeLinear to {dt} is not supported")
    s = _expand(scale, x, a["axis"], a["block_size"]).to(ember.float32)
    q = ember.round(x.to(ember.float32) / s)
    if zp is not None:
        q = q + _expand(zp, x, a["axis"], a["block_size"]).to(ember.float32)
    info = np.iinfo(dt.numpy)
    return ember.clamp(q, float(info.min), float(info.max)).to(dt)


@importer("DynamicQuantizeLinear", since=11, max_outputs=3)
def dynamic_quantize(a, x):
    lo = ember.minimum(ember.amin(x, tuple(range(x.dim()))), ember.zeros((), dtype=x.dtype))
    hi = ember.maximum(ember.amax(x, tuple(range(x.dim()))), ember.zeros((), dtype=x.dtype))
    scale = (hi - lo) / 255.0
    zp = ember.clamp(ember.round(-lo / scale), 0.0, 255.0)
    y = ember.clamp(ember.round(x / scale) + zp, 0.0, 255.0).to(ember.uint8)
    return y, scale, zp.to(ember.uint8)
