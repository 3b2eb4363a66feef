"""3-d convolution and transposed convolution on ndarrays (N, C, D, H, W), forward and backward:
the entry points check shapes and arguments, then ``selector.run_3d`` runs the algorithm.
Semantics equal torch's conv3d / conv_transpose3d (cross-correlation). Padding: 3 ints
(symmetric) or 6 (d_lo, d_hi, h_lo, h_hi, w_lo, w_hi). Errors are KernelError (ValueError).
"""
import numpy as np

from ..errors import KernelError
from . import selector

ND = 3


def _ints(v, name, n=ND):
    t = (int(v),) * n if np.isscalar(v) else tuple(int(a) for a in v)
    if len(t) == 1:
        t = t * n
    if len(t) != n:
        raise KernelError(f"{name} must be an int or {n} ints, got {v!r}")
    return t


def _pads(padding):
    p = (int(padding),) * ND if np.isscalar(padding) else tuple(int(a) for a in padding)
    if len(p) == 1:
        p = p * ND
    if len(p) == ND:
        p = tuple(q for a in p for q in (a, a))
    if len(p) != 2 * ND or min(p) < 0:
        raise KernelError(f"padding must be {ND} or {2 * ND} non-negative ints, got {padding!r}")
    return tuple((p[2 * i], p[2 * i + 1]) for i in range(ND))


def _geometry(x_shape, w_shape, stride, padding, dilation, groups, transposed=False):
    x_shape, w_shape = tuple(x_shape), tuple(w_shape)
    if len(x_shape) != ND + 2 or len(w_shape) != ND + 2:
        raise KernelError(f"expected a 5-d input (N, C, D, H, W) and a 5-d weight, got input "
                          f"{list(x_shape)} and weight {list(w_shape)}")
    s, d = _ints(stride, "stride"), _ints(dilation, "dilation")
    p = _pads(padding)
    g = int(groups)
    if min(s) < 1 or min(d) < 1 or g < 1:
        raise KernelError(f"stride {s}, dilation {d} and groups {g} must be positive")
    k = w_shape[2:]
    if transposed:
        cin, cout = w_shape[0], w_shape[1] * g
        if x_shape[1] != cin or cin % g:
            raise KernelError(f"given groups={g}, weight of size {list(w_shape)}, expected input "
                              f"{list(x_shape)} to have {cin} channels (divisible by groups)")
        return s, p, d, g, k, cin, cout
    cout, cin = w_shape[0], w_shape[1] * g
    if x_shape[1] != cin or cout % g:
        raise KernelError(f"given groups={g}, weight of size {list(w_shape)}, expected input "
                          f"{list(x_shape)} to have {cin} channels and {cout} output channels "
                          f"divisible by groups")
    return s, p, d, g, k, cin, cout


def _out_sizes(spatial, k, s, p, d):
    out = tuple((n + lo + hi - dd * (kk - 1) - 1) // ss + 1
                for n, kk, ss, (lo, hi), dd in zip(spatial, k, s, p, d))
    if min(out) < 1:
        raise KernelError(f"input spatial size {list(spatial)} with padding {list(p)} is smaller "
                          f"than the dilated kernel {[dd * (kk - 1) + 1 for kk, dd in zip(k, d)]}")
    return out


def _check_dtype(*arrays):
    """One dtype for all: float32/float64, or an integer dtype (exact integer arithmetic, as
    torch's CPU convolutions of integer tensors; not differentiable)."""
    dt = arrays[0].dtype
    if (dt not in (np.float32, np.float64) and dt.kind not in "iu") or \
            any(a.dtype != dt for a in arrays):
        raise KernelError(f"expected float32, float64 or integer arrays of one dtype, got "
                          f"{[str(a.dtype) for a in arrays]}")


def _bias(b, k, dtype):
    if b is None:
        return None
    if b.shape != (k,) or b.dtype != dtype:
        raise KernelError(f"bias must be {dtype} of shape ({k},), got {b.dtype} {b.shape}")
    return b.reshape((k,) + (1,) * ND)


# ------------------------------------------------------------------------------ conv3d
def conv3d_forward(x, w, b, stride, padding, dilation, groups):
    """y (N, K, Do, Ho, Wo) of x (N, C, D, H, W) and w (K, C/groups, kd, kh, kw)."""
    _check_dtype(x, w)
    s, p, d, g, k, _, cout = _geometry(x.shape, w.shape, stride, padding, dilation, groups)
    out = _out_sizes(x.shape[2:], k, s, p, d)
    y = selector.run_3d("forward", x, w, s, p, d, g, out)
    bb = _bias(b, cout, x.dtype)
    return y + bb if bb is not None else y


def conv3d_input_grad(gy, w, input_shape, stride, padding, dilation, groups):
    """Gradient of conv3d wrt its input of ``input_shape``."""
    _check_dtype(gy, w)
    input_shape = tuple(int(a) for a in input_shape)
    s, p, d, g, k, _, cout = _geometry(input_shape, w.shape, stride, padding, dilation, groups)
    out = _out_sizes(input_shape[2:], k, s, p, d)
    if tuple(gy.shape) != (input_shape[0], cout) + out:
        raise KernelError(f"grad_output has shape {list(gy.shape)}, expected "
                          f"{[input_shape[0], cout, *out]}")
    return selector.run_3d("input", gy, w, input_shape, s, p, d, g)


def conv3d_weight_grad(gy, x, weight_shape, stride, padding, dilation, groups):
    """Gradient of conv3d wrt its weight of ``weight_shape``."""
    _check_dtype(gy, x)
    weight_shape = tuple(int(a) for a in weight_shape)
    s, p, d, g, k, _, cout = _geometry(x.shape, weight_shape, stride, padding, dilation, groups)
    out = _out_sizes(x.shape[2:], k, s, p, d)
    if tuple(gy.shape) != (x.shape[0], cout) + out:
        raise KernelError(f"grad_output has shape {list(gy.shape)}, expected "
                          f"{[x.shape[0], cout, *out]}")
    return selector.run_3d("weight", gy, x, weight_shape, s, p, d, g)


# ------------------------------------------------------------------------------ transposed
def _transposed_out(x_shape, k, s, p, op, d):
    op = _ints(op, "output_padding")
    for i in range(ND):
        if op[i] >= s[i] and op[i] >= d[i]:
            raise KernelError(f"output padding must be smaller than either stride or dilation, "
                              f"got output_padding {list(op)}, stride {list(s)}, dilation "
                              f"{list(d)}")
    out = tuple((x_shape[2 + i] - 1) * s[i] - p[i][0] - p[i][1] + d[i] * (k[i] - 1) + op[i] + 1
                for i in range(ND))
    if min(out) < 1:
        raise KernelError(f"the output size {list(out)} of input {list(x_shape)} is not positive")
    return out


def conv_transpose3d_forward(x, w, b, stride, padding, output_padding, groups, dilation):
    """y of x (N, Cin, D, H, W) and w (Cin, Cout/groups, kd, kh, kw), as torch."""
    _check_dtype(x, w)
    s, p, d, g, k, _, cout = _geometry(x.shape, w.shape, stride, padding, dilation, groups, True)
    out = _transposed_out(x.shape, k, s, p, output_padding, d)
    y = selector.run_3d("input", x, w, (x.shape[0], cout) + out, s, p, d, g)
    bb = _bias(b, cout, x.dtype)
    return y + bb if bb is not None else y


def conv_transpose3d_input_grad(gy, w, input_shape, stride, padding, output_padding, groups,
                                dilation):
    """Gradient of conv_transpose3d wrt its input of ``input_shape``: a conv3d of gy."""
    _check_dtype(gy, w)
    input_shape = tuple(int(a) for a in input_shape)
    s, p, d, g, k, _, cout = _geometry(input_shape, w.shape, stride, padding, dilation, groups,
                                       True)
    out = _transposed_out(input_shape, k, s, p, output_padding, d)
    if tuple(gy.shape) != (input_shape[0], cout) + out:
        raise KernelError(f"grad_output has shape {list(gy.shape)}, expected "
                          f"{[input_shape[0], cout, *out]}")
    return selector.run_3d("forward", gy, w, s, p, d, g, input_shape[2:])


def conv_transpose3d_weight_grad(gy, x, weight_shape, stride, padding, output_padding, groups,
                                 dilation):
    """Gradient of conv_transpose3d wrt its weight of ``weight_shape``."""
    _check_dtype(gy, x)
    weight_shape = tuple(int(a) for a in weight_shape)
    s, p, d, g, k, _, cout = _geometry(x.shape, weight_shape, stride, padding, dilation, groups,
                                       True)
    out = _transposed_out(x.shape, k, s, p, output_padding, d)
    if tuple(gy.shape) != (x.shape[0], cout) + out:
        raise KernelError(f"grad_output has shape {list(gy.shape)}, expected "
                          f"{[x.shape[0], cout, *out]}")
    # y is the input gradient of x:
    # dL/dw[ci, co, tap] = sum x[n, ci, pos] * gy_padded[n, co, pos*s + tap*d]
    return selector.run_3d("weight", x, gy, weight_shape, s, p, d, g)
