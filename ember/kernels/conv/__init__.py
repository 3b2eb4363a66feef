"""Convolution kernels on ndarrays: 2-d and 3-d convolution and transposed convolution, NCHW
(``ember.nn.functional`` runs a 1-d one as a 2-d one of height 1).

Every entry point checks shapes before any work (ValueError naming the op, the shapes and the
reason; RuntimeError for unsupported dtypes), then runs the algorithm chosen by ``selector``.
Semantics equal torch.nn.functional.conv2d / conv_transpose2d (cross-correlation). Inputs are
float32 or float64 (one dtype per call); results keep it and are fresh C-contiguous arrays.
Padding is an int, a pair (symmetric) or (top, bottom, left, right). 3-d convolutions
(``conv3d``) check their own arguments and raise KernelError.
"""
import numpy as np

from . import selector
from .conv3d import (conv3d_forward, conv3d_input_grad, conv3d_weight_grad,
                     conv_transpose3d_forward, conv_transpose3d_input_grad,
                     conv_transpose3d_weight_grad)
from .geometry import check_dtype, check_shape, geometry, pair, padding4

__all__ = [
    "conv2d_forward", "conv2d_input_grad", "conv2d_weight_grad", "conv_transpose2d",
    "conv3d_forward", "conv3d_input_grad", "conv3d_weight_grad", "conv_transpose3d_forward",
    "conv_transpose3d_input_grad", "conv_transpose3d_weight_grad",
]


def _array(a):
    return a if isinstance(a, np.ndarray) else np.asarray(a)


def _check_bias(op, b, K, dtype):
    if b is None:
        return None
    b = _array(b)
    if b.shape != (K,):
        raise ValueError(f"{op}: bias has shape {b.shape}, expected ({K},)")
    if b.dtype != dtype:
        raise RuntimeError(f"{op}: bias dtype {b.dtype} differs from input dtype {dtype}")
    return b


def _integer(op, x, w, b, run):
    """An integer convolution (torch computes these on CPU): ``run`` on float64 copies, exact
    while every partial sum stays below 2**53, then cast back to x's dtype; None for floats."""
    if x.dtype.kind not in "iu" or w.dtype != x.dtype or (b is not None and
                                                       _array(b).dtype != x.dtype):
        return None
    reach = float(np.abs(x).max(initial=0)) * float(np.abs(w).max(initial=0)) * \
        max(1, w.size // max(1, w.shape[0])) * max(1, x.shape[1])
    if b is not None:
        reach += float(np.abs(_array(b)).max(initial=0))
    if reach >= 2.0 ** 53:
        raise RuntimeError(f"{op}: integer convolution of {x.dtype} values this large is not "
                           f"exact in ember (bound {reach:.3g} >= 2**53)")
    f = np.float64
    y = run(x.astype(f), w.astype(f), None if b is None else _array(b).astype(f))
    return np.rint(y).astype(x.dtype)


# ---------------------------------------------------------------------------------------- 2-d
def _forward(op, x, w, b, stride, padding, dilation, groups):
    x, w = _array(x), _array(w)
    y = _integer(op, x, w, b, lambda x, w, b: _forward(op, x, w, b, stride, padding, dilation,
                                                       groups))
    if y is not None:
        return y
    check_dtype(op, x, w)
    g = geometry(op, x.shape, w.shape, stride, padding, dilation, groups)
    b = _check_bias(op, b, g.K, x.dtype)
    if g.N == 0:
        y = np.zeros(g.output_shape, x.dtype)
        return y + b[:, None, None] if b is not None else y
    return selector.run(op, "forward", g, x, w, b)


def _input_grad(op, gy, w, input_shape, stride, padding, dilation, groups):
    gy, w = _array(gy), _array(w)
    check_dtype(op, gy, w)
    g = geometry(op, input_shape, w.shape, stride, padding, dilation, groups)
    check_shape(op, "grad_output", gy.shape, g.output_shape, g)
    if g.N == 0:
        return np.zeros(g.input_shape, gy.dtype)
    return selector.run(op, "input", g, gy, w)


def _weight_grad(op, gy, x, weight_shape, stride, padding, dilation, groups):
    gy, x = _array(gy), _array(x)
    check_dtype(op, gy, x)
    g = geometry(op, x.shape, weight_shape, stride, padding, dilation, groups)
    check_shape(op, "grad_output", gy.shape, g.output_shape, g)
    if g.N == 0:
        return np.zeros(g.weight_shape, gy.dtype)
    return selector.run(op, "weight", g, gy, x)


def conv2d_forward(x, w, b, stride, padding, dilation, groups):
    """y = conv2d(x, w) + b for x (N, C, H, W), w (K, C/groups, R, S), b (K,) or None.

    Raises ValueError for inconsistent shapes or arguments, RuntimeError for unsupported dtypes.
    """
    return _forward("conv2d", x, w, b, stride, padding, dilation, groups)


def conv2d_input_grad(gy, w, input_shape, stride, padding, dilation, groups):
    """Gradient of conv2d with respect to its input, of shape ``input_shape``.

    Raises ValueError when ``gy`` is not the output shape of that convolution.
    """
    return _input_grad("conv2d_input_grad", gy, w, input_shape, stride, padding, dilation, groups)


def conv2d_weight_grad(gy, x, weight_shape, stride, padding, dilation, groups):
    """Gradient of conv2d with respect to its weight, of shape ``weight_shape``.

    Raises ValueError when ``gy`` is not the output shape of that convolution.
    """
    return _weight_grad("conv2d_weight_grad", gy, x, weight_shape, stride, padding, dilation,
                        groups)


# ---------------------------------------------------------------------------- transposed 2-d
def _transpose_problem(op, x_shape, w_shape, stride, padding, output_padding, dilation, groups):
    """Return (output shape, conv geometry whose input gradient is the transposed conv, crop).

    The transposed convolution is the input gradient of a convolution with input (N, K, Hout,
    Wout) and padding (top, bottom - output_padding, ...); a negative side is a crop of the
    bottom/right rows, which receive zeros. ``crop`` is (bottom, right).
    """
    where = f"{op}: input {x_shape}, weight {w_shape}"
    if len(x_shape) != 4 or len(w_shape) != 4:
        raise ValueError(f"{where}: expected 4-d input (N, C, H, W) and weight (C, K/groups, R, S)")
    stride, dilation = pair(stride, "stride", op), pair(dilation, "dilation", op)
    op_h, op_w = pair(output_padding, "output_padding", op)
    pt, pb, pl, pr = padding4(padding, op)
    groups = int(groups)
    N, C, H, W = x_shape
    Cw, Kg, R, S = w_shape
    if min(stride) < 1 or min(dilation) < 1 or groups < 1:
        raise ValueError(f"{where}: stride {stride}, dilation {dilation} and groups {groups} must "
                         "be positive")
    if C != Cw:  # torch's words
        raise ValueError(f"{op}: Given transposed=1, weight of size {list(w_shape)}, expected "
                         f"input{list(x_shape)} to have {Cw} channels, but got {C} channels "
                         f"instead")
    if C % groups:
        raise ValueError(f"{where}: {C} input channels are not divisible by groups={groups}")
    for o, s, d in ((op_h, stride[0], dilation[0]), (op_w, stride[1], dilation[1])):
        if o < 0 or (o >= s and o >= d):
            raise ValueError(f"{where}: output_padding {(op_h, op_w)} must be smaller than "
                             f"either stride {stride} or dilation {dilation}")
    Ho = (H - 1) * stride[0] - pt - pb + dilation[0] * (R - 1) + op_h + 1
    Wo = (W - 1) * stride[1] - pl - pr + dilation[1] * (S - 1) + op_w + 1
    if Ho < 1 or Wo < 1 or min(R, S, Kg) < 1:
        raise ValueError(f"{where}: output size {Ho}x{Wo} is not positive (stride {stride}, "
                         f"padding {(pt, pb, pl, pr)}, dilation {dilation})")
    cb, cr = max(0, op_h - pb), max(0, op_w - pr)
    g = geometry(op, (N, Kg * groups, Ho - cb, Wo - cr), (C, Kg, R, S), stride,
                 (pt, max(0, pb - op_h), pl, max(0, pr - op_w)), dilation, groups)
    return (N, Kg * groups, Ho, Wo), g, (cb, cr)


def _uncrop(a, shape, crop):
    if crop == (0, 0):
        return a
    out = np.zeros(shape, a.dtype)
    out[:, :, :a.shape[2], :a.shape[3]] = a
    return out


def _transpose_forward(op, x, w, b, stride, padding, output_padding, dilation, groups):
    x, w = _array(x), _array(w)
    y = _integer(op, x, w, b, lambda x, w, b: _transpose_forward(
        op, x, w, b, stride, padding, output_padding, dilation, groups))
    if y is not None:
        return y
    check_dtype(op, x, w)
    shape, g, crop = _transpose_problem(op, x.shape, w.shape, stride, padding, output_padding,
                                        dilation, groups)
    b = _check_bias(op, b, shape[1], x.dtype)
    if g.N == 0:
        y = np.zeros(shape, x.dtype)
    else:
        y = selector.run(op, "input", g, x.reshape(g.output_shape), w.reshape(g.weight_shape))
        y = _uncrop(y, (g.N, g.C, g.H + crop[0], g.W + crop[1]), crop)
    y = y.reshape(shape)
    if b is not None:
        y += b.reshape((-1,) + (1,) * (y.ndim - 2))
    return y


def conv_transpose2d(x, w, b, stride, padding, output_padding, groups, dilation):
    """y = conv_transpose2d(x, w) + b for x (N, C, H, W), w (C, K/groups, R, S), b (K,) or None,
    in torch's argument order.

    Raises ValueError for inconsistent shapes or arguments, RuntimeError for unsupported dtypes.
    """
    return _transpose_forward("conv_transpose2d", x, w, b, stride, padding, output_padding,
                              dilation, groups)
