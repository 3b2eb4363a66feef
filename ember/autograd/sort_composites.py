"""Composite ops of the sorting and reductions family, written in spec ops."""
import numpy as np

import ember.autograd._generated as G
from ember.errors import (EmberIndexError, EmberRuntimeError, EmberTypeError,
                          EmberValueError)
from ember.tensor import Tensor


def msort(input):
    return G.sort(input, 0)[0]


def var_mean(input, dim=None, correction=1, keepdim=False):
    mean = G.mean(input, dim, keepdim)
    return G.var(input, dim, correction=correction, keepdim=keepdim), mean


def std_mean(input, dim=None, correction=1, keepdim=False):
    mean = G.mean(input, dim, keepdim)
    return G.std(input, dim, correction=correction, keepdim=keepdim), mean


def _float(x):
    return x._data.dtype.kind in "fc"


def nansum(input, dim=None, keepdim=False, dtype=None):
    x = G.where(G.isnan(input), 0.0, input) if _float(input) else input
    return G.sum(x, dim, keepdim, dtype=dtype)


def nanmean(input, dim=None, keepdim=False, dtype=None):
    if not _float(input) and dtype is None:
        raise EmberTypeError(f"nanmean: expected a floating point or complex input, got "
                             f"{input.dtype}")
    count = G.sum(G.logical_not(G.isnan(input)), dim, keepdim)
    with np.errstate(invalid="ignore"):  # an all-NaN slice is NaN, silently (as torch)
        return G.div(nansum(input, dim, keepdim, dtype), count)


def aminmax(input, dim=None, keepdim=False):
    dims = () if dim is None else (dim,)
    x = input._data
    if x.size == 0 and (dim is None or x.ndim == 0):
        raise EmberRuntimeError("aminmax: cannot compute aminmax over an empty input")
    if x.ndim and isinstance(dim, int) and -x.ndim <= dim < x.ndim and x.shape[dim] == 0:
        raise EmberRuntimeError(f"aminmax: expected a non-empty dimension {dim} (shape "
                                f"{list(x.shape)})")
    mx = G.amax(input, dims, keepdim)
    return G.amin(input, dims, keepdim), mx


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(op, input, q, dim, keepdim, interpolation, ignore_nan):
    """torch's quantile: sort, then per slice (and per q) gather the two neighbours of the rank
    q*(n-1) (n: the non-NaN count for nanquantile; a slice with a NaN gives NaN for quantile)
    and interpolate; differentiable in ``input`` and in a tensor ``q``."""
    x = input._data
    if x.dtype not in (np.float32, np.float64):
        raise EmberRuntimeError(f"{op}: input tensor must be either float or double dtype, got "
                                f"{input.dtype}")
    q_t = q if isinstance(q, Tensor) else None
    if q_t is not None:
        q_t._python_value(op)  # q's values are checked in Python (as torch does)
    qa = np.asarray(q._data if q_t is not None else q, dtype=np.float64)
    if qa.ndim > 1:
        raise EmberRuntimeError(f"{op}: q must be a scalar or 1D tensor, got shape "
                                f"{list(qa.shape)}")
    if q_t is not None and q_t._data.dtype != x.dtype:
        raise EmberRuntimeError(f"{op}: q tensor must be same dtype as the input tensor, got "
                                f"{q_t.dtype} and {input.dtype}")
    if np.any((qa < 0) | (qa > 1)) or np.any(np.isnan(qa)):
        raise EmberRuntimeError(f"{op}: q values must be in the range [0, 1]")
    if interpolation not in _INTERPOLATIONS:
        raise EmberValueError(f"{op}: interpolation must be one of {_INTERPOLATIONS}, got "
                              f"{interpolation!r}")
    if x.size == 0:
        raise EmberRuntimeError(f"{op}: input tensor must be non-empty")
    scalar_q = qa.ndim == 0
    nq = 1 if scalar_q else qa.shape[0]
    if dim is None:
        src, d = G.reshape(input, (-1,)), 0
    else:
        n = max(x.ndim, 1)
        if not -n <= dim < n:
            raise EmberIndexError(f"{op}: dimension {dim} out of range (expected to be in "
                                  f"range of [{-n}, {n - 1}])")
        d = dim % n
        src = input if x.ndim else G.reshape(input, (1,))
    sorted_ = G.sort(src, d)[0]
    s = src._data
    n = s.shape[d]
    qshape = [1] * s.ndim
    qshape[d] = nq
    full = list(s.shape)
    full[d] = nq
    dt = x.dtype
    # ranks in ops (not from the data in Python), so that a trace stays right for new data
    if ignore_nan:
        count = G.sum(G.logical_not(G.isnan(src)), d, True)
        no_value = G.eq(count, 0)
        last = G.to(G.where(no_value, 0, G.sub(count, 1)), dt)
    else:
        last = _const(np.full([1] * s.ndim, n - 1.0, dt))
        no_value = G.any(G.isnan(sorted_), d, True)
    qv = G.reshape(q_t, tuple(qshape)) if q_t is not None else _const(qa.reshape(qshape).astype(dt))
    rank = G.expand(G.mul(qv, last), tuple(full))
    # a slice with a NaN (quantile) or of NaNs only (nanquantile) reads its last sorted element
    rank = G.where(no_value, float(n - 1) if not ignore_nan else 0.0, rank)
    if interpolation == "nearest":
        rank = G.round(rank)
    lo = G.to(G.floor(rank), np.int64)
    if interpolation in ("lower", "nearest"):
        out = G.gather(sorted_, d, lo)
    else:
        hi = G.to(G.ceil(rank), np.int64)
        above = G.gather(sorted_, d, hi)
        if interpolation == "higher":
            out = above
        else:
            below = G.gather(sorted_, d, lo)
            w = (_const(np.full(full, 0.5, dt)) if interpolation == "midpoint"
                 else G.sub(rank, G.to(lo, dt)))
            out = G.lerp(below, above, w)
    # shape: q's axis first (when q is a tensor of one dimension), then the reduced input shape
    if dim is None:
        out = G.reshape(out, (nq,) + ((1,) * x.ndim if keepdim else ()))
    else:
        out = G.permute(out, (d,) + tuple(i for i in range(s.ndim) if i != d))
        if keepdim and x.ndim:
            out = G.unsqueeze(out, d + 1)
        elif not x.ndim:
            out = G.reshape(out, (nq,))
    if scalar_q:
        out = G.reshape(out, tuple(out._data.shape[1:]))
    return out


def _const(a):
    return Tensor._make(np.ascontiguousarray(a))


def quantile(input, q, dim=None, keepdim=False, interpolation="linear"):
    return _quantile("quantile", input, q, dim, keepdim, interpolation, False)


def nanquantile(input, q, dim=None, keepdim=False, interpolation="linear"):
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, True)
