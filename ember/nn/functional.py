"""``ember.nn.functional``: torch.nn.functional's names and signatures on ember's spec ops.

Every function here calls ops of the op spec, ``ember/ops/spec/`` (through
``ember.autograd._generated.functions``), so gradients, tracing and export come from those ops.
Values computed from tensor data (masks from a target, bag offsets, an argmax, random masks)
are computed by ops too, so a trace recomputes them on new inputs; the few that cannot be
(an output shape read from the data) go through ``_read``, which makes a trace warn
(``ember.jit.TracerWarning``). tests/jit/test_trace_vs_eager.py checks both for every function.
Raises what torch raises for bad arguments (ValueError / RuntimeError naming the function).
"""
import math
import warnings

import numpy as np

from ember import _dtype
from ember.autograd._generated import functions as G
from ember.autograd.grad_mode import no_grad
from ember.autograd import autocast as _autocast
from ember.autograd.state import STATE
from ember.ops.nn import dropout as _dropout
from ember.random import resolve
from ember.tensor import Tensor
from ember.errors import (EmberRuntimeError, EmberTypeError, EmberValueError, UnsupportedError,
                          public as _public)

__all__ = []  # filled at the end


# ---------------------------------------------------------------------------- helpers
def _ntuple(v, n, name="argument"):
    cls = v.__class__
    if cls is int:
        return (v,) * n
    if cls is tuple and len(v) == n:   # a module's own (already normalised) tuple
        for a in v:
            if a.__class__ is not int:
                break
        else:
            return v
    if isinstance(v, (int, np.integer)):
        return (int(v),) * n
    t = tuple(int(a) for a in v)
    if len(t) == 1:
        return t * n
    if len(t) != n:
        raise ValueError(f"expected {name} to be an int or {n} ints, got {v!r}")
    return t


def _const(arr):
    return Tensor._make(arr)


def _read(t, op, why):
    """``t``'s ndarray for a value ``op`` computes in Python from the data (not through ops):
    a trace freezes it, so an active tracer warns (``TracerWarning`` naming ``op`` and the
    user's line). Every data read here goes through this or ``_check_read``."""
    tracer = STATE.tracer
    if tracer is not None:
        tracer.data_read(t, op, why)
    return t._data


def _check_read(t):
    """``t``'s ndarray, read only to validate arguments (the result never depends on it; a
    trace does not repeat the check)."""
    return t._data


def _legacy_reduction(size_average, reduce, reduction):
    """The ``reduction`` string the legacy ``size_average``/``reduce`` arguments stand for
    (torch's ``_Reduction.legacy_get_string``): ``reduction`` when both are None, else 'mean',
    'sum' or 'none' (an unset one counts as True), with torch's UserWarning naming the
    ``reduction=`` to use instead."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if size_average and reduce:
        result = "mean"
    elif reduce:
        result = "sum"
    else:
        result = "none"
    warnings.warn(f"size_average and reduce args will be deprecated, please use "
                  f"reduction='{result}' instead.", stacklevel=3)
    return result


def _same_padding(op, weight_spatial, dilation, stride):
    if any(s != 1 for s in stride):
        raise ValueError(f"{op}: padding='same' is not supported for strided convolutions")
    pads = []
    for k, d in zip(weight_spatial, dilation):
        total = d * (k - 1)
        pads.append((total // 2, total - total // 2))
    return pads


def _batched(input, nd, op):
    """(input with a batch dim, whether one was added)."""
    if input.dim() == nd + 1:
        return G.unsqueeze(input, 0), True
    if input.dim() != nd + 2:
        raise RuntimeError(f"{op}: expected a {nd + 1}-d (unbatched) or {nd + 2}-d (batched) "
                           f"input, got shape {list(input.shape)}")
    return input, False


# ---------------------------------------------------------------------------- convolution
def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-d convolution (cross-correlation) over (N, C, H, W) or (C, H, W) input.

    ``padding`` is an int, a pair, 'same' or 'valid'.
    """
    x, unb = _batched(input, 2, "conv2d")
    stride = _ntuple(stride, 2, "stride")
    dilation = _ntuple(dilation, 2, "dilation")
    if isinstance(padding, str):
        if padding == "valid":
            pad = (0, 0)
        elif padding == "same":
            (t, b), (l, r) = _same_padding("conv2d", weight.shape[2:], dilation, stride)
            pad = (t, b, l, r) if (t != b or l != r) else (t, l)
        else:
            raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                             "{'valid', 'same'}")
    else:
        pad = _ntuple(padding, 2, "padding")
    y = G.conv2d(x, weight, bias, stride, pad, dilation, groups)
    return G.squeeze(y, 0) if unb else y


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-d convolution over (N, C, L) or (C, L) input (runs as a 2-d one of height 1)."""
    x, unb = _batched(input, 1, "conv1d")
    w_shape = getattr(weight, "shape", None)
    if w_shape is not None and len(w_shape) == 3 and isinstance(groups, int) and \
            x.shape[1] != w_shape[1] * groups:  # in the user's shapes, not the 2-d ones below
        raise EmberRuntimeError(f"Given groups={groups}, weight of size {list(w_shape)}, "
                                f"expected input{list(input.shape)} to have "
                                f"{w_shape[1] * groups} channels, but got {input.shape[-2]} "
                                f"channels instead")
    (s,), (d,) = _ntuple(stride, 1, "stride"), _ntuple(dilation, 1, "dilation")
    if isinstance(padding, str):
        if padding == "valid":
            pad = (0, 0, 0, 0)
        elif padding == "same":
            ((l, r),) = _same_padding("conv1d", weight.shape[2:], (d,), (s,))
            pad = (0, 0, l, r)
        else:
            raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                             "{'valid', 'same'}")
    else:
        (p,) = _ntuple(padding, 1, "padding")
        pad = (0, 0, p, p)
    y = G.conv2d(G.unsqueeze(x, 2), G.unsqueeze(weight, 2), bias, (1, s), pad, (1, d), groups)
    y = G.squeeze(y, 2)
    return G.squeeze(y, 0) if unb else y


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """2-d transposed convolution over (N, C, H, W) or (C, H, W) input."""
    x, unb = _batched(input, 2, "conv_transpose2d")
    y = G.conv_transpose2d(x, weight, bias, _ntuple(stride, 2), _ntuple(padding, 2),
                           _ntuple(output_padding, 2), groups, _ntuple(dilation, 2))
    return G.squeeze(y, 0) if unb else y


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """1-d transposed convolution over (N, C, L) or (C, L) input."""
    x, unb = _batched(input, 1, "conv_transpose1d")
    (s,), (p,), (op,), (d,) = (_ntuple(stride, 1), _ntuple(padding, 1),
                              _ntuple(output_padding, 1), _ntuple(dilation, 1))
    y = G.conv_transpose2d(G.unsqueeze(x, 2), G.unsqueeze(weight, 2), bias, (1, s), (0, p),
                           (0, op), groups, (1, d))
    y = G.squeeze(y, 2)
    return G.squeeze(y, 0) if unb else y


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-d convolution (cross-correlation) over (N, C, D, H, W) or (C, D, H, W) input.

    ``padding`` is an int, 3 ints, 'same' or 'valid'.
    """
    x, unb = _batched(input, 3, "conv3d")
    stride = _ntuple(stride, 3, "stride")
    dilation = _ntuple(dilation, 3, "dilation")
    if isinstance(padding, str):
        if padding == "valid":
            pad = (0, 0, 0)
        elif padding == "same":
            pads = _same_padding("conv3d", weight.shape[2:], dilation, stride)
            pad = tuple(q for lo_hi in pads for q in lo_hi)
        else:
            raise EmberValueError(f"Invalid padding string {padding!r}, should be one of "
                                  "{'valid', 'same'}")
    else:
        pad = _ntuple(padding, 3, "padding")
    y = G.conv3d(x, weight, bias, stride, pad, dilation, groups)
    return G.squeeze(y, 0) if unb else y


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """3-d transposed convolution over (N, C, D, H, W) or (C, D, H, W) input."""
    x, unb = _batched(input, 3, "conv_transpose3d")
    y = G.conv_transpose3d(x, weight, bias, _ntuple(stride, 3), _ntuple(padding, 3),
                           _ntuple(output_padding, 3), groups, _ntuple(dilation, 3))
    return G.squeeze(y, 0) if unb else y


# ---------------------------------------------------------------------------- pooling
def _stride(stride, kernel_size, n):
    if stride is None or (not isinstance(stride, int) and len(stride) == 0):
        return _ntuple(kernel_size, n)
    return _ntuple(stride, n)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """2-d max pooling; with ``return_indices`` also the flat H*W argmax of each window."""
    x, unb = _batched(input, 2, "max_pool2d")
    y, idx = G.max_pool2d_with_indices(x, _ntuple(kernel_size, 2), _stride(stride, kernel_size, 2),
                                       _ntuple(padding, 2), _ntuple(dilation, 2), ceil_mode)
    if unb:
        y, idx = G.squeeze(y, 0), G.squeeze(idx, 0)
    return (y, idx) if return_indices else y


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=False):
    """(output, indices) of max_pool2d, as torch's max_pool2d_with_indices."""
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """1-d max pooling over (N, C, L) or (C, L)."""
    x, unb = _batched(input, 1, "max_pool1d")
    (k,), (s,) = _ntuple(kernel_size, 1), _stride(stride, kernel_size, 1)
    (p,), (d,) = _ntuple(padding, 1), _ntuple(dilation, 1)
    y, idx = G.max_pool2d_with_indices(G.unsqueeze(x, 2), (1, k), (1, s), (0, p), (1, d),
                                       ceil_mode)
    y, idx = G.squeeze(y, 2), G.squeeze(idx, 2)
    if unb:
        y, idx = G.squeeze(y, 0), G.squeeze(idx, 0)
    return (y, idx) if return_indices else y


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """2-d average pooling."""
    x, unb = _batched(input, 2, "avg_pool2d")
    y = G.avg_pool2d(x, _ntuple(kernel_size, 2), _stride(stride, kernel_size, 2),
                     _ntuple(padding, 2), ceil_mode, count_include_pad, divisor_override)
    return G.squeeze(y, 0) if unb else y


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    """1-d average pooling over (N, C, L) or (C, L)."""
    x, unb = _batched(input, 1, "avg_pool1d")
    (k,), (s,), (p,) = (_ntuple(kernel_size, 1), _stride(stride, kernel_size, 1),
                        _ntuple(padding, 1))
    y = G.avg_pool2d(G.unsqueeze(x, 2), (1, k), (1, s), (0, p), ceil_mode, count_include_pad,
                     None)
    y = G.squeeze(y, 2)
    return G.squeeze(y, 0) if unb else y


def _adaptive_size(output_size, n):
    if output_size is None or isinstance(output_size, int):
        return (output_size,) * n
    t = tuple(output_size)
    return t * n if len(t) == 1 else t


def adaptive_avg_pool2d(input, output_size):
    """Average pooling to ``output_size`` (an int, a pair; None keeps that input size)."""
    x, unb = _batched(input, 2, "adaptive_avg_pool2d")
    y = G.adaptive_avg_pool2d(x, _adaptive_size(output_size, 2))
    return G.squeeze(y, 0) if unb else y


def adaptive_avg_pool1d(input, output_size):
    x, unb = _batched(input, 1, "adaptive_avg_pool1d")
    (o,) = _adaptive_size(output_size, 1)
    y = G.squeeze(G.adaptive_avg_pool2d(G.unsqueeze(x, 2), (1, o)), 2)
    return G.squeeze(y, 0) if unb else y


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """Max pooling to ``output_size``; with ``return_indices`` also the argmax indices."""
    x, unb = _batched(input, 2, "adaptive_max_pool2d")
    y, idx = G.adaptive_max_pool2d(x, _adaptive_size(output_size, 2))
    if unb:
        y, idx = G.squeeze(y, 0), G.squeeze(idx, 0)
    return (y, idx) if return_indices else y


def adaptive_max_pool1d(input, output_size, return_indices=False):
    x, unb = _batched(input, 1, "adaptive_max_pool1d")
    (o,) = _adaptive_size(output_size, 1)
    y, idx = G.adaptive_max_pool2d(G.unsqueeze(x, 2), (1, o))
    y, idx = G.squeeze(y, 2), G.squeeze(idx, 2)
    if unb:
        y, idx = G.squeeze(y, 0), G.squeeze(idx, 0)
    return (y, idx) if return_indices else y


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """Power-average pooling: (sum over the window of x**p) ** (1/p)."""
    kh, kw = _ntuple(kernel_size, 2)
    out = avg_pool2d(G.pow(input, norm_type), (kh, kw), stride, 0, ceil_mode)
    return G.pow(G.mul(G.mul(G.sign(out), relu(G.abs(out))), kh * kw), 1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """1-d power-average pooling: (sum over the window of x**p) ** (1/p)."""
    (k,) = _ntuple(kernel_size, 1)
    out = avg_pool1d(G.pow(input, norm_type), k, stride, 0, ceil_mode)
    return G.pow(G.mul(G.mul(G.sign(out), relu(G.abs(out))), k), 1.0 / norm_type)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """3-d power-average pooling: (sum over the window of x**p) ** (1/p)."""
    kd, kh, kw = _ntuple(kernel_size, 3)
    out = avg_pool3d(G.pow(input, norm_type), (kd, kh, kw), stride, 0, ceil_mode)
    return G.pow(G.mul(G.mul(G.sign(out), relu(G.abs(out))), kd * kh * kw), 1.0 / norm_type)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """3-d max pooling; with ``return_indices`` also the flat D*H*W argmax of each window."""
    x, unb = _batched(input, 3, "max_pool3d")
    y, idx = G.max_pool3d_with_indices(x, _ntuple(kernel_size, 3), _stride(stride, kernel_size, 3),
                                       _ntuple(padding, 3), _ntuple(dilation, 3), ceil_mode)
    if unb:
        y, idx = G.squeeze(y, 0), G.squeeze(idx, 0)
    return (y, idx) if return_indices else y


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=False):
    """(output, indices) of max_pool3d, as torch's max_pool3d_with_indices."""
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=False):
    """(output, indices) of max_pool1d, as torch's max_pool1d_with_indices."""
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """3-d average pooling over (N, C, D, H, W) or (C, D, H, W)."""
    x, unb = _batched(input, 3, "avg_pool3d")
    y = G.avg_pool3d(x, _ntuple(kernel_size, 3), _stride(stride, kernel_size, 3),
                     _ntuple(padding, 3), ceil_mode, count_include_pad, divisor_override)
    return G.squeeze(y, 0) if unb else y


def adaptive_avg_pool3d(input, output_size):
    """Average pooling to ``output_size`` (an int or 3; None keeps that input size)."""
    x, unb = _batched(input, 3, "adaptive_avg_pool3d")
    y = G.adaptive_avg_pool3d(x, _adaptive_size(output_size, 3))
    return G.squeeze(y, 0) if unb else y


def adaptive_max_pool3d(input, output_size, return_indices=False):
    """Max pooling to ``output_size``; with ``return_indices`` also the argmax indices."""
    x, unb = _batched(input, 3, "adaptive_max_pool3d")
    y, idx = G.adaptive_max_pool3d(x, _adaptive_size(output_size, 3))
    if unb:
        y, idx = G.squeeze(y, 0), G.squeeze(idx, 0)
    return (y, idx) if return_indices else y


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):
    return adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):
    return adaptive_max_pool2d(input, output_size, True)


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=False):
    return adaptive_max_pool3d(input, output_size, True)


# ---------------------------------------------------------------------------- normalisation
def _check_channels(op, input, **per_channel):
    """Each tensor in ``per_channel`` (None allowed) holds one value per channel of ``input``."""
    shape = getattr(getattr(input, "_data", None), "shape", None)
    if shape is None:
        raise EmberTypeError(f"{op}(): argument 'input' must be a Tensor, not "
                             f"{type(input).__name__}")
    if len(shape) < 2:
        raise EmberRuntimeError(f"{op}: expected an input with a channel axis (N, C, ...), got "
                                f"shape {list(shape)}")
    c = shape[1]
    for name, t in per_channel.items():
        if t is None:
            continue
        n = getattr(getattr(t, "_data", None), "size", None)
        if n is None:
            raise EmberTypeError(f"{op}(): argument '{name}' must be a Tensor, not "
                                 f"{type(t).__name__}")
        if n != c:
            raise EmberRuntimeError(f"{op}: {name} should contain {c} elements not {n} (input "
                                    f"shape {list(shape)}, {name} shape {list(t._data.shape)})")


def _mixed_dtype(input, *params):
    """The dtype torch's CPU normalisation kernels round a result to when ``input`` is float16
    or bfloat16 and its parameters / statistics are float32 ("mixed dtype": computed in
    float32, returned in the input's dtype, so a norm layer keeps an autocast region's
    bfloat16); None otherwise (ember's promotion then gives the result dtype)."""
    low = getattr(getattr(input, "_data", None), "dtype", None)
    if low is None or low.itemsize != 2 or low.kind not in "fV":
        return None
    dts = {t._data.dtype for t in params if getattr(t, "_data", None) is not None}
    return low if dts and dts <= {low, np.dtype(np.float32)} and dts != {low} else None


def _in_dtype(out, low):
    return out if low is None else G.to(out, low)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """Batch normalisation over every axis but 1 (see torch.nn.functional.batch_norm).

    Raises EmberRuntimeError when the input has no channel axis or a statistic or affine parameter
    does not have one element per channel."""
    if getattr(getattr(input, "_data", None), "shape", None) == (0,) and all(
            t is None or t._data.size == 0 for t in (running_mean, running_var, weight, bias)):
        return G.clone(input)  # torch: an empty 1-d input (no channels) normalises to itself
    _check_channels("batch_norm", input, running_mean=running_mean, running_var=running_var,
                    weight=weight, bias=bias)
    if training:
        size = input.shape
        n = size[0]
        for s in size[2:]:
            n *= s
        if n == 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input "
                             f"size {list(size)}")
        if n == 0:
            return _empty_norm(input, weight, bias)
    return _in_dtype(G.batch_norm(input, running_mean, running_var, weight, bias, training,
                                  momentum, eps),
                     _mixed_dtype(input, running_mean, running_var, weight, bias))


def _empty_norm(input, weight, bias):
    """A normalisation of an input without elements per channel (an empty batch), as torch's:
    no statistics (running ones untouched), the input times ``weight[0]`` plus ``bias[0]``, so
    that the affine parameters get (zero) gradients."""
    y = G.clone(input)
    if weight is not None and weight.numel():
        y = G.mul(y, weight[0])
    if bias is not None and bias.numel():
        y = G.add(y, bias[0])
    return y


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    """Instance normalisation: per sample and channel. With running statistics given, training
    (``use_input_stats``) moves them towards the batch average of the instances' mean and
    unbiased variance; otherwise they normalise, as torch. An empty batch leaves the running
    statistics as they are (torch raises an IndexError there). With ``use_input_stats``, one
    spatial element per instance (nothing to normalise over) raises ValueError, as torch's."""
    if use_input_stats and math.prod(input.shape[2:]) == 1:
        raise ValueError(f"instance_norm: Expected more than 1 spatial element when training, "
                         f"got input size {list(input.shape)} ({input.dtype})")
    n, c = input.shape[:2]
    shp = (1, c) + (1,) * (input.dim() - 2)
    if use_input_stats and input.numel() == 0:
        y = G.clone(input)    # an empty batch: nothing to normalise, running statistics kept
    elif use_input_stats:
        y = G.group_norm(G.reshape(input, (1, n * c) + tuple(input.shape[2:])), n * c, None,
                         None, eps)
        y = G.reshape(y, tuple(input.shape))
        if running_mean is not None or running_var is not None:
            dims = tuple(range(2, input.dim()))
            with no_grad():
                x = input.detach()
                if running_mean is not None:
                    m = G.mean(G.mean(x, dims, False), (0,), False)
                    running_mean.copy_(G.add(G.mul(running_mean, 1 - momentum),
                                             G.mul(m, momentum)))
                if running_var is not None:
                    v = G.mean(G.var(x, dims, correction=1), (0,), False)
                    running_var.copy_(G.add(G.mul(running_var, 1 - momentum), G.mul(v, momentum)))
    else:
        if running_mean is None or running_var is None:
            raise EmberValueError("instance_norm: expected running_mean and running_var to be "
                                  "defined when use_input_stats is false")
        y = G.div(G.sub(input, G.reshape(running_mean, shp)),
                  G.sqrt(G.add(G.reshape(running_var, shp), eps)))
    if weight is not None:
        y = G.mul(y, G.reshape(weight, shp))
    if bias is not None:
        y = G.add(y, G.reshape(bias, shp))
    return _in_dtype(y, _mixed_dtype(input, running_mean, running_var, weight, bias))


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalise over the trailing ``normalized_shape`` dims."""
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    return _in_dtype(G.layer_norm(input, tuple(normalized_shape), weight, bias, eps),
                     _mixed_dtype(input, weight, bias))


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """Root-mean-square normalisation over the trailing dims. float16/bfloat16 compute in
    float32 (eps defaults to float32's) and round before the weight, as torch."""
    from ember.kernels.opmath import F32, is_reduced
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    dims = tuple(range(-len(normalized_shape), 0))
    dtype = input._data.dtype
    x = G.to(input, F32) if is_reduced(dtype) else input
    if eps is None:
        eps = float(np.finfo(x._data.dtype).eps)
    y = G.mul(x, G.rsqrt(G.add(G.mean(G.mul(x, x), dims, True), eps)))
    if x is not input:
        y = G.to(y, dtype)
    return G.mul(y, weight) if weight is not None else y


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Group normalisation (see torch.nn.functional.group_norm)."""
    return _in_dtype(G.group_norm(input, num_groups, weight, bias, eps),
                     _mixed_dtype(input, weight, bias))


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """Local response normalisation across channels; an empty input is returned as is."""
    if input.numel() == 0:
        return input
    sq = G.unsqueeze(G.mul(input, input), 1)
    nd = input.dim()
    if nd == 3:
        div = G.pad(sq, (0, 0, size // 2, (size - 1) // 2), "constant", 0.0)
        div = G.squeeze(avg_pool2d(div, (size, 1), stride=1), 1)
    else:
        shp = tuple(input.shape)
        sq = G.reshape(sq, (shp[0], 1, shp[1], shp[2], -1))
        div = G.pad(sq, (0, 0, 0, 0, size // 2, (size - 1) // 2), "constant", 0.0)
        d5 = tuple(div.shape)
        div = G.reshape(div, (d5[0], d5[2], d5[3] * d5[4]))
        div = G.squeeze(avg_pool2d(G.unsqueeze(G.transpose(div, 1, 2), 1), (1, size), 1), 1)
        div = G.reshape(G.transpose(div, 1, 2), shp)
    div = G.pow(G.add(G.mul(div, alpha), k), beta)
    return G.div(input, div)


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """``input`` divided by its p-norm along ``dim`` (at least ``eps``); written into ``out``
    when given (ember.autograd.out)."""
    n = G.clamp(G.norm(input, p, (dim,), True), eps, None)
    if out is None:
        return G.div(input, n)
    from ember.autograd.out import check_grad, write
    check_grad("normalize", (input,), {}, out)
    return write("normalize", G.div(input, n), out)


# ---------------------------------------------------------------------------- dropout
def dropout(input, p=0.5, training=True, inplace=False):
    """Zero elements with probability ``p`` and scale the rest by 1/(1-p) when training."""
    return _dropout(input, p, training, inplace)


def _check_p(p, name):
    """``p`` must be a probability (torch: ValueError)."""
    if isinstance(p, bool) or not isinstance(p, (int, float, np.floating, np.integer)) \
            or not 0.0 <= p <= 1.0:
        raise EmberValueError(f"{name}: dropout probability has to be between 0 and 1, but got "
                              f"{p!r}")


def _feature_dropout(input, p, training, inplace, name):
    """torch's ``feature_dropout``: one keep/drop draw per (N, C) channel of an input with at
    least 2 dims (dims 0 and 1 are taken as N and C whatever the rank), kept ones scaled by
    1/(1-p)."""
    if not training or p == 0.0:
        return input
    if input.dim() < 2:
        raise EmberRuntimeError(f"{name}: Feature dropout requires at least 2 dimensions in the "
                                f"input, got shape {list(input.shape)}")
    shape = tuple(input.shape)
    mshape = shape[:2] + (1,) * (len(shape) - 2)
    dt = input._data.dtype
    if p == 1.0:
        out = G.mul(input, 0.0)
    else:  # drawn through the spec's rand, so a trace draws anew on every call
        keep = G.ge(G.rand(mshape, resolve(None), np.dtype(np.float64)), p)
        out = G.mul(input, G.mul(G.to(keep, dt, False), 1.0 / (1.0 - p)))
    return input.copy_(out) if inplace else out


def _unbatched_feature_dropout(input, p, training, inplace, name):
    """feature dropout of ``input`` with a batch dim added in front (and removed after)."""
    out = _feature_dropout(input.unsqueeze(0), p, training, False, name).squeeze(0)
    return input.copy_(out) if inplace and training and p != 0.0 else out


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, L) or (C, L) input.

    Raises EmberRuntimeError for other ranks (as torch)."""
    _check_p(p, "dropout1d")
    if input.dim() not in (2, 3):
        raise EmberRuntimeError(
            f"dropout1d: Expected 2D or 3D input, but received a {input.dim()}D input. Note that "
            "dropout1d exists to provide channel-wise dropout on inputs with 1 spatial dimension, "
            "a channel dimension, and an optional batch dimension (i.e. 2D or 3D inputs).")
    if input.dim() == 3:
        return _feature_dropout(input, p, training, inplace, "dropout1d")
    return _unbatched_feature_dropout(input, p, training, inplace, "dropout1d")


def _warn_feature_rank(input, nd, name):
    d = input.dim()
    if d not in (nd + 1, nd + 2):
        warnings.warn(
            f"{name}: Received a {d}-D input to {name}, which is deprecated and will result in an "
            f"error in a future release. To retain the behavior and silence this warning, please "
            f"use dropout instead. Note that {name} exists to provide channel-wise dropout on "
            f"inputs with {nd} spatial dimensions, a channel dimension, and an optional batch "
            f"dimension (i.e. {nd + 1}D or {nd + 2}D inputs).", stacklevel=3)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, H, W) input.

    As torch 2.13: a 3-D input is read as (N, C, L) (channel-wise 1-D dropout, with torch's
    warning), not as an unbatched (C, H, W); other ranks than 3/4 warn and use dims 0/1 as N/C."""
    _check_p(p, "dropout2d")
    _warn_feature_rank(input, 2, "dropout2d")
    if input.dim() == 3:
        warnings.warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D "
            "dropout behavior is desired - input is interpreted as shape (N, C, L), where C is "
            "the channel dim. This behavior will change in a future release to interpret the "
            "input as one without a batch dimension, i.e. shape (C, H, W). To maintain the 1D "
            "channel-wise dropout behavior, please switch to using dropout1d instead.",
            stacklevel=2)
    return _feature_dropout(input, p, training, inplace, "dropout2d")


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, D, H, W) or unbatched (C, D, H, W) input.

    Other ranks warn (as torch); a non-5-D input gets a batch dim added, so its dim 0 is C."""
    _check_p(p, "dropout3d")
    _warn_feature_rank(input, 3, "dropout3d")
    if input.dim() == 5:
        return _feature_dropout(input, p, training, inplace, "dropout3d")
    return _unbatched_feature_dropout(input, p, training, inplace, "dropout3d")


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Dropout that keeps the self-normalising property of SELU; ``p=1`` gives zeros (as torch).

    Raises EmberValueError for ``p`` outside [0, 1]."""
    _check_p(p, "alpha_dropout")
    if not training or p == 0:
        return input
    if p == 1:
        out = G.mul(input, 0.0)
        return input.copy_(out) if inplace else out
    alpha = -1.7580993408473766
    keep = G.ge(G.rand(tuple(input.shape), resolve(None), np.dtype(np.float64)), p)
    a = 1.0 / math.sqrt((alpha * alpha * p + 1) * (1 - p))
    b = -a * alpha * p
    dt = input._data.dtype
    out = G.add(G.mul(G.where(keep, input, alpha), a), b)
    out = G.to(out, dt, False) if out._data.dtype != dt else out
    return input.copy_(out) if inplace else out


# ---------------------------------------------------------------------------- sparse / linear
def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """Rows of ``weight`` picked by the integer ``input``; ``padding_idx`` rows get no gradient;
    ``max_norm`` renormalises the picked rows in place first."""
    if padding_idx is not None:
        n = weight.shape[0]
        if padding_idx > 0 and padding_idx >= n or padding_idx < 0 and padding_idx < -n:
            raise ValueError("Padding_idx must be within num_embeddings")
        if padding_idx < 0:
            padding_idx = n + padding_idx
    if max_norm is not None:
        with no_grad():  # torch's embedding_renorm_, in spec ops (a trace renormalises too)
            flat = G.reshape(input, (-1,))
            rows = G.index_select(weight, 0, flat)
            norms = G.norm(rows, norm_type, (1,), True)
            scale = G.where(G.gt(norms, max_norm), G.div(max_norm, G.add(norms, 1e-7)), 1.0)
            G.scatter_(weight, 0, G.expand(G.unsqueeze(flat, 1), tuple(rows.shape)),
                       G.mul(rows, scale))
    return G.embedding(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq,
                       sparse)


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False,
                  mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
                  padding_idx=None):
    """Sums / means / maxes of embedding rows per bag (2-d input, or 1-d input with offsets)."""
    idx, n = getattr(input, "_data", None), weight.shape[0]
    if idx is not None and idx.size and (idx.min() < 0 or idx.max() >= n):
        k = int(np.argmax((idx.reshape(-1) < 0) | (idx.reshape(-1) >= n)))
        raise EmberRuntimeError(f"embedding_bag: Index {k} of input takes value "
                                f"{idx.reshape(-1)[k]} which is not in the valid range [0, {n})")
    if input.dim() == 2:
        emb = embedding(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq)
        if per_sample_weights is not None:
            emb = G.mul(emb, G.unsqueeze(per_sample_weights, -1))
        if padding_idx is not None:  # as torch: padding entries are left out of their bag
            valid = G.unsqueeze(G.ne(input, padding_idx % weight.shape[0]), -1)
            if mode == "max":
                m = G.amax(G.where(valid, emb, float("-inf")), (1,), False)
                return G.where(G.any(valid, (1,), False), m, 0.0)
            total = G.sum(G.where(valid, emb, 0.0), (1,), False)
            if mode == "sum":
                return total
            count = G.sum(G.to(valid, emb._data.dtype, False), (1,), False)
            return G.div(total, G.clamp(count, 1.0, None))
        if mode == "sum":
            return G.sum(emb, (1,), False)
        if mode == "mean":
            return G.mean(emb, (1,), False)
        return G.amax(emb, (1,), False)
    # 1-d input: the bag of each element comes from ``offsets`` through ops (a trace follows
    # new offsets); elements before offsets[0] or, with include_last_offset, from the last
    # offset on belong to no bag
    if input.dim() != 1 or offsets is None or offsets.dim() != 1:
        raise ValueError(f"embedding_bag: expected a 2-d input, or a 1-d input with 1-d offsets; "
                         f"got input of shape {list(input.shape)} and offsets "
                         f"{'None' if offsets is None else list(offsets.shape)}")
    n, nb = input.shape[0], offsets.shape[0] - (1 if include_last_offset else 0)
    if mode == "max" and nb * n * weight.shape[1] > _BAG_MAX_DENSE:
        return _embedding_bag_max_loop(input, weight, offsets, max_norm, norm_type,
                                       per_sample_weights, include_last_offset, padding_idx)
    it = offsets._data.dtype
    starts = G.narrow(offsets, 0, 0, nb) if include_last_offset else offsets
    pos = G.arange(0, n, 1, it)
    # bag of element i: (number of bag starts <= i) - 1, a cumulative sum of start marks
    marks = G.index_add(G.zeros((n + 1,), it), 0, starts, G.ones((nb,), it))
    bag = G.sub(G.cumsum(G.narrow(marks, 0, 0, n), 0), 1)
    member = G.ge(bag, 0)
    if include_last_offset:
        member = G.logical_and(member, G.lt(pos, G.narrow(offsets, 0, nb, 1)))
    if padding_idx is not None:  # as torch: padding entries are left out of their bag
        member = G.logical_and(member, G.ne(input, padding_idx % weight.shape[0]))
    bag = G.clamp(bag, 0, None)
    e = embedding(input, weight, padding_idx, max_norm, norm_type)
    if per_sample_weights is not None:
        e = G.mul(e, G.unsqueeze(per_sample_weights, -1))
    dt = e._data.dtype
    keep = G.unsqueeze(G.to(member, dt, False), 1)
    count = G.index_add(G.zeros((nb,), dt), 0, bag, G.squeeze(keep, 1))
    if mode == "max":  # (bags, elements, dim): the max over each bag's members, 0 when empty
        ids = G.unsqueeze(G.arange(0, nb, 1, bag._data.dtype), 1)
        inbag = G.logical_and(G.eq(G.unsqueeze(bag, 0), ids), G.unsqueeze(member, 0))
        m = G.amax(G.where(G.unsqueeze(inbag, 2), G.unsqueeze(e, 0), float("-inf")), (1,), False)
        return G.where(G.unsqueeze(G.gt(count, 0), 1), m, 0.0)
    total = G.index_add(G.zeros((nb, weight.shape[1]), dt), 0, bag, G.mul(e, keep))
    if mode == "sum":
        return total
    return G.div(total, G.unsqueeze(G.clamp(count, 1.0, None), 1))


_BAG_MAX_DENSE = 1 << 24  # elements of the (bags, n, dim) tensor the traceable max mode builds


def _embedding_bag_max_loop(input, weight, offsets, max_norm, norm_type, per_sample_weights,
                            include_last_offset, padding_idx):
    """Max mode over bags too large for the dense form: one op per bag, the bag bounds read in
    Python (a trace freezes them and warns)."""
    offs = [int(o) for o in _read(offsets, "embedding_bag", "mode='max' on more than "
                                  f"{_BAG_MAX_DENSE} bag elements reads the offsets")]
    if not include_last_offset:
        offs = offs + [input.shape[0]]
    bags = []
    for a, b in zip(offs[:-1], offs[1:]):
        if b == a:
            bags.append(G.mul(G.sum(weight, (0,), False), 0.0))
            continue
        e = embedding(input[a:b], weight, padding_idx, max_norm, norm_type)
        if per_sample_weights is not None:
            e = G.mul(e, G.unsqueeze(per_sample_weights[a:b], -1))
        bags.append(G.amax(e, (0,), False))
    return G.stack(bags, 0)


def linear(input, weight, bias=None):
    """y = input @ weight.T + bias. Raises EmberRuntimeError where the input's dtype is not the
    weight's (torch does not promote them; backward formulas call G.linear, which does)."""
    _check_linear_dtypes(input, weight)
    return G.linear(input, weight, bias)


def _check_linear_dtypes(input, weight):
    """EmberRuntimeError unless tensors ``input`` and ``weight`` have one dtype (or autocast
    casts them), as torch's linear; anything else passes to the op's own checks."""
    x, w = getattr(input, "_data", None), getattr(weight, "_data", None)
    if x is not None and w is not None and x.dtype != w.dtype and STATE.autocast is None:
        raise EmberRuntimeError(f"linear: mat1 and mat2 must have the same dtype, but got "
                                f"{x.dtype} and "
                                f"{w.dtype} (input and weight): cast the input (x.float(), "
                                f"x.double()) or the module (.to(dtype)) so that they match")


def bilinear(input1, input2, weight, bias=None):
    """y[..., o] = input1[..., i] weight[o, i, j] input2[..., j] + bias[o]."""
    lead = tuple(input1.shape[:-1])
    x1 = G.reshape(input1, (-1, input1.shape[-1]))
    x2 = G.reshape(input2, (-1, input2.shape[-1]))
    y = G.einsum("bi,oij,bj->bo", [x1, weight, x2])
    if bias is not None:
        y = G.add(y, bias)
    return G.reshape(y, lead + (weight.shape[0],))


def one_hot(tensor, num_classes=-1):
    """int64 class indices -> int64 one-hot of ``num_classes`` (max+1 when -1). Raises
    RuntimeError, with torch's messages, for another dtype, a negative class, a class not
    below ``num_classes``, and ``num_classes=-1`` on an empty tensor."""
    a = _check_read(tensor)
    if a.dtype != np.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if num_classes == -1:  # the output's shape comes from the data: a trace freezes it
        a = _read(tensor, "one_hot", "num_classes=-1 takes the class count from the data")
        if not a.size:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(a.max()) + 1
    if a.size and a.min() < 0:
        raise RuntimeError("Class values must be non-negative.")
    if a.size and a.max() >= num_classes:
        raise RuntimeError("Class values must be smaller than num_classes.")
    if STATE.tracer is None:
        # ones written into zeros, as torch: (32, 64) classes of 1000, 1.66 -> ~0.4 ms (the
        # comparison's bool array and its int64 copy cost two passes over the output)
        out = G.zeros(tuple(a.shape) + (int(num_classes),), np.dtype(np.int64))
        return G.scatter_(out, -1, G.unsqueeze(tensor, -1), 1)
    # traced: shape-free ops (the batch dimensions stay the input's)
    return G.eq(G.unsqueeze(tensor, -1), G.arange(0, num_classes, 1, a.dtype)).long()


# ---------------------------------------------------------------------------- activations
def _inplace(fn, input, inplace):
    """``fn(input)``, written into ``input`` when ``inplace``. While autograd records, ``fn``
    runs on a copy, so the values its backward saved are not the ones overwritten (as the
    spec's ``inplace_arg`` functions, and torch's in-place activations, which save the
    original input)."""
    if not inplace:
        return fn(input)
    return input.copy_(fn(input.clone() if getattr(input, "requires_grad", False) else input))


def relu(input, inplace=False):
    """max(input, 0)."""
    return G.relu_(input) if inplace else G.relu(input)


def relu_(input):
    return G.relu_(input)


def relu6(input, inplace=False):
    return _inplace(G.relu6, input, inplace)


# the spec ops of torch.nn.functional (namespace: functional in ember/ops/spec/: elu, leaky_relu,
# hardtanh, gelu, softplus, hardshrink, ...) are the generated functions, signature and defaults
# from the spec; a function this module defines by hand (linear, relu6, mish, ...) is its own
for _n in G.FUNCTIONAL:
    globals().setdefault(_n, getattr(G, _n))


def selu(input, inplace=False):
    return _inplace(G.selu, input, inplace)


def celu(input, alpha=1.0, inplace=False):
    return _inplace(lambda x: G.mul(G.elu(G.div(x, alpha), 1.0), alpha), input, inplace)


def prelu(input, weight):
    """max(0, x) + weight * min(0, x), weight broadcast over the channel dim."""
    w = weight
    if input.dim() >= 2 and weight.numel() > 1:
        w = G.reshape(weight, (-1,) + (1,) * (input.dim() - 2))
    elif input.dim() == 0 and weight.numel() == 1:  # keep a 0-d input's shape (torch)
        w = G.reshape(weight, ())
    return G.where(G.gt(input, 0), input, G.mul(w, input))


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    return _rrelu(input, lower, upper, training, inplace, None)


def _rrelu(input, lower, upper, training, inplace, generator):
    """rrelu drawing its training slopes from ``generator`` (torch.rrelu's argument)."""
    if not training:
        return leaky_relu(input, (lower + upper) / 2, inplace)
    a = G.uniform_like(input, lower, upper, resolve(generator))
    return _inplace(lambda x: G.where(G.ge(x, 0), x, G.mul(x, a)), input, inplace)


def silu(input, inplace=False):
    return _inplace(G.silu, input, inplace)


def mish(input, inplace=False):
    return _inplace(G.mish, input, inplace)


def hardtanh_(input, *args, **kwargs):
    """``hardtanh(input, min_val, max_val, inplace=True)``."""
    return G.hardtanh(input, *args, inplace=True, **kwargs)


def hardsigmoid(input, inplace=False):
    return _inplace(G.hardsigmoid, input, inplace)


def hardswish(input, inplace=False):
    return _inplace(G.hardswish, input, inplace)


def softshrink(input, lambd=0.5):
    return G.where(G.gt(input, lambd), G.sub(input, lambd),
                   G.where(G.lt(input, -lambd), G.add(input, lambd), 0.0))


def tanhshrink(input):
    return G.sub(input, G.tanh(input))


def threshold(input, threshold, value, inplace=False):
    return _inplace(lambda x: G.where(G.gt(x, threshold), x, value), input, inplace)


def sigmoid(input):
    return G.sigmoid(input)


def tanh(input):
    return G.tanh(input)


def logsigmoid(input):
    return G.logsigmoid(input)


def softsign(input):
    return G.softsign(input)


def glu(input, dim=-1):
    """a * sigmoid(b) for the two halves a, b of ``input`` along ``dim``."""
    if input.shape[dim] % 2:
        raise RuntimeError(f"glu: Halving dimension must be even, but dimension {dim} is size "
                           f"{input.shape[dim]}")
    a, b = G.chunk(input, 2, dim)
    return G.mul(a, G.sigmoid(b))


def _softmax_dim(ndim, name="softmax"):
    # (stacklevel: the caller's line, past the public wrapper ember.errors.public adds)
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call "
                  "to include dim=X as an argument.", stacklevel=4)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """exp(x) / sum(exp(x)) along ``dim``."""
    if dim is None:
        dim = _softmax_dim(input.dim())
    return G.softmax(input, dim, _np_dtype(dtype))


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _softmax_dim(input.dim(), "softmin")
    return G.softmax(G.neg(input), dim, _np_dtype(dtype))


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """log(softmax(x)) along ``dim``, computed stably."""
    if dim is None:
        dim = _softmax_dim(input.dim(), "log_softmax")
    return G.log_softmax(input, dim, _np_dtype(dtype))


def gumbel_softmax(logits, tau=1.0, hard=False, eps=1e-10, dim=-1):
    u = G.rand(tuple(logits.shape), resolve(None), np.dtype(np.float64))
    g = G.neg(G.log(G.neg(G.log(G.clamp(u, 1e-20, 1.0)))))
    y = G.softmax(G.div(G.add(logits, G.to(g, logits._data.dtype, False)), tau), dim, None)
    if not hard:
        return y
    hard_y = G.scatter(G.zeros_like(y), dim, G.argmax(y, dim, True), 1.0)
    return G.add(G.sub(hard_y, y.detach()), y)


def _np_dtype(dtype):
    if dtype is None:
        return None
    from ember import _dtype
    return _dtype.to_numpy_dtype(dtype)


# ---------------------------------------------------------------------------- shape helpers
def pad(input, pad, mode="constant", value=None):
    """Pad the last len(pad)//2 dims: (left, right, top, bottom, ...) like torch."""
    return G.pad(input, tuple(pad), mode, value)


def pixel_shuffle(input, upscale_factor):
    """(*, C*r*r, H, W) -> (*, C, H*r, W*r)."""
    return G.pixel_shuffle(input, upscale_factor)


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H*r, W*r) -> (*, C*r*r, H, W)."""
    return G.pixel_unshuffle(input, downscale_factor)


_INTERP_NEEDS = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}


def _interp_size(input, size, scale_factor, nd, recompute_scale_factor):
    """(output size, scales or None) as torch's F.interpolate computes them."""
    spatial = tuple(input.shape[2:])
    if size is not None and scale_factor is not None:
        raise EmberValueError("interpolate: only one of size or scale_factor should be defined")
    if size is not None:
        if recompute_scale_factor:
            raise EmberValueError("interpolate: recompute_scale_factor is not meaningful with "
                                  "an explicit size")
        if isinstance(size, (tuple, list)) and len(size) != nd:
            raise EmberValueError(f"interpolate: input and output must have the same number of "
                                  f"spatial dimensions, but got input with spatial dimensions "
                                  f"of {list(spatial)} and output size of {list(size)}")
        out, scales = _ntuple(size, nd, "size"), None
    else:
        if scale_factor is None:
            raise EmberValueError("interpolate: either size or scale_factor should be defined")
        sf = tuple(scale_factor) if isinstance(scale_factor, (tuple, list)) else \
            (scale_factor,) * nd
        if len(sf) != nd or not all(isinstance(f, (int, float, np.integer, np.floating))
                                    and not isinstance(f, bool) and math.isfinite(f) for f in sf):
            raise EmberValueError(f"interpolate: scale_factor must be {nd} finite number(s) for a "
                                  f"{nd + 2}-d input, got {scale_factor!r}")
        out = tuple(int(math.floor(float(s) * float(f))) for s, f in zip(spatial, sf))
        # torch maps coordinates with the given scale unless asked to recompute it from sizes
        scales = None if recompute_scale_factor else tuple(float(f) for f in sf)
    if not all(o > 0 for o in out):
        raise EmberRuntimeError(f"interpolate: input and output sizes should be greater than 0, "
                                f"but got input {list(spatial)} and output {list(out)}"
                                + ("" if size is not None else f" (scale_factor={scale_factor!r})"))
    return out, scales


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resize (N, C, *spatial) input with 1-3 spatial dims, as torch: modes 'nearest',
    'nearest-exact', 'linear' (3-d), 'bilinear' (4-d), 'bicubic' (4-d, A=-0.75), 'trilinear'
    (5-d), 'area'. A given ``scale_factor`` is used in the coordinate mapping unless
    ``recompute_scale_factor=True``. ``antialias=True`` (bilinear / bicubic, 4-d float input) is
    torch's antialiased resampling: when downsampling, the filter widens with the scale."""
    nd = input.dim() - 2
    modes = ("nearest", "linear", "bilinear", "bicubic", "trilinear", "area", "nearest-exact")
    if mode not in modes:
        raise UnsupportedError(f"interpolate: mode {mode!r} is not supported; expected one of "
                               f"{' | '.join(modes)}")
    if nd not in (1, 2, 3):
        raise UnsupportedError(f"interpolate: only 3-d, 4-d and 5-d inputs are supported (got "
                               f"{input.dim()}-d) for the modes: {' | '.join(modes)} "
                               f"(got {mode})")
    if mode in ("nearest", "nearest-exact", "area"):
        if align_corners is not None:
            raise EmberValueError("interpolate: align_corners option can only be set with the "
                                  "interpolating modes: linear | bilinear | bicubic | trilinear")
    elif _INTERP_NEEDS[mode] != nd:
        raise UnsupportedError(f"interpolate: got {input.dim()}-d input, but {mode} mode needs "
                               f"{_INTERP_NEEDS[mode] + 2}-d input")
    if antialias and not (mode in ("bilinear", "bicubic") and nd == 2):
        raise EmberValueError("interpolate: anti-alias option is restricted to bilinear and "
                              "bicubic modes and requires a 4-D tensor as input")
    out, scales = _interp_size(input, size, scale_factor, nd, recompute_scale_factor)
    kmode = {"bilinear": "linear", "trilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    if antialias:
        return G.interpolate_aa(input, out, kmode, bool(align_corners), scales)
    if kmode == "area":
        scales = None
    return G.interpolate_nd(input, out, kmode, bool(align_corners), scales)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` "
                  "instead.", stacklevel=3)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    warnings.warn("`nn.functional.upsample_nearest` is deprecated. Use "
                  "`nn.functional.interpolate` instead.", stacklevel=3)
    return interpolate(input, size, scale_factor, "nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    warnings.warn("`nn.functional.upsample_bilinear` is deprecated. Use "
                  "`nn.functional.interpolate` instead.", stacklevel=3)
    return interpolate(input, size, scale_factor, "bilinear", align_corners=True)


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """Sample input (N, C, H, W) or (N, C, D, H, W) at grid (N, H', W', 2) / (N, D', H', W', 3)
    of [-1, 1] coordinates (x, y[, z]), as torch: modes 'bilinear', 'nearest', 'bicubic' (4-d),
    padding 'zeros', 'border', 'reflection'; differentiable wrt input and grid."""
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise EmberValueError(f"grid_sample: expected mode to be 'bilinear', 'nearest' or "
                              f"'bicubic', but got: {mode!r}")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise EmberValueError(f"grid_sample: expected padding_mode to be 'zeros', 'border', or "
                              f"'reflection', but got: {padding_mode!r}")
    ish, gsh = tuple(input.shape), tuple(grid.shape)
    if input.dim() not in (4, 5) or grid.dim() != input.dim() or gsh[-1] != input.dim() - 2 \
            or gsh[0] != ish[0]:
        raise EmberRuntimeError(f"grid_sample: expected a 4-d or 5-d input (N, C, *S) and a grid "
                                f"(N, *S_out, {max(input.dim() - 2, 1)}) of the same batch size "
                                f"and dimensionality, got input {list(ish)} and grid {list(gsh)}")
    if mode == "bicubic" and input.dim() != 4:
        raise EmberRuntimeError(f"grid_sample: bicubic interpolation only supports 4-d input, got "
                                f"input {list(ish)}")
    if input.dtype != grid.dtype or input._data.dtype.kind != "f":
        raise EmberTypeError(f"grid_sample: expected input and grid of the same floating-point "
                             f"dtype, got {input.dtype} and {grid.dtype}")
    if min(ish[2:]) == 0:
        raise EmberRuntimeError(f"grid_sample: expected input to have non-empty spatial "
                                f"dimensions, got input {list(ish)}")
    return G.grid_sampler(input, grid, mode, padding_mode, bool(align_corners))


def affine_grid(theta, size, align_corners=None):
    """Sampling grid (N, H, W, 2) / (N, D, H, W, 3) of affine matrices theta (N, 2, 3) /
    (N, 3, 4) for an output of ``size`` (N, C, H, W) / (N, C, D, H, W), as torch."""
    size = [int(s) for s in size]
    if theta._data.dtype.kind != "f":
        raise EmberTypeError(f"affine_grid: expected theta to have floating point type, got "
                             f"{theta.dtype}")
    if len(size) not in (4, 5):
        raise UnsupportedError(f"affine_grid only supports 4-d and 5-d sizes, for 2-d and 3-d "
                               f"affine transforms, respectively; got size {size}")
    nd = len(size) - 2
    if tuple(theta.shape) != (size[0], nd, nd + 1):
        raise EmberValueError(f"affine_grid: expected a batch of {nd}-d affine matrices of shape "
                              f"Nx{nd}x{nd + 1} for size {size}, got {list(theta.shape)}")
    if min(size) <= 0:
        raise EmberValueError(f"affine_grid: expected non-zero, positive output size, got {size}")
    return G.affine_grid_generator(theta, size, bool(align_corners))


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """im2col: (N, C, H, W) -> (N, C*kh*kw, L) sliding blocks, (C, H, W) -> (C*kh*kw, L) (via a
    grouped convolution). Raises EmberRuntimeError for a bad input or geometry, in terms of the
    input (the convolution's weight is internal)."""
    x, unb = _batched(input, 2, "unfold")
    k = _ntuple(kernel_size, 2, "kernel_size")
    d = _ntuple(dilation, 2, "dilation")
    p = _ntuple(padding, 2, "padding")
    s = _ntuple(stride, 2, "stride")
    dt = x._data.dtype
    if dt == np.bool_:  # copies values only: exact through float64 (torch: bool, not int)
        return G.to(unfold(G.to(input, np.dtype(np.float64)), kernel_size, dilation, padding,
                           stride), dt)
    if dt not in (np.float32, np.float64):
        raise EmberTypeError(f"unfold: expected a float32 or float64 input, got {dt}")
    if min(k + d + s) <= 0 or min(p) < 0:
        raise EmberRuntimeError(f"unfold: kernel_size {k}, dilation {d} and stride {s} must be "
                                f"positive and padding {p} non-negative")
    spatial = tuple(x._data.shape[2:])
    blocks = tuple((n + 2 * pp - dd * (kk - 1) - 1) // ss + 1
                   for n, kk, dd, pp, ss in zip(spatial, k, d, p, s))
    if min(blocks) < 1:
        raise EmberRuntimeError(f"unfold: given input with spatial size {spatial}, "
                                f"kernel_size={k}, dilation={d}, padding={p}, calculated shape of "
                                f"the array of sliding blocks as {blocks}, but its components "
                                "must be at least one")
    kh, kw = k
    c = x._data.shape[1]
    if hasattr(STATE.tracer, "shape_read"):  # the kernel is built for c channels: guard c
        STATE.tracer.shape_read(x, (1,), "unfold", "the kernel is built for the channel count")
    eye = np.eye(kh * kw, dtype=dt).reshape(kh * kw, 1, kh, kw)
    w = _const(np.tile(eye, (c, 1, 1, 1)))
    y = G.conv2d(x, w, None, s, p, d, c)
    n_blocks = -1 if y._data.size else int(np.prod(blocks))  # an empty batch cannot infer -1
    y = G.reshape(y, (y.shape[0], c * kh * kw, n_blocks))
    return G.squeeze(y, 0) if unb else y


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    return G.cosine_similarity(x1, x2, dim, eps)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    return G.norm(G.add(G.sub(x1, x2), eps), p, (-1,), keepdim)


# ---------------------------------------------------------------------------- losses
def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """Softmax cross entropy with class-index or class-probability targets."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    return G.cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing)


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """Negative log likelihood of log-probabilities ``input`` at class ``target``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    return G.nll_loss(input, target, weight, reduction, ignore_index)


def _weighted(loss_fn, input, target, reduction, weight, *extra):
    if weight is None:
        return loss_fn(input, target, reduction, *extra)
    loss = G.mul(loss_fn(input, target, "none", *extra), weight)
    if reduction == "mean":
        return G.mean(loss)
    if reduction == "sum":
        return G.sum(loss)
    return loss


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean squared error."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    return _weighted(G.mse_loss, input, target, reduction, weight)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean absolute error."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    return _weighted(G.l1_loss, input, target, reduction, weight)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """Quadratic below ``beta``, linear above (divided by beta)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    return G.smooth_l1_loss(input, target, reduction, beta)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """Quadratic below ``delta``, linear above (scaled by delta). Computed in ``input``'s
    floating dtype, as torch's (a wider target is rounded to it)."""
    return _weighted(G.huber_loss, input, _in_dtype_of(target, input), reduction, weight, delta)


def _in_dtype_of(a, ref):
    """``a`` in ``ref``'s dtype when both are floating tensors of different dtypes, else ``a``
    (the losses whose torch kernels compute in one operand's dtype)."""
    if isinstance(a, Tensor) and isinstance(ref, Tensor) and a.dtype != ref.dtype and \
            a.dtype.is_floating_point and ref.dtype.is_floating_point:
        return a.to(ref.dtype)
    return a


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    """Binary cross entropy of probabilities ``input``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    return G.binary_cross_entropy(input, target, weight, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    """Binary cross entropy of logits ``input`` (stable), computed in ``target``'s floating
    dtype, as torch's (float64 logits with a float32 target give a float32 loss)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    return G.binary_cross_entropy_with_logits(_in_dtype_of(input, target), target, weight,
                                              reduction, pos_weight)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """KL divergence with log-probabilities ``input``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the "
                      "support size.'batchmean' divides only by the batch size, and aligns with "
                      "the KL div math definition.", stacklevel=2)
    return G.kl_div(input, target, reduction, log_target)


def _reduce(loss, reduction):
    if reduction == "mean":
        return G.mean(loss)
    if reduction == "sum":
        return G.sum(loss)
    if reduction == "none":
        return loss
    raise ValueError(f"{reduction} is not a valid value for reduction")


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8,
                     reduce=None, reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if log_input:
        loss = G.sub(G.exp(input), G.mul(target, input))
    else:
        loss = G.sub(input, G.mul(target, G.log(G.add(input, eps))))
    if full:  # Stirling's term t*log(t) - t + 0.5*log(2*pi*t), where t > 1
        big = G.gt(target, 1)
        t1 = G.where(big, target, 1.0)
        st = G.add(G.sub(G.mul(target, G.log(t1)), target), G.mul(G.log(G.mul(t1, 2 * math.pi)),
                                                                  0.5))
        loss = G.add(loss, G.where(big, st, 0.0))
    return _reduce(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """As torch: a ``var`` of input's shape without its last dim gets one there; var is
    clamped to ``eps`` outside autograd (its gradient passes through the clamp)."""
    ishape, vshape = tuple(input.shape), tuple(var.shape)
    if vshape != ishape:
        if ishape[:-1] == vshape:
            var = G.unsqueeze(var, -1)
        elif not (ishape[:-1] == vshape[:-1] and vshape[-1:] == (1,)):
            raise EmberValueError(f"gaussian_nll_loss: var of shape {list(vshape)} does not fit "
                                  f"input of shape {list(ishape)}")
    if bool(np.any(_check_read(var) < 0)):
        raise EmberValueError("gaussian_nll_loss: var has negative entry/entries")
    with no_grad():
        lift = G.sub(G.clamp(var, eps, None), var)
    var = G.add(var, lift)
    loss = G.mul(G.add(G.log(var), G.div(G.square(G.sub(input, target)), var)), 0.5)
    if full:
        loss = G.add(loss, 0.5 * math.log(2 * math.pi))
    return _reduce(loss, reduction)


def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                        reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    loss = G.clamp(G.add(G.mul(G.neg(target), G.sub(input1, input2)), margin), 0.0, None)
    return _reduce(loss, reduction)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,
                         reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    # as torch: a target that is neither 1 nor -1 takes both terms
    pos = G.where(G.ne(target, -1), input, 0.0)
    neg = G.where(G.ne(target, 1), G.clamp(G.sub(margin, input), 0.0, None), 0.0)
    return _reduce(G.add(pos, neg), reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    return _reduce(G.softplus(G.neg(G.mul(target, input)), 1.0, 20.0), reduction)


def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                          reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    cos = G.cosine_similarity(input1, input2, 1 if input1.dim() > 1 else 0, 1e-8)
    loss = G.where(G.eq(target, 1), G.sub(1.0, cos), G.clamp(G.sub(cos, margin), 0.0, None))
    return _reduce(loss, reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    loss = G.neg(G.add(G.mul(target, G.logsigmoid(input)),
                       G.mul(G.sub(1.0, target), G.logsigmoid(G.neg(input)))))
    if weight is not None:
        loss = G.mul(loss, weight)
    loss = G.mean(loss, (-1,), False)
    return _reduce(loss, reduction)


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None,
                      reduce=None, reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    x = input if input.dim() > 1 else G.reshape(input, (1, -1))  # 0-d: one class
    t = target if target.dim() > 0 else G.unsqueeze(target, 0)
    xy = G.gather(x, 1, G.unsqueeze(t, 1))
    m = G.clamp(G.add(G.sub(margin, xy), x), 0.0, None)
    if p == 2:
        m = G.mul(m, m)
    if weight is not None:
        m = G.mul(m, G.unsqueeze(G.index_select(weight, 0, t), 1))
    m = G.scatter(m, 1, G.unsqueeze(t, 1), 0.0)  # the target class does not count
    loss = G.mean(m, (1,), False)
    if input.dim() <= 1:
        loss = G.squeeze(loss, 0)
    return _reduce(loss, reduction)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = G.minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return _reduce(G.clamp(G.add(G.sub(d_pos, d_neg), margin), 0.0, None), reduction)


# ---------------------------------------------------------------------------- attention
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """softmax(q k^T * scale + mask) v over the last two dims. ``attn_mask`` is a bool mask
    (True = attend), an additive float mask or a ``nn.attention.bias.CausalBias``; a fully
    masked row gives zeros (as torch).

    float32/float64 inputs whose batch dims match (after ``enable_gqa``'s repeat) run the fused
    kernel (ember/kernels/attention.py: it keeps one score buffer and each row's log-sum-exp,
    the backward recomputes the probabilities); dropout then draws its mask as ``dropout`` on
    the probabilities would (the same generator calls, so the same result). Others run
    ``autograd.formulas.attention_probs`` and a matmul."""
    from ember.autograd.formulas import attention_probs
    from ember.nn import attention
    if isinstance(attn_mask, attention.bias.CausalBias):   # torch: CausalBias.__torch_function__
        return attn_mask._dispatch(query, key, value, attn_mask, dropout_p, is_causal, scale,
                                   enable_gqa)
    if not query.dtype == key.dtype == value.dtype:
        raise EmberRuntimeError(f"Expected query, key, and value to have the same dtype, but got "
                                f"query.dtype: {query.dtype} key.dtype: {key.dtype} and "
                                f"value.dtype: {value.dtype} instead.")
    if attn_mask is not None and attn_mask.dtype not in (_dtype.bool_, _dtype.float32,
                                                         query.dtype):
        raise EmberRuntimeError(f"Expected attn_mask dtype to be bool or float or to match query "
                                f"dtype, but got attn_mask.dtype: {attn_mask.dtype} and  "
                                f"query.dtype: {query.dtype} instead.")
    if not attention.viable():
        raise EmberRuntimeError("scaled_dot_product_attention: no viable backend (the "
                                "sdpa_kernel region allows neither MATH nor FLASH_ATTENTION, "
                                "the backends ember's CPU kernel stands for)")
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    if enable_gqa and query.shape[-3] != key.shape[-3]:
        rep = query.shape[-3] // key.shape[-3]
        key = G.repeat_interleave(key, rep, -3) if hasattr(G, "repeat_interleave") else \
            G.reshape(G.expand(G.unsqueeze(key, -3), tuple(key.shape[:-2]) + (rep,) +
                               tuple(key.shape[-2:])), tuple(query.shape[:-2]) +
                      tuple(key.shape[-2:]))
        value = G.reshape(G.expand(G.unsqueeze(value, -3), tuple(value.shape[:-2]) + (rep,) +
                                   tuple(value.shape[-2:])),
                          tuple(query.shape[:-3]) + (query.shape[-3],) + tuple(value.shape[-2:]))
    if is_causal and attn_mask is not None:
        raise EmberRuntimeError("scaled_dot_product_attention: explicit attn_mask should not be "
                                "set when is_causal=True")
    dt = query._data.dtype
    if dt in _SDPA_FUSED_DTYPES and key._data.dtype == dt and value._data.dtype == dt and \
            query.dim() >= 2 and tuple(query.shape[:-2]) == tuple(key.shape[:-2]) == \
            tuple(value.shape[:-2]) and _sdpa_mask_fits(attn_mask, query, key, dt):
        drop = None
        if dropout_p > 0.0:
            _check_p(dropout_p, "scaled_dot_product_attention")
            shape = tuple(query.shape[:-1]) + (key.shape[-2],)
            drop = G.native_dropout(G.ones(shape, dt), dropout_p, True, resolve(None))[1]
        return G.scaled_dot_product_attention_fused(query, key, value, attn_mask, drop,
                                                    bool(is_causal), float(scale))[0]
    attn = attention_probs(query, key, attn_mask, is_causal, scale)
    if dropout_p > 0.0:
        attn = dropout(attn, dropout_p, True)
    return G.matmul(attn, value)


_SDPA_FUSED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _sdpa_mask_fits(mask, query, key, dt):
    """The fused kernel's masks: None, or bool / ``dt`` broadcasting to the scores' shape
    without widening it."""
    if mask is None:
        return True
    if mask._data.dtype not in (np.dtype(np.bool_), dt):
        return False
    scores = tuple(query.shape[:-1]) + (key.shape[-2],)
    try:
        return tuple(np.broadcast_shapes(scores, tuple(mask.shape))) == scores
    except ValueError:
        return False


def _in_projection_packed(q, k, v, w, b=None):
    E = q.shape[-1]
    if k is v and q is k:
        proj = linear(q, w, b)
        return tuple(G.chunk(proj, 3, -1))
    wq, wk, wv = G.chunk(w, 3, 0)
    bq = bk = bv = None
    if b is not None:
        bq, bk, bv = G.chunk(b, 3, 0)
    del E
    return linear(q, wq, bq), linear(k, wk, bk), linear(v, wv, bv)


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight,
                                 in_proj_bias, bias_k, bias_v, add_zero_attn, dropout_p,
                                 out_proj_weight, out_proj_bias, training=True,
                                 key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, static_k=None,
                                 static_v=None, average_attn_weights=True, is_causal=False):
    """torch's multi-head attention on (L, N, E) inputs (or unbatched (L, E)); returns
    (output, attention weights or None)."""
    unbatched = query.dim() == 2
    if unbatched:
        query, key, value = (G.unsqueeze(t, 1) for t in (query, key, value))
        if key_padding_mask is not None:
            key_padding_mask = G.unsqueeze(key_padding_mask, 0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    if embed_dim != embed_dim_to_check:
        raise EmberRuntimeError(f"multi_head_attention_forward: was expecting embedding "
                                f"dimension of {embed_dim_to_check}, but got {embed_dim}")
    head_dim = embed_dim // num_heads
    if not use_separate_proj_weight:
        q, k, v = _in_projection_packed(query, key, value, in_proj_weight, in_proj_bias)
    else:
        bq = bk = bv = None
        if in_proj_bias is not None:
            bq, bk, bv = G.chunk(in_proj_bias, 3, 0)
        q, k, v = (linear(query, q_proj_weight, bq), linear(key, k_proj_weight, bk),
                   linear(value, v_proj_weight, bv))
    if is_causal and attn_mask is None:
        attn_mask = G.logical_not(G.tril(G.ones((tgt_len, src_len), np.dtype(np.bool_)), 0))
    if bias_k is not None and bias_v is not None:
        k = G.cat([k, G.expand(G.reshape(bias_k, (1, 1, embed_dim)), (1, bsz, embed_dim))], 0)
        v = G.cat([v, G.expand(G.reshape(bias_v, (1, 1, embed_dim)), (1, bsz, embed_dim))], 0)
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))
    # (L, N, E) -> (N, H, L, D)
    q = G.permute(G.reshape(q, (tgt_len, bsz, num_heads, head_dim)), (1, 2, 0, 3))
    k = G.permute(G.reshape(k, (k.shape[0], bsz, num_heads, head_dim)), (1, 2, 0, 3))
    v = G.permute(G.reshape(v, (v.shape[0], bsz, num_heads, head_dim)), (1, 2, 0, 3))
    if add_zero_attn:
        z = G.zeros((bsz, num_heads, 1, head_dim), q._data.dtype)
        k, v = G.cat([k, z], 2), G.cat([v, z], 2)
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))
    s_len = k.shape[2]
    scores = G.mul(G.matmul(q, G.transpose(k, -2, -1)), 1.0 / math.sqrt(head_dim))
    if attn_mask is not None:
        m = attn_mask if attn_mask.dim() == 2 else G.reshape(
            attn_mask, (bsz, num_heads, tgt_len, s_len))
        if m._data.dtype == np.bool_:
            scores = G.masked_fill(scores, m, float("-inf"))
        else:
            scores = G.add(scores, m)
    if key_padding_mask is not None:
        kpm = G.reshape(key_padding_mask, (bsz, 1, 1, s_len))
        if kpm._data.dtype == np.bool_:
            scores = G.masked_fill(scores, kpm, float("-inf"))
        else:
            scores = G.add(scores, kpm)
    attn = G.softmax(scores, -1, None)
    if not need_weights and (attn_mask is not None or key_padding_mask is not None):
        # torch runs scaled_dot_product_attention here, whose softmax gives a query that sees
        # no key zeros (the explicit softmax above: NaN, which need_weights=True returns)
        attn = G.where(G.all(G.eq(scores, float("-inf")), -1, True), 0.0, attn)
    if dropout_p > 0.0 and training:
        attn = dropout(attn, dropout_p, True)
    out = G.matmul(attn, v)  # (N, H, L, D)
    out = G.reshape(G.permute(out, (2, 0, 1, 3)), (tgt_len, bsz, embed_dim))
    out = linear(out, out_proj_weight, out_proj_bias)
    weights = None
    if need_weights:
        weights = G.mean(attn, (1,), False) if average_attn_weights else attn
        if unbatched:
            weights = G.squeeze(weights, 0)
    if unbatched:
        out = G.squeeze(out, 1)
    return out, weights


# ------------------------------------------ shuffles, distances, unpooling, fold, fractional pools
def _shape_guard(t, dims, op, why):
    """``t``'s sizes ``dims`` for a constant built in Python: a trace guards them."""
    tracer = STATE.tracer
    if tracer is not None and hasattr(tracer, "shape_read"):
        tracer.shape_read(t, dims, op, why)
    return tuple(t._data.shape[d] for d in dims)


def channel_shuffle(input, groups):
    """(N, C, *) channels regrouped as (N, groups, C/groups, *) transposed (ShuffleNet)."""
    if input.dim() < 3:
        raise EmberRuntimeError(f"channel_shuffle: expected an input of at least 3 dimensions, "
                                f"got shape {list(input.shape)}")
    c = input.shape[1]
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups <= 0 \
            or c % groups:
        raise EmberRuntimeError(f"channel_shuffle: groups must be a positive divisor of the "
                                f"channel count {c}, got {groups!r}")
    n, rest = input.shape[0], tuple(input.shape[2:])
    x = G.reshape(input, (n, int(groups), c // int(groups)) + rest)
    return G.reshape(G.transpose(x, 1, 2), (n, c) + rest)


native_channel_shuffle = channel_shuffle


def pdist(input, p=2):
    """p-norm distances between the rows of input (N, M): the N*(N-1)/2 pairs i < j, in order."""
    if input.dim() != 2:
        raise EmberRuntimeError(f"pdist: expected a 2-d input (N, M), got shape "
                                f"{list(input.shape)}")
    if p < 0:
        raise EmberRuntimeError(f"pdist: p must be non-negative, got {p}")
    (n,) = _shape_guard(input, (0,), "pdist", "the pair index arrays")
    i, j = np.triu_indices(n, 1)
    d = G.sub(G.index_select(input, 0, _const(i.astype(np.int64))),
              G.index_select(input, 0, _const(j.astype(np.int64))))
    if p == 0:  # the count of differing entries: gradient 0 (as torch)
        return G.sum(G.where(G.ne(d, 0.0), 1.0, G.mul(d, 0.0)), (-1,), False)
    return G.norm(d, p, (-1,), False)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin=1.0, swap=False, reduction="mean"):
    """max(d(a, p) - d(a, n) + margin, 0) with ``distance_function`` (default
    pairwise_distance); ``swap`` uses min(d(a, n), d(p, n))."""
    if margin <= 0:
        raise EmberValueError(f"triplet_margin_with_distance_loss: margin must be greater than "
                              f"0, got {margin}")
    dims = (anchor.dim(), positive.dim(), negative.dim())
    if len(set(dims)) != 1:
        raise EmberRuntimeError(f"triplet_margin_with_distance_loss: the anchor, positive and "
                                f"negative tensors must have the same number of dimensions, got "
                                f"{dims}")
    dist = pairwise_distance if distance_function is None else distance_function
    dp, dn = dist(anchor, positive), dist(anchor, negative)
    if swap:
        dn = G.minimum(dn, dist(positive, negative))
    return _reduce(G.clamp_min(G.add(G.sub(dp, dn), margin), 0.0), reduction)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """sum over listed targets j and unlisted classes i of max(0, 1 - (x[j] - x[i])) / C; the
    target (C) or (N, C) int64 lists class indices up to the first -1."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if input.dim() not in (0, 1, 2) or tuple(target.shape) != tuple(input.shape):
        raise EmberRuntimeError(f"multilabel_margin_loss: expected input (C) or (N, C) and a "
                                f"target of the same shape, got input {list(input.shape)} and "
                                f"target {list(target.shape)}")
    if target._data.dtype != np.int64:
        raise EmberTypeError(f"multilabel_margin_loss: expected an int64 target, got "
                             f"{target.dtype}")
    unb = input.dim() < 2
    x = G.reshape(input, (1, -1)) if unb else input  # a 0-d input is one class
    t = G.reshape(target, (1, -1)) if unb else target
    dt = x._data.dtype
    c = x.shape[1]
    listed = G.cumprod(G.to(G.ne(t, -1), np.dtype(np.int64), False), 1)  # before the first -1
    hits = G.eq(G.unsqueeze(t, -1), G.arange(0, c, 1, np.dtype(np.int64)))  # (N, K, C)
    counts = G.sum(G.mul(G.to(hits, dt, False), G.unsqueeze(G.to(listed, dt, False), -1)),
                   (1,), False)  # times each class is listed
    other = G.to(G.eq(counts, 0.0), dt, False)
    z = relu(G.add(G.sub(G.unsqueeze(x, 1), G.unsqueeze(x, 2)), 1.0))  # z[n, j, i]
    w = G.mul(G.unsqueeze(counts, 2), G.unsqueeze(other, 1))
    loss = G.div(G.sum(G.mul(z, w), (1, 2), False), float(c))
    if unb:
        loss = G.squeeze(loss, 0)
    return _reduce(loss, reduction)


def _max_unpool(input, indices, kernel_size, stride, padding, output_size, nd, op):
    x, unb = _batched(input, nd, op)
    idx = G.unsqueeze(indices, 0) if unb else indices
    if tuple(idx.shape) != tuple(x.shape) or idx._data.dtype != np.int64:
        raise EmberRuntimeError(f"{op}: expected int64 indices of the input's shape "
                                f"{list(input.shape)}, got {indices.dtype} {list(indices.shape)}")
    k, s = _ntuple(kernel_size, nd), _stride(stride, kernel_size, nd)
    p = _ntuple(padding, nd)
    spatial = tuple(x.shape[2:])
    default = tuple((spatial[i] - 1) * s[i] - 2 * p[i] + k[i] for i in range(nd))
    if output_size is None:
        out = default
    else:
        out = tuple(int(o) for o in output_size)
        if len(out) == nd + 2:
            out = out[2:]
        if len(out) != nd:
            raise EmberValueError(f"{op}: output_size should be a sequence of {nd} or {nd + 2} "
                                  f"elements, got {list(output_size)}")
        for i in range(nd):
            if not default[i] - s[i] < out[i] < default[i] + s[i]:
                raise EmberValueError(f"{op}: invalid output_size {list(out)} (dim {i} must be "
                                      f"between {default[i] - s[i]} and {default[i] + s[i]})")
    n, c = x.shape[:2]
    plane = int(np.prod(out))
    zeros = G.zeros((n, c, plane), x._data.dtype)
    y = G.scatter(zeros, 2, G.reshape(idx, (n, c, -1)), G.reshape(x, (n, c, -1)))
    y = G.reshape(y, (n, c) + out)
    return G.squeeze(y, 0) if unb else y


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of max_pool1d: values put back at their argmax positions."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 1,
                       "max_unpool1d")


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of max_pool2d: values put back at their argmax positions."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 2,
                       "max_unpool2d")


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of max_pool3d: values put back at their argmax positions."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 3,
                       "max_unpool3d")


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """col2im, the adjoint of unfold: (N, C*kh*kw, L) -> (N, C, H, W) summing overlapping
    blocks (via a grouped transposed convolution)."""
    if input.dim() not in (2, 3):
        raise EmberRuntimeError(f"fold: expected a 2-d (unbatched) or 3-d (batched) input, got "
                                f"shape {list(input.shape)}")
    unb = input.dim() == 2
    x = G.unsqueeze(input, 0) if unb else input
    out = _ntuple(output_size, 2, "output_size")
    k = _ntuple(kernel_size, 2, "kernel_size")
    d, p, s = _ntuple(dilation, 2, "dilation"), _ntuple(padding, 2, "padding"), \
        _ntuple(stride, 2, "stride")
    if min(k + d + s) <= 0 or min(p) < 0:
        raise EmberRuntimeError(f"fold: kernel_size {k}, dilation {d} and stride {s} must be "
                                f"positive and padding {p} non-negative")
    dt = x._data.dtype
    if dt not in (np.float32, np.float64):
        raise EmberTypeError(f"fold: expected a float32 or float64 input, got {dt}")
    n, ck, length = _shape_guard(x, (0, 1, 2), "fold", "the block layout")
    kk = k[0] * k[1]
    blocks = tuple((out[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(2))
    if ck % kk or blocks[0] * blocks[1] != length or min(blocks) < 1:
        raise EmberRuntimeError(f"fold: expected an input of size (N, C*{kk}, "
                                f"{blocks[0] * blocks[1]}) for output_size {list(out)}, "
                                f"kernel_size {list(k)}, dilation {list(d)}, padding {list(p)}, "
                                f"stride {list(s)}; got {list(x.shape)}")
    c = ck // kk
    eye = np.eye(kk, dtype=dt).reshape(kk, 1, k[0], k[1])
    w = _const(np.tile(eye, (c, 1, 1, 1)))
    cover = tuple((blocks[i] - 1) * s[i] - 2 * p[i] + d[i] * (k[i] - 1) + 1 for i in range(2))
    op = tuple(out[i] - cover[i] for i in range(2))
    y = G.conv_transpose2d(G.reshape(x, (n, ck) + blocks), w, None, s, p, op, c, d)
    return G.squeeze(y, 0) if unb else y


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """alpha_dropout of whole channels (N, C, *) (a mask of shape (N, C, 1, ...))."""
    _check_p(p, "feature_alpha_dropout")
    if not training or p == 0:
        return input
    if input.dim() < 2:
        raise EmberRuntimeError(f"feature_alpha_dropout: feature dropout requires at least 2 "
                                f"dimensions in the input, got shape {list(input.shape)}")
    if p == 1:
        out = G.mul(input, 0.0)
        return input.copy_(out) if inplace else out
    alpha = -1.7580993408473766
    mshape = tuple(input.shape[:2]) + (1,) * (input.dim() - 2)
    keep = G.ge(G.rand(mshape, resolve(None), np.dtype(np.float64)), p)
    a = 1.0 / math.sqrt((alpha * alpha * p + 1) * (1 - p))
    dt = input._data.dtype
    out = G.add(G.mul(G.where(keep, input, alpha), a), -a * alpha * p)
    out = G.to(out, dt, False) if out._data.dtype != dt else out
    return input.copy_(out) if inplace else out


def _fractional_max_pool(input, kernel_size, output_size, output_ratio, return_indices,
                         _random_samples, nd, op):
    if output_size is None and output_ratio is None:
        raise EmberValueError(f"{op} requires specifying either an output_size or an "
                              f"output_ratio")
    x, unb = _batched(input, nd, op)
    k = _ntuple(kernel_size, nd, "kernel_size")
    spatial = tuple(x.shape[2:])
    if output_size is None:
        ratio = tuple(float(r) for r in output_ratio) if isinstance(output_ratio, (
            tuple, list)) else (float(output_ratio),) * nd
        if len(ratio) == 1:
            ratio = ratio * nd
        if not all(0 < r < 1 for r in ratio):
            raise EmberValueError(f"{op}: output_ratio must be between 0 and 1 (exclusive), got "
                                  f"{output_ratio!r}")
        out = tuple(int(spatial[i] * ratio[i]) for i in range(nd))
    else:
        out = _ntuple(output_size, nd, "output_size")
    if _random_samples is None:
        samples = G.rand((x.shape[0], x.shape[1], nd), resolve(None), x._data.dtype)
    else:
        samples = _random_samples
    y, idx = getattr(G, op)(x, k, out, samples)
    if unb:
        y, idx = G.squeeze(y, 0), G.squeeze(idx, 0)
    return (y, idx) if return_indices else y


def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None,
                          return_indices=False, _random_samples=None):
    """Fractional max pooling over (N, C, H, W) or (C, H, W), as torch (random window starts
    drawn from ember's generator unless ``_random_samples`` (N, C, 2) is given)."""
    return _fractional_max_pool(input, kernel_size, output_size, output_ratio, return_indices,
                                _random_samples, 2, "fractional_max_pool2d")


def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None,
                          return_indices=False, _random_samples=None):
    """Fractional max pooling over (N, C, T, H, W) or (C, T, H, W), as torch."""
    return _fractional_max_pool(input, kernel_size, output_size, output_ratio, return_indices,
                                _random_samples, 3, "fractional_max_pool3d")


def fractional_max_pool2d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=False, _random_samples=None):
    return fractional_max_pool2d(input, kernel_size, output_size, output_ratio, True,
                                 _random_samples)


def fractional_max_pool3d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=False, _random_samples=None):
    return fractional_max_pool3d(input, kernel_size, output_size, output_ratio, True,
                                 _random_samples)


def conv_tbc(input, weight, bias, pad=0):
    """1-d convolution over time-batch-channel input (T, B, Cin) with weight (k, Cin, Cout)
    and bias (Cout), zero padding ``pad`` on both ends of time, as torch.conv_tbc."""
    if input.dim() != 3 or weight.dim() != 3 or bias.dim() != 1:
        raise EmberRuntimeError(f"conv_tbc: expected input (T, B, Cin), weight (k, Cin, Cout) "
                                f"and bias (Cout), got {list(input.shape)}, "
                                f"{list(weight.shape)} and {list(bias.shape)}")
    y = conv1d(G.permute(input, (1, 2, 0)), G.permute(weight, (2, 1, 0)), bias, 1, int(pad))
    return G.permute(y, (2, 0, 1))


def _lengths(v, op, name):
    if isinstance(v, Tensor):
        return [int(a) for a in np.asarray(_read(v, op, name)).reshape(-1)]
    if isinstance(v, (int, np.integer)):
        return [int(v)]
    return [int(a) for a in v]


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False):
    """Connectionist temporal classification loss of log_probs (T, N, C) (or (T, C)) against
    targets (N, S) padded or concatenated (sum(target_lengths),), as torch; 'mean' divides each
    sample's loss by its target length, then averages. The gradient is the derivative wrt
    log_probs (torch's backward assumes log_softmax inputs and adds softmax; the two agree on
    the gradient of the logits before a log_softmax)."""
    if reduction not in ("none", "mean", "sum"):
        raise EmberValueError(f"ctc_loss: {reduction!r} is not a valid value for reduction")
    unb = log_probs.dim() == 2
    lp = G.unsqueeze(log_probs, 1) if unb else log_probs
    tg = G.unsqueeze(targets, 0) if unb and targets.dim() == 1 else targets
    il = _lengths(input_lengths, "ctc_loss", "input lengths")
    tl = _lengths(target_lengths, "ctc_loss", "target lengths")
    nll, _ = G.ctc_loss_nll(lp, tg, il, tl, int(blank), bool(zero_infinity))
    if reduction == "none":
        return G.squeeze(nll, 0) if unb else nll
    if reduction == "sum":
        return G.sum(nll)
    div = _const(np.maximum(np.asarray(tl, nll._data.dtype), 1))
    return G.mean(G.div(nll, div))


def linear_cross_entropy(input, linear_weight, target, *, linear_bias=None, weight=None,
                         reduction="mean", ignore_index=None, label_smoothing=0.0, options=None):
    """cross_entropy(linear(input, linear_weight, linear_bias), target, ...) as torch's
    reference path; linear_weight (C, d1..dK, in) gives K-dimensional logits (N, C, d1..dK).
    ``options`` (torch's chunking strategy) changes only memory use in torch: ember computes
    the same values unchunked."""
    if input.dim() not in (1, 2):
        raise EmberRuntimeError(f"linear_cross_entropy: expected input with dimensionality 1 or "
                                f"2, got {input.dim()}")
    if linear_weight.dim() < 2:
        raise EmberRuntimeError(f"linear_cross_entropy: expected linear_weight with "
                                f"dimensionality at least 2, got {linear_weight.dim()}")
    wshape = tuple(linear_weight.shape)
    if input.shape[-1] != wshape[-1]:
        raise EmberRuntimeError(f"linear_cross_entropy: expected equal input and linear_weight "
                                f"last dimensions (in_features), got {input.shape[-1]} and "
                                f"{wshape[-1]}")
    c, out = wshape[0], wshape[1:-1]
    if linear_bias is not None and tuple(linear_bias.shape) != (c,) + out:
        raise EmberRuntimeError(f"linear_cross_entropy: expected linear_bias shape "
                                f"{(c,) + out}, got {tuple(linear_bias.shape)}")
    if out and input.dim() == 1:
        raise EmberRuntimeError(f"linear_cross_entropy: K-dimensional loss defined by "
                                f"linear_weight shape {wshape} requires batched input")
    lead = tuple(input.shape[:-1])
    w2 = G.reshape(linear_weight, (-1, wshape[-1]))
    b2 = G.reshape(linear_bias, (-1,)) if linear_bias is not None else None
    logits = G.reshape(linear(input, w2, b2), lead + (c,) + out)
    probs = tuple(target.shape) == lead + (c,) + out
    if probs and ignore_index is not None:
        raise EmberRuntimeError("linear_cross_entropy: ignore_index cannot be specified when "
                                "target contains probabilities")
    return cross_entropy(logits, target, weight, ignore_index=-100 if ignore_index is None
                         else ignore_index, reduction=reduction, label_smoothing=label_smoothing)


def elu_(input, alpha=1.0):
    return G.elu(input, alpha, inplace=True)


def leaky_relu_(input, negative_slope=0.01):
    return G.leaky_relu(input, negative_slope, inplace=True)


def selu_(input):
    return selu(input, inplace=True)


def celu_(input, alpha=1.0):
    return celu(input, alpha, inplace=True)


def threshold_(input, threshold, value):
    return globals()["threshold"](input, threshold, value, inplace=True)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    return rrelu(input, lower, upper, training, inplace=True)


__all__ = [n for n, v in list(globals().items()) if callable(v) and not n.startswith("_")
           and getattr(v, "__module__", None) == __name__]
# autocast (ember.amp) casts the arguments of torch's listed functions at their public entry,
# so a function made of several ops gets torch's one-op dtype rule (ember.autograd.autocast)
for _n in __all__:
    if _n in _autocast.LOWER or _n in _autocast.FP32:
        globals()[_n] = _autocast.autocast_entry(globals()[_n], _n)
# every public function raises ember's errors naming it (ember.errors.public)
for _n in __all__:
    globals()[_n] = _public(globals()[_n], _n)
del _n
