"""Quantized ops simulated in float: QuantizeLinear / DequantizeLinear / DynamicQuantizeLinear
(per-tensor, per-axis and blocked scales), MatMulInteger, ConvInteger, QLinearMatMul,
QLinearConv, for the integer dtypes ember has (int8, uint8, int16, int32)."""
import numpy as np

import ember
from ember.errors import EmberRuntimeError
from ember.onnx.importer._util import ember_dtype, norm_axis, onnx_np_dtype
from ember.onnx.importer import storage_types as st
from ember.onnx.importer.registry import importer

# ONNX's integer quantization ranges, by element type name (the 2-, 4- and 16-bit ones are
# computed in int64: storage_types)
_INT_RANGE = {"UINT8": (0, 255), "INT8": (-128, 127), "UINT16": (0, 65535),
              "INT16": (-32768, 32767), "UINT4": (0, 15), "INT4": (-8, 7), "UINT2": (0, 3),
              "INT2": (-2, 1), "INT32": (-2 ** 31, 2 ** 31 - 1)}


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
        if not st.storable(a["output_dtype"]):
            return ("output_dtype", "names a dtype ember does not have")
    if a.get("precision"):
        return ("precision", "is not supported")
    return None


@importer("DequantizeLinear", since=10, check=_check_out,
          attrs={"axis": 1, "block_size": 0, "output_dtype": 0, "precision": 0})
def dequantize(a, x, scale, zp=None):
    xf = x.to(scale.dtype)
    xt = a["_tin"][0] if a.get("_tin") else 0
    xs = st.simulated(xt)
    if xs is not None and xs.is_float:   # float8 / float4: no zero point (it must be 0)
        zp = None
    if zp is not None:
        xf = xf - _expand(zp, x, a["axis"], a["block_size"]).to(scale.dtype)
    y = xf * _expand(scale, x, a["axis"], a["block_size"])
    if a["output_dtype"]:
        y = y.to(ember_dtype(onnx_np_dtype(a["output_dtype"])))
    return y


@importer("QuantizeLinear", since=10, check=_check_out,
          attrs={"axis": 1, "block_size": 0, "output_dtype": 0, "saturate": 1, "precision": 0})
def quantize(a, x, scale, zp=None):
    from ember.onnx.importer.load import dtype_name
    tin = a.get("_tin") or []
    et = (tin[2] if len(tin) > 2 and zp is not None else 0) or a["output_dtype"]
    if not et:   # the zero point's type where inference did not name it; else UINT8
        et = {ember.int8: 3, ember.int16: 5, ember.int32: 6}.get(getattr(zp, "dtype", None), 2)
    name = dtype_name(et)
    s = _expand(scale, x, a["axis"], a["block_size"])
    y = x / s if x.dtype == s.dtype else x.to(ember.float32) / s.to(ember.float32)
    if name in _INT_RANGE:
        q = ember.round(y)
        if zp is not None:
            q = q + _expand(zp, x, a["axis"], a["block_size"]).to(q.dtype)
        lo, hi = _INT_RANGE[name]
        return st.cast(ember.clamp(q, float(lo), float(hi)), et)
    sim = st.simulated(et)
    if sim is None or not sim.is_float:
        raise EmberRuntimeError(f"QuantizeLinear to {name} is not supported")
    if name.startswith("FLOAT4") and zp is not None:   # as ONNX's reference: x / s + zp
        y = y + _expand(zp, x, a["axis"], a["block_size"]).to(y.dtype)
    return st.cast(y, et, saturate=a["saturate"])


@importer("DynamicQuantizeLinear", since=11, max_outputs=3)
def dynamic_quantize(a, x):
    lo = ember.minimum(ember.amin(x, tuple(range(x.dim()))), ember.zeros((), dtype=x.dtype))
    hi = ember.maximum(ember.amax(x, tuple(range(x.dim()))), ember.zeros((), dtype=x.dtype))
    scale = (hi - lo) / 255.0
    zp = ember.clamp(ember.round(-lo / scale), 0.0, 255.0)
    y = ember.clamp(ember.round(x / scale) + zp, 0.0, 255.0).to(ember.uint8)
    return y, scale, zp.to(ember.uint8)


def _requant(acc, scale, y_scale, y_zp):
    """Round ``acc * scale / y_scale`` half to even, add the zero point, saturate."""
    dt = y_zp.dtype if y_zp is not None else ember.uint8
    y = ember.round(acc * (scale / y_scale.to(ember.float64)))
    if y_zp is not None:
        y = y + y_zp.to(ember.float64)
    info = np.iinfo(dt.numpy)
    return ember.clamp(y, float(info.min), float(info.max)).to(dt)


def _per_col(s):
    """A per-column (1-d) scale or zero point of the right-hand matrix broadcasts over rows."""
    return s.to(ember.float64) if s.dim() == 0 else s.to(ember.float64).reshape(1, -1)


@importer("MatMulInteger", since=10)
def matmul_integer(a, x, w, x_zp=None, w_zp=None):
    xf = x.to(ember.float64) - (0.0 if x_zp is None else x_zp.to(ember.float64).reshape(-1, 1)
                                if x_zp.dim() else x_zp.to(ember.float64))
    wf = w.to(ember.float64) - (0.0 if w_zp is None else _per_col(w_zp))
    return ember.matmul(xf, wf).to(ember.int32)


@importer("QLinearMatMul", since=10)
def qlinear_matmul(a, x, xs, x_zp, w, ws, w_zp, ys, y_zp):
    xf = x.to(ember.float64) - x_zp.to(ember.float64)
    wf = w.to(ember.float64) - _per_col(w_zp)
    acc = ember.matmul(xf, wf)
    return _requant(acc, xs.to(ember.float64) * _per_col(ws), ys, y_zp)


def _conv_f64(a, x, w):
    from ember.onnx.importer.ops_nn import conv
    return conv(a, x, w)


def _per_out_channel(s, nd):
    s = s.to(ember.float64)
    return s if s.dim() == 0 or s.numel() == 1 else s.reshape(1, -1, *([1] * nd))


_CONV_ATTRS = {"auto_pad": "NOTSET", "dilations": None, "group": 1, "kernel_shape": None,
               "pads": None, "strides": None}


def _check_conv(a, n):
    from ember.onnx.importer.ops_nn import _check_auto
    return _check_auto(a, n)


@importer("ConvInteger", since=10, attrs=_CONV_ATTRS, check=_check_conv)
def conv_integer(a, x, w, x_zp=None, w_zp=None):
    xf = x.to(ember.float64) - (0.0 if x_zp is None else x_zp.to(ember.float64))
    wf = w.to(ember.float64)
    if w_zp is not None:
        wf = wf - (w_zp.to(ember.float64) if w_zp.numel() == 1 else
                   w_zp.to(ember.float64).reshape(-1, *([1] * (w.dim() - 1))))
    # ONNX pads with the zero point, which is 0 after the shift
    return _conv_f64(a, xf, wf).to(ember.int32)


@importer("QLinearConv", since=10, attrs=_CONV_ATTRS, check=_check_conv)
def qlinear_conv(a, x, xs, x_zp, w, ws, w_zp, ys, y_zp, b=None):
    nd = x.dim() - 2
    xf = x.to(ember.float64) - x_zp.to(ember.float64)
    wf = w.to(ember.float64) - (w_zp.to(ember.float64) if w_zp.numel() == 1 else
                                w_zp.to(ember.float64).reshape(-1, *([1] * (w.dim() - 1))))
    acc = _conv_f64(a, xf, wf)
    if b is not None:
        acc = acc + b.to(ember.float64).reshape(1, -1, *([1] * nd))
    return _requant(acc, xs.to(ember.float64) * _per_out_channel(ws, nd), ys, y_zp)
