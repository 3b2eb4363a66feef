"""Composite ops of the op_db breadth work: integration, statistics, distances and
the ``native_*`` normalisations, written in spec ops (so autograd and tracing come with them)."""
import numpy as np

import ember.autograd._generated as G
from ember.errors import EmberRuntimeError, EmberValueError


def _dim(x, dim, op):
    n = x._data.ndim
    if not -max(n, 1) <= dim < max(n, 1) or n == 0:
        raise EmberValueError(f"{op}: dim {dim} is out of range for a tensor of shape "
                              f"{tuple(x._data.shape)}")
    return dim % n


def _float(x, bfloat16=False):
    """``x`` when floating point or complex, else ``x`` in float32 (integers, bool; bfloat16
    too unless ``bfloat16``, for ops computed in its precision as torch's)."""
    d = x.dtype
    if d.is_complex or d.is_floating_point and (bfloat16 or d.name != "bfloat16"):
        return x
    return G.to(x, np.dtype(np.float32))


def _spacing(y, x, dx, dim, op):
    """Interval widths along ``dim`` (a tensor broadcasting against y's intervals) or a number."""
    if x is None:
        return 1.0 if dx is None else dx
    if x._data.ndim == 1:
        if x._data.shape[0] != y._data.shape[dim]:
            raise EmberRuntimeError(f"{op}: there must be one x value for each sample point, "
                                    f"got x of length {x._data.shape[0]} and y of size "
                                    f"{y._data.shape[dim]} along dim {dim}")
        d = G.diff(x)
        return G.reshape(d, (-1,) + (1,) * (y._data.ndim - 1 - dim))
    return G.diff(x, 1, dim - y._data.ndim)


def _ends(y, dim):
    n = y._data.shape[dim]
    return G.narrow(y, dim, 1, n - 1), G.narrow(y, dim, 0, n - 1)


def trapezoid(y, x=None, dx=None, dim=-1):
    """Trapezoidal rule along ``dim`` with sample points ``x`` or a constant spacing ``dx``."""
    if x is not None and dx is not None:
        raise EmberValueError("trapezoid: pass either x or dx, not both")
    d = _dim(y, dim, "trapezoid")
    y = _float(y, bfloat16=True)
    if y._data.shape[d] == 0:
        return G.sum(y, (d,))
    h = _spacing(y, x, dx, d, "trapezoid")
    hi, lo = _ends(y, d)
    return G.sum(G.mul(G.add(hi, lo), h), (d,)) / 2


def trapz(y, x=None, dx=None, dim=-1):
    return trapezoid(y, x, dx, dim)


def cumulative_trapezoid(y, x=None, dx=None, dim=-1):
    """Running trapezoidal integral along ``dim`` (one value fewer than ``y`` along it)."""
    if x is not None and dx is not None:
        raise EmberValueError("cumulative_trapezoid: pass either x or dx, not both")
    d = _dim(y, dim, "cumulative_trapezoid")
    y = _float(y, bfloat16=True)
    if y._data.shape[d] == 0:
        return y
    h = _spacing(y, x, dx, d, "cumulative_trapezoid")
    hi, lo = _ends(y, d)
    return G.cumsum(G.mul(G.add(hi, lo), h), d) / 2


def dist(input, other, p=2):
    """The p-norm of ``input - other`` (broadcast)."""
    return G.linalg_vector_norm(G.sub(input, other), p)


def renorm(input, p, dim, maxnorm):
    """Each slice along ``dim`` rescaled so that its p-norm is at most ``maxnorm``."""
    n = input._data.ndim
    d = _dim(input, dim, "renorm")
    if p <= 0:
        raise EmberRuntimeError(f"renorm: non-positive norm p={p} is not supported")
    if maxnorm < 0:
        raise EmberRuntimeError(f"renorm: non-negative maxnorm expected, got {maxnorm}")
    others = tuple(i for i in range(n) if i != d)
    norm = G.linalg_vector_norm(input, p, others, True)
    scale = G.where(G.gt(norm, maxnorm), maxnorm / G.add(norm, 1e-7), G.ones_like(norm))
    return G.mul(input, scale)


def cov(input, correction=1, fweights=None, aweights=None):
    """Covariance of the variables in the rows of ``input`` (observations in the columns)."""
    if input._data.ndim > 2:
        raise EmberValueError(f"cov: expected input to have two or fewer dimensions, got shape "
                              f"{tuple(input._data.shape)}")
    x = input if input._data.ndim == 2 else G.reshape(input, (1, -1))
    x = _float(x)
    n = x._data.shape[1]
    w = None
    for name, t in (("fweights", fweights), ("aweights", aweights)):
        if t is None:
            continue
        if t._data.ndim > 1 or t._data.size != n:
            raise EmberValueError(f"cov: {name} must be a 1-d tensor of {n} values, got shape "
                                  f"{tuple(t._data.shape)}")
        if name == "fweights" and t._data.dtype.kind not in "iu":
            raise EmberValueError(f"cov: fweights must be integral, got {t._data.dtype}")
        if np.any(t._data < 0):
            raise EmberValueError(f"cov: {name} cannot be negative")
        w = t if w is None else G.mul(w, t)
    # the weights' sums are computed in their own dtype (as torch), and meet x through casts
    # (whose gradients return in the weights' dtype)
    xd = x._data.dtype

    def cast(t):
        return t if t._data.dtype == xd else G.to(t, xd)
    if w is None:
        wsum = float(n)
        avg = G.mean(x, (1,), True)
    else:
        wsum = G.sum(w)
        avg = G.sum(G.mul(x, cast(w)), (1,), True) / cast(wsum)
    if w is None or correction == 0 or aweights is None:
        norm_factor = wsum - correction
    else:
        norm_factor = wsum - correction * G.sum(G.mul(w, aweights)) / wsum
    if not isinstance(norm_factor, float):
        norm_factor = cast(norm_factor) if norm_factor._data.dtype.kind == "f" else \
            G.to(norm_factor, xd)
    xm = G.sub(x, avg)
    xw = xm if w is None else G.mul(xm, cast(w))
    c = G.matmul(xw, G.transpose(G.conj(xm) if xd.kind == "c" else xm, 0, 1))
    if isinstance(norm_factor, float):
        c = G.div(c, max(norm_factor, 0.0))
    else:
        c = G.div(c, G.clamp(norm_factor, 0.0, None))
    return G.squeeze(c) if input._data.ndim < 2 or input._data.shape[0] == 1 else c


def corrcoef(input):
    """Pearson correlation coefficients of the rows of ``input`` (clipped to [-1, 1])."""
    c = cov(input)
    if c._data.ndim == 0:
        return c / c
    d = G.diagonal(c)
    s = G.sqrt(G.real(d) if c.dtype.is_complex else d)
    c = c / G.unsqueeze(s, 1) / G.unsqueeze(s, 0)
    if c.dtype.is_complex:  # torch clips the real and imaginary parts
        return G.complex(G.clamp(G.real(c), -1.0, 1.0), G.clamp(G.imag(c), -1.0, 1.0))
    return G.clamp(c, -1.0, 1.0)


def cdist(x1, x2, p=2.0, compute_mode=None):
    """p-norm distances between each row of ``x1`` and each row of ``x2`` (batched)."""
    if x1._data.ndim < 2 or x2._data.ndim < 2:
        raise EmberRuntimeError(f"cdist: expected x1 and x2 with at least 2 dimensions, got "
                                f"shapes {tuple(x1._data.shape)} and {tuple(x2._data.shape)}")
    if x1._data.shape[-1] != x2._data.shape[-1]:
        raise EmberRuntimeError(f"cdist: x1 and x2 must have the same number of columns, got "
                                f"{x1._data.shape[-1]} and {x2._data.shape[-1]}")
    if p < 0:
        raise EmberRuntimeError(f"cdist: p must be non-negative, got {p}")
    if compute_mode not in (None, "use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                            "donot_use_mm_for_euclid_dist"):
        raise EmberValueError(f"cdist: {compute_mode} is not a valid value for compute_mode")
    diff = G.sub(G.unsqueeze(x1, -2), G.unsqueeze(x2, -3))
    return G.linalg_vector_norm(diff, p, (-1,))


def native_layer_norm(input, normalized_shape, weight, bias, eps):
    """(output, mean, rstd) of layer normalisation over the last len(normalized_shape) dims."""
    k = len(normalized_shape)
    shape = tuple(input._data.shape)
    if k == 0 or shape[len(shape) - k:] != tuple(normalized_shape):
        raise EmberRuntimeError(f"native_layer_norm: normalized_shape {list(normalized_shape)} "
                                f"does not match the trailing dims of input shape {shape}")
    dims = tuple(range(len(shape) - k, len(shape)))
    mean = G.mean(input, dims, True)
    rstd = G.rsqrt(G.add(G.var(input, dims, correction=0, keepdim=True), eps))
    saved = mean.detach(), rstd.detach()  # torch's mean and rstd are not differentiable
    out = G.mul(G.sub(input, mean), rstd)
    if weight is not None:
        out = G.mul(out, weight)
    if bias is not None:
        out = G.add(out, bias)
    return (out,) + saved


def native_group_norm(input, weight, bias, N, C, HxW, group, eps):
    """(output, mean, rstd) of group normalisation; mean and rstd have shape (N, group)."""
    if C % group:
        raise EmberRuntimeError(f"native_group_norm: C={C} is not divisible by group={group}")
    if input._data.size != N * C * HxW:
        raise EmberRuntimeError(f"native_group_norm: input of shape {tuple(input._data.shape)} "
                                f"does not hold N*C*HxW = {N}*{C}*{HxW} values")
    x = G.reshape(input, (N, group, (C // group) * HxW))
    mean = G.mean(x, (2,), True)
    rstd = G.rsqrt(G.add(G.var(x, (2,), correction=0, keepdim=True), eps))
    saved = G.reshape(mean, (N, group)), G.reshape(rstd, (N, group))
    bshape = (1, C) + (1,) * (input._data.ndim - 2)
    w = None if weight is None else G.reshape(weight, bshape)
    b = None if bias is None else G.reshape(bias, bshape)
    out = G.reshape(G.mul(G.sub(x, mean), rstd), tuple(input._data.shape))
    if w is not None:
        out = G.mul(out, w)
    if b is not None:
        out = G.add(out, b)
    return (out,) + saved
