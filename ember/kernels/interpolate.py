"""Separable resampling kernels (``F.interpolate``): nearest, nearest-exact, (bi/tri)linear,
bicubic and area over the last 1-3 axes of an (N, C, *spatial) array, forward and backward; and
antialiased bilinear / bicubic over (N, C, H, W) (``antialias=True``).

Each spatial axis is resampled on its own by a tap table (for every output position, up to 4
source indices and their weights), computed as torch's CPU kernels do: the coordinate mapping uses
``1/scale`` when a scale is given (``recompute_scale_factor`` not True), else ``in/out``; nearest
modes compute in float32 like torch; an axis whose size is unchanged is copied (linear modes,
and 2-d nearest, as torch's forward does); bicubic uses A=-0.75 with clamped (border) taps; area is
adaptive average pooling. Errors are ValueError (KernelError) naming the op.

Antialiased modes ('linear' and 'cubic' of ``interpolate_aa_*``) are torch's
``_upsample_{bilinear,bicubic}2d_aa`` (PIL's resampling): output i is centred at
``scale * (i + 0.5)`` in input pixels (``scale`` as above, (in-1)/(out-1) with align_corners), the
filter (triangle, or Keys cubic with A=-0.5) is widened by ``scale`` when downsampling, its taps
lie inside the input and are normalised to sum 1. As torch, the forward copies an axis whose size
is unchanged, while the backward resamples it with the scale's weights (so they are adjoint unless
the scale of such an axis is 1).
"""
import math

import numpy as np

from .errors import KernelError

MODES = ("nearest", "nearest-exact", "linear", "cubic", "area")
_A = -0.75


def _scale(in_len, out_len, align_corners, scale, cubic_or_linear):
    if cubic_or_linear and align_corners:
        return (in_len - 1) / (out_len - 1) if out_len > 1 else 0.0
    if scale is not None and scale > 0:
        return 1.0 / scale
    return in_len / out_len


def _cubic1(x):
    return ((_A + 2) * x - (_A + 3)) * x * x + 1


def _cubic2(x):
    return ((_A * x - 5 * _A) * x + 8 * _A) * x - 4 * _A


def _taps(mode, in_len, out_len, align_corners, scale, dtype, nd):
    """(index (out, k) int64, weight (out, k) dtype) for one axis of an nd-d resampling."""
    if out_len == in_len and (mode == "linear" or (mode == "nearest" and nd == 2)):
        # torch copies an axis whose size is unchanged (nearest: 2-d only), whatever the scale
        return np.arange(out_len)[:, None], np.ones((out_len, 1), dtype)
    if mode in ("nearest", "nearest-exact"):
        s = np.float32(_scale(in_len, out_len, False, scale, False))
        dst = np.arange(out_len, dtype=np.float32)
        if mode == "nearest":
            src = np.floor(dst * s)
        else:
            src = np.floor((dst + np.float32(0.5)) * s)
        idx = np.minimum(src.astype(np.int64), in_len - 1)[:, None]
        return idx, np.ones((out_len, 1), dtype)
    if mode == "area":
        o = np.arange(out_len)
        start = (o * in_len) // out_len
        end = -((-(o + 1) * in_len) // out_len)
        k = int((end - start).max())
        idx = start[:, None] + np.arange(k)
        valid = idx < end[:, None]
        w = valid / (end - start)[:, None]
        return np.minimum(idx, in_len - 1), w.astype(dtype)
    op = dtype.type
    s = op(_scale(in_len, out_len, align_corners, scale, True))
    dst = np.arange(out_len, dtype=dtype)
    if align_corners:
        src = s * dst
    else:
        src = s * (dst + op(0.5)) - op(0.5)
    if mode == "linear":
        if not align_corners:
            src = np.maximum(src, op(0))
        i0 = np.minimum(np.floor(src).astype(np.int64), in_len - 1)
        lam = src - i0.astype(dtype)
        i1 = np.minimum(i0 + 1, in_len - 1)
        return np.stack([i0, i1], 1), np.stack([op(1) - lam, lam], 1).astype(dtype)
    fl = np.floor(src)
    t = src - fl
    i0 = fl.astype(np.int64) - 1
    idx = np.clip(i0[:, None] + np.arange(4), 0, in_len - 1)
    w = np.stack([_cubic2(t + 1), _cubic1(t), _cubic1(1 - t), _cubic2(2 - t)], 1)
    return idx, w.astype(dtype)


def _check(op, shape, output_size, mode, scales):
    nd = len(output_size)
    if mode not in MODES:
        raise KernelError(f"mode must be one of {MODES}, got {mode!r}")
    if len(shape) != nd + 2 or nd < 1:
        raise KernelError(f"expected a {nd + 2}-d input (N, C, *spatial) for an output size of "
                          f"{nd} value(s), got shape {tuple(shape)}")
    if mode == "cubic" and nd != 2:
        raise KernelError(f"bicubic needs a 4-d input, got shape {tuple(shape)}")
    if scales is not None and len(scales) != nd:
        raise KernelError(f"scales must have {nd} value(s), got {list(scales)}")
    if min(shape[2:], default=1) < 1 or min(output_size) < 1:
        raise KernelError(f"input and output sizes should be greater than 0, but got input "
                          f"{list(shape[2:])} and output {list(output_size)}")


def _tables(shape, output_size, mode, align_corners, scales, dtype):
    sc = list(scales) if scales is not None else [None] * len(output_size)
    return [_taps(mode, int(i), int(o), bool(align_corners), s, dtype, len(output_size))
            for i, o, s in zip(shape[2:], output_size, sc)]


def apply_tables(x, tables, order=None):
    """Resample axes 2.. of x by per-axis tap tables [(index (out, k), weight (out, k))], in the
    given order of the tables (default: first to last)."""
    y = x
    for ax in range(len(tables)) if order is None else order:
        idx, w = tables[ax]
        axis = 2 + ax
        if idx.shape[1] == 1 and np.all(w == 1):
            y = np.take(y, idx[:, 0], axis=axis)
            continue
        bshape = [1] * y.ndim
        bshape[axis] = idx.shape[0]
        acc = None
        for k in range(idx.shape[1]):
            term = np.take(y, idx[:, k], axis=axis) * w[:, k].reshape(bshape)
            acc = term if acc is None else acc + term
        y = acc
    return np.ascontiguousarray(y)


def transpose_table(idx, w, n_in):
    """The adjoint's tap table: for each of the n_in input positions, the output positions that
    read it and their weights (padded with weight 0)."""
    n_out, k = idx.shape
    rows = np.repeat(np.arange(n_out), k)
    cols, ws = idx.ravel(), w.ravel()
    keep = ws != 0
    rows, cols, ws = rows[keep], cols[keep], ws[keep]
    order = np.argsort(cols, kind="stable")
    rows, cols, ws = rows[order], cols[order], ws[order]
    counts = np.bincount(cols, minlength=n_in)
    m = max(int(counts.max(initial=0)), 1)
    pos = np.arange(cols.size) - np.repeat(np.cumsum(counts) - counts, counts)
    t_idx = np.zeros((n_in, m), np.int64)
    t_w = np.zeros((n_in, m), w.dtype)
    t_idx[cols, pos] = rows
    t_w[cols, pos] = ws
    return t_idx, t_w


def apply_tables_adjoint(g, tables, input_shape):
    """The adjoint of apply_tables: g (N, C, *out) -> (input_shape), a gather by each table's
    transpose (as fast as the forward; no scatter)."""
    return apply_tables(g, [transpose_table(idx, w, input_shape[2 + ax])
                            for ax, (idx, w) in enumerate(tables)])


def interpolate_forward(x, output_size, mode, align_corners, scales):
    """Resample the spatial axes of x to ``output_size``. Raises KernelError."""
    output_size = tuple(int(o) for o in output_size)
    _check("interpolate", x.shape, output_size, mode, scales)
    if mode not in ("nearest", "nearest-exact") and x.dtype.kind != "f":
        raise KernelError(f"mode {mode!r} needs a floating-point input, got {x.dtype}")
    dt = x.dtype if x.dtype.kind == "f" else np.dtype(np.float64)
    return apply_tables(x, _tables(x.shape, output_size, mode, align_corners, scales, dt))


def _check_grad(gy, input_shape, output_size):
    """KernelError unless ``gy`` is the gradient of ``input_shape`` resampled to
    ``output_size``."""
    if tuple(gy.shape[2:]) != output_size or tuple(gy.shape[:2]) != input_shape[:2]:
        raise KernelError(f"grad_output of shape {tuple(gy.shape)} does not match input "
                          f"{input_shape} resampled to {list(output_size)}")


def interpolate_backward(gy, input_shape, output_size, mode, align_corners, scales):
    """Gradient of interpolate_forward for an input of ``input_shape``. Raises KernelError."""
    input_shape = tuple(int(s) for s in input_shape)
    output_size = tuple(int(o) for o in output_size)
    _check("interpolate_backward", input_shape, output_size, mode, scales)
    _check_grad(gy, input_shape, output_size)
    tables = _tables(input_shape, output_size, mode, align_corners, scales, gy.dtype)
    return apply_tables_adjoint(gy, tables, input_shape)


AA_MODES = ("linear", "cubic")


def _aa_filter(x, mode):
    """torch's antialias filter of |x| in x's dtype; for float32 each multiply-add is rounded once,
    as torch's compiled (fused multiply-add) code does, by evaluating in float64."""
    x = np.abs(x)
    if mode == "linear":
        return np.where(x < 1, 1 - x, 0).astype(x.dtype)
    single = x.dtype == np.float32
    r = (lambda v: v.astype(np.float32).astype(np.float64)) if single else (lambda v: v)
    xd, a = x.astype(np.float64), -0.5
    near = r(r(r((a + 2) * xd - (a + 3)) * xd) * xd + 1)
    far = r(r(r(a * xd - 5 * a) * xd + 8 * a) * xd - 4 * a)
    return np.where(x < 1, near, np.where(x < 2, far, 0)).astype(x.dtype)


def _aa_taps(in_len, out_len, mode, align_corners, scale, dtype, copy_same=True):
    """(index (out, k) int64, weight (out, k) dtype) of one axis of an antialiased resampling,
    computed in ``dtype`` where torch computes in scalar_t and in double where it does."""
    if copy_same and in_len == out_len:
        return np.arange(out_len)[:, None], np.ones((out_len, 1), dtype)
    op = dtype.type
    if align_corners:
        s = float(op(in_len - 1) / op(out_len - 1)) if out_len > 1 else 0.0
    else:
        s = float(op(_scale(in_len, out_len, False, scale, True)))
    half = 1.0 if mode == "linear" else 2.0                     # interp_size / 2
    support = op(half * s if s >= 1.0 else half)
    max_k = int(math.ceil(support)) * 2 + 1
    invscale = float(op(1.0 / s)) if s >= 1.0 else 1.0
    center = (s * (np.arange(out_len) + 0.5)).astype(dtype)
    xmin = np.maximum(np.trunc((center - support).astype(np.float64) + 0.5), 0).astype(np.int64)
    xmax = np.minimum(np.trunc((center + support).astype(np.float64) + 0.5), in_len)
    size = np.clip(xmax.astype(np.int64) - xmin, 0, max_k)
    j = np.arange(max(int(size.max(initial=0)), 1))
    pos = xmin[:, None] + j
    x = (((pos.astype(dtype) - center[:, None]).astype(np.float64) + 0.5) * invscale)
    w = np.where(j < size[:, None], _aa_filter(x.astype(dtype), mode), op(0)).astype(dtype)
    total = np.zeros(out_len, dtype)
    for k in range(w.shape[1]):                                  # torch's summation order
        total += w[:, k]
    w = np.where(total[:, None] != 0, w / np.where(total == 0, op(1), total)[:, None], w)
    return np.minimum(pos, in_len - 1), w.astype(dtype)


def _aa_check(op, shape, output_size, mode, scales):
    if mode not in AA_MODES:
        raise KernelError(f"{op}: antialiased mode must be one of {AA_MODES}, got {mode!r}")
    if len(shape) != 4 or len(output_size) != 2:
        raise KernelError(f"{op}: antialiased resampling needs a 4-d input (N, C, H, W) and 2 "
                          f"output sizes, got shape {tuple(shape)} and {list(output_size)}")
    _check(op, shape, output_size, mode, scales)


def _aa_tables(shape, output_size, mode, align_corners, scales, dtype, copy_same):
    sc = list(scales) if scales is not None else [None, None]
    return [_aa_taps(int(i), int(o), mode, bool(align_corners), s, dtype, copy_same)
            for i, o, s in zip(shape[2:], output_size, sc)]


def _aa_dtype(dt, mode):
    if dt.kind != "f":
        raise KernelError(f"antialiased mode {mode!r} needs a floating-point input, got {dt}")
    return np.dtype(np.float64) if dt == np.float64 else np.dtype(np.float32)


def interpolate_aa_forward(x, output_size, mode, align_corners, scales):
    """Antialiased bilinear ('linear') / bicubic ('cubic') resampling of (N, C, H, W) x to
    ``output_size``, as torch's ``_upsample_*2d_aa``. Raises KernelError."""
    output_size = tuple(int(o) for o in output_size)
    _aa_check("interpolate_aa", x.shape, output_size, mode, scales)
    wt = _aa_dtype(x.dtype, mode)
    tables = _aa_tables(x.shape, output_size, mode, align_corners, scales, wt, True)
    y = apply_tables(x, tables, order=(1, 0))                   # W then H, as torch
    return y.astype(x.dtype, copy=False)


def interpolate_aa_backward(gy, input_shape, output_size, mode, align_corners, scales):
    """Gradient of interpolate_aa_forward for an input of ``input_shape``, as torch's
    ``_upsample_*2d_aa_backward`` (an unchanged axis is resampled too). Raises KernelError."""
    input_shape = tuple(int(s) for s in input_shape)
    output_size = tuple(int(o) for o in output_size)
    _aa_check("interpolate_aa_backward", input_shape, output_size, mode, scales)
    _check_grad(gy, input_shape, output_size)
    wt = _aa_dtype(gy.dtype, mode)
    tables = _aa_tables(input_shape, output_size, mode, align_corners, scales, wt, False)
    return apply_tables_adjoint(gy, tables, input_shape).astype(gy.dtype, copy=False)


def output_size_from_scale(spatial, scale_factors):
    """torch's output size for ``scale_factor``: floor(size * scale) in double."""
    return tuple(int(math.floor(float(s) * float(f))) for s, f in zip(spatial, scale_factors))
