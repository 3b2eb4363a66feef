"""3-d pooling kernels on ndarrays (N, C, D, H, W): max (with flat D*H*W argmax indices, torch's
first-max-wins / NaN-propagates rule), average (count_include_pad, ceil_mode,
divisor_override), adaptive average and adaptive max, forward and backward.

Max pooling runs once per kernel tap over strided views of a -inf padded copy. Average pooling
is separable (torch's divisor is a product of per-axis window lengths), so it is three 1-d
resamplings by tap tables (``interpolate.apply_tables``), as is adaptive average pooling.
Errors are KernelError (ValueError) with the shapes and the reason.
"""
import numpy as np
from ember.kernels.opmath import in_float32
from numpy.lib.stride_tricks import as_strided

from ..errors import KernelError
from ..interpolate import _taps as _interp_taps, apply_tables, apply_tables_adjoint
from .pool2d import _out, _running_max, _scatter

ND = 3


def _triple(v, name):
    t = (int(v),) * ND if np.isscalar(v) else tuple(int(a) for a in v)
    if len(t) == 1:
        t = t * ND
    if len(t) != ND:
        raise KernelError(f"{name} must be an int or {ND} ints, got {v!r}")
    return t


def _params(x_shape, kernel_size, stride, padding, dilation, ceil_mode):
    if len(x_shape) != ND + 2:
        raise KernelError(f"expected a 5-d input (N, C, D, H, W), got shape {list(x_shape)}")
    k = _triple(kernel_size, "kernel_size")
    s = k if stride is None or (not np.isscalar(stride) and len(stride) == 0) else \
        _triple(stride, "stride")
    p, d = _triple(padding, "padding"), _triple(dilation, "dilation")
    if min(k) < 1 or min(s) < 1 or min(d) < 1 or min(p) < 0:
        raise KernelError(f"kernel_size {k}, stride {s} and dilation {d} must be positive and "
                          f"padding {p} non-negative")
    if any(p[i] > k[i] // 2 for i in range(ND)):
        raise KernelError(f"padding {p} should be at most half of the kernel size {k}")
    out = tuple(_out(x_shape[2 + i], k[i], s[i], p[i], d[i], ceil_mode) for i in range(ND))
    if min(out) < 1:
        raise KernelError(f"input {list(x_shape)} is too small for kernel {k}, stride {s}, "
                          f"padding {p}, dilation {d}: output size {list(out)}")
    return k, s, p, d, out


# ------------------------------------------------------------------------------ max
def _max_taps(x, k, s, p, d, out):
    sp = x.shape[2:]
    need = tuple(max(sp[i] + p[i], (out[i] - 1) * s[i] + d[i] * (k[i] - 1) + 1)
                 for i in range(ND))
    low = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    xp = np.full(x.shape[:2] + need, low, x.dtype)
    xp[(slice(None), slice(None)) + tuple(slice(p[i], p[i] + sp[i]) for i in range(ND))] = x
    st = xp.strides
    pos = [np.arange(out[i]) * s[i] - p[i] for i in range(ND)]
    taps = []
    for tap in np.ndindex(*k):
        base = xp[(slice(None), slice(None)) + tuple(slice(tap[i] * d[i], None)
                                                    for i in range(ND))]
        view = as_strided(base, x.shape[:2] + out,
                          st[:2] + tuple(st[2 + i] * s[i] for i in range(ND)), writeable=False)
        coords = [pos[i] + tap[i] * d[i] for i in range(ND)]
        flat = (coords[0][:, None, None] * sp[1] + coords[1][None, :, None]) * sp[2] \
            + coords[2][None, None, :]
        taps.append((view, flat))
    # the index reported for an all -inf window: its first position inside the input
    first = [np.where(pos[i] < 0, pos[i] + ((-pos[i] + d[i] - 1) // d[i]) * d[i], pos[i])
             for i in range(ND)]
    start = (first[0][:, None, None] * sp[1] + first[1][None, :, None]) * sp[2] \
        + first[2][None, None, :]
    return taps, start


def max_pool3d_forward(x, kernel_size, stride, padding, dilation, ceil_mode):
    """(y, indices into each D*H*W volume) of 3-d max pooling."""
    k, s, p, d, out = _params(x.shape, kernel_size, stride, padding, dilation, ceil_mode)
    if x.dtype.kind not in "fiu":
        raise KernelError(f"expected a floating-point or integer input, got {x.dtype}")
    taps, start = _max_taps(x, k, s, p, d, out)
    return _running_max(taps, x.shape[:2] + out, x.dtype, start)


def max_pool3d_backward(gy, indices, input_shape):
    """Gradient of a 3-d max pool: gy summed into the argmax positions of each volume."""
    input_shape = tuple(int(a) for a in input_shape)
    if gy.shape != indices.shape or len(input_shape) != ND + 2:
        raise KernelError(f"grad_output {list(gy.shape)} and indices {list(indices.shape)} "
                          f"must agree, for a 5-d input shape (got {list(input_shape)})")
    n, c = input_shape[:2]
    flat = _scatter(gy, indices, (n, c, 1, int(np.prod(input_shape[2:]))))
    return flat.reshape(input_shape)


def _adaptive(shape, output_size):
    if len(shape) != ND + 2:
        raise KernelError(f"expected a 5-d input (N, C, D, H, W), got shape {list(shape)}")
    if np.isscalar(output_size) or output_size is None:
        output_size = (output_size,) * ND
    out = tuple(shape[2 + i] if o is None else int(o) for i, o in enumerate(output_size))
    if len(out) != ND or min(out) < 1:
        raise KernelError(f"output_size must be {ND} positive ints, got {output_size!r}")
    if min(shape[2:]) < 1:
        raise KernelError(f"input {list(shape)} has an empty spatial dimension")
    return out


def adaptive_max_pool3d_forward(x, output_size):
    """(y, indices into each D*H*W volume) of adaptive 3-d max pooling."""
    out = _adaptive(x.shape, output_size)
    if x.dtype.kind not in "fiu":
        raise KernelError(f"expected a floating-point or integer input, got {x.dtype}")
    sp = x.shape[2:]
    rows = []
    for i in range(ND):
        o = np.arange(out[i])
        st, en = (o * sp[i]) // out[i], -((-(o + 1) * sp[i]) // out[i])
        kk = int((en - st).max())
        rows.append(np.minimum(st[:, None] + np.arange(kk), en[:, None] - 1))  # (out, kk)
    taps = []
    for a in range(rows[0].shape[1]):
        for b in range(rows[1].shape[1]):
            for c in range(rows[2].shape[1]):
                i0, i1, i2 = rows[0][:, a], rows[1][:, b], rows[2][:, c]
                v = x[:, :, i0][:, :, :, i1][:, :, :, :, i2]
                flat = (i0[:, None, None] * sp[1] + i1[None, :, None]) * sp[2] \
                    + i2[None, None, :]
                taps.append((v, flat))
    return _running_max(taps, x.shape[:2] + out, x.dtype, taps[0][1])


# ------------------------------------------------------------------------------ average
def _avg_tables(shape, k, s, p, out, ceil_mode, count_include_pad, divisor_override, dtype):
    tables = []
    for i in range(ND):
        size = shape[2 + i]
        start = np.arange(out[i]) * s[i] - p[i]
        end = np.minimum(start + k[i], size + p[i])
        full = end - start
        lo, hi = np.maximum(start, 0), np.minimum(end, size)
        div = full if count_include_pad else hi - lo
        idx = lo[:, None] + np.arange(k[i])
        valid = idx < hi[:, None]
        w = valid / (1.0 if divisor_override else np.maximum(div, 1)[:, None])
        tables.append((np.minimum(idx, size - 1), w.astype(dtype)))
    if divisor_override:
        idx, w = tables[0]
        tables[0] = (idx, (w / float(divisor_override)).astype(dtype))
    return tables


def _avg_setup(shape, kernel_size, stride, padding, ceil_mode, count_include_pad,
               divisor_override, dtype):
    k, s, p, _, out = _params(shape, kernel_size, stride, padding, 1, ceil_mode)
    if divisor_override is not None and int(divisor_override) == 0:
        raise KernelError("divisor must be not zero")
    return out, _avg_tables(shape, k, s, p, out, ceil_mode, count_include_pad, divisor_override,
                            dtype)


@in_float32
def avg_pool3d_forward(x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                       divisor_override):
    """3-d average pooling, as torch's avg_pool3d (integer inputs: means truncated toward zero,
    as torch's CPU kernel)."""
    if x.dtype.kind in "iu":   # exact: integer window sums over integer divisors
        args = (kernel_size, stride, padding, ceil_mode, count_include_pad)
        sums = np.rint(avg_pool3d_forward(x.astype(np.float64), *args, 1)).astype(np.int64)
        if divisor_override:
            div = np.int64(int(divisor_override))
        else:
            ones = np.ones(x.shape, np.float64)
            div = np.rint(avg_pool3d_forward(ones, *args, 1) /
                          avg_pool3d_forward(ones, *args, None)).astype(np.int64)
        q = np.abs(sums) // np.abs(div)
        return (np.sign(sums) * np.sign(div) * q).astype(x.dtype)
    if x.dtype.kind != "f":
        raise KernelError(f"expected a floating-point or integer input, got {x.dtype}")
    _, tables = _avg_setup(x.shape, kernel_size, stride, padding, ceil_mode, count_include_pad,
                           divisor_override, x.dtype)
    return apply_tables(x, tables)


@in_float32
def avg_pool3d_backward(gy, input_shape, kernel_size, stride, padding, ceil_mode,
                        count_include_pad, divisor_override):
    """Gradient of avg_pool3d for an input of ``input_shape``."""
    input_shape = tuple(int(a) for a in input_shape)
    out, tables = _avg_setup(input_shape, kernel_size, stride, padding, ceil_mode,
                             count_include_pad, divisor_override, gy.dtype)
    if tuple(gy.shape) != input_shape[:2] + out:
        raise KernelError(f"grad_output has shape {list(gy.shape)}, expected "
                          f"{list(input_shape[:2] + out)}")
    return apply_tables_adjoint(gy, tables, input_shape)


def _area_tables(shape, out, dtype):
    return [_interp_taps("area", shape[2 + i], out[i], False, None, dtype, ND)
            for i in range(ND)]


@in_float32
def adaptive_avg_pool3d_forward(x, output_size):
    """Adaptive 3-d average pooling to ``output_size`` (int or 3; None keeps that size)."""
    out = _adaptive(x.shape, output_size)
    if x.dtype.kind != "f":
        raise KernelError(f"expected a floating-point input, got {x.dtype}")
    return apply_tables(x, _area_tables(x.shape, out, x.dtype))


@in_float32
def adaptive_avg_pool3d_backward(gy, input_shape):
    """Gradient of adaptive_avg_pool3d for an input of ``input_shape``."""
    input_shape = tuple(int(a) for a in input_shape)
    out = _adaptive(input_shape, gy.shape[2:])
    return apply_tables_adjoint(gy, _area_tables(input_shape, out, gy.dtype), input_shape)
