"""Reductions: the composites of ember/ops/spec/reduction.yaml (``var_mean``, ``nansum``,
``quantile``, ``trapezoid``, ``cov``, ...), written in spec ops, and torch's overloaded entry
points (``max``/``min`` with their (values, indices), ``var``/``std`` with ``unbiased``, ``norm``),
``histogram``/``histogramdd`` with their named results, and ``gradient``."""
import builtins

import numpy as np

from ember.autograd._generated import functions as G
from ember import _dtype
from ember import return_types as R
from ember.errors import (DimensionError, EmberIndexError, EmberRuntimeError, EmberTypeError,
                          EmberValueError)
from ember.errors import public as _public
from ember.tensor import Tensor


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
        raise EmberRuntimeError(f"aminmax(): cannot compute aminmax over an empty dimension as "
                                f"the operation has no identity. (shape {list(x.shape)})")
    if x.ndim and isinstance(dim, int) and -x.ndim <= dim < x.ndim and x.shape[dim] == 0:
        raise DimensionError(f"aminmax: Expected reduction dim {dim % x.ndim} to have non-zero "
                             f"size. (shape {list(x.shape)})")
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
        n = builtins.max(x.ndim, 1)
        if not -n <= dim < n:
            raise DimensionError(f"{op}: dimension {dim} out of range (expected to be in "
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


def max(input, dim=None, keepdim=False):
    """``max(x)``, ``max(x, dim, keepdim)`` -> (values, indices), or ``max(x, other)`` elementwise."""
    if isinstance(dim, Tensor):
        return G.maximum(input, dim)
    if dim is None:
        return G.max_all(input)
    return R.max(*G.max_dim(input, dim, keepdim))


def min(input, dim=None, keepdim=False):
    """``min(x)``, ``min(x, dim, keepdim)`` -> (values, indices), or ``min(x, other)`` elementwise."""
    if isinstance(dim, Tensor):
        return G.minimum(input, dim)
    if dim is None:
        return G.min_all(input)
    return R.min(*G.min_dim(input, dim, keepdim))


def norm(input, p="fro", dim=None, keepdim=False, out=None, dtype=None):
    """``torch.norm``: a vector p-norm over ``dim`` (all elements when None; 'fro' is the 2-norm),
    or the nuclear norm ``p='nuc'`` of the matrices spanned by the two dims of ``dim`` (a 2-D
    input when ``dim`` is None); ``out`` given by position is written as by keyword."""
    if out is not None:
        from ember.autograd.out import check_grad, write
        check_grad("norm", (input,), {}, out)
        return write("norm", norm(input, p, dim, keepdim, None, dtype), out)
    if dtype is not None:
        input = G.to(input, _dtype.to_numpy_dtype(dtype))
    if isinstance(p, str) and p == "nuc":
        if dim is None and input.dim() != 2:
            raise EmberRuntimeError(f"norm: p='nuc' with dim=None needs a 2-D input, got "
                                    f"{input.dim()}-D {tuple(input.shape)}; pass dim=(d0, d1)")
        from ember.ops.linalg import linalg_matrix_norm
        return linalg_matrix_norm(input, "nuc", (-2, -1) if dim is None else dim, keepdim)
    return G.norm(input, 2 if isinstance(p, str) and p == "fro" else p, dim, keepdim)


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Variance; ``unbiased`` (legacy) or ``correction`` (default 1)."""
    if isinstance(dim, bool) and unbiased is None:
        unbiased, dim = dim, None
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    return G.var(input, dim, correction=correction, keepdim=keepdim)


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Standard deviation; ``unbiased`` (legacy) or ``correction`` (default 1)."""
    if isinstance(dim, bool) and unbiased is None:
        unbiased, dim = dim, None
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    return G.std(input, dim, correction=correction, keepdim=keepdim)


def _max_method(self, dim=None, keepdim=False):
    return max(self, dim, keepdim)


def _min_method(self, dim=None, keepdim=False):
    return min(self, dim, keepdim)


def histogram(input, bins, *, range=None, weight=None, density=False, out=None):
    """(hist, bin_edges): ``bins`` equal bins over ``range`` (default the input's min and max)
    or the bins between the given 1-d tensor of edges; ``weight`` and ``density`` as numpy."""
    if isinstance(bins, Tensor):
        hist, edges = G.histogram_kernel(input, bins, weight, 0, None, density)
    else:
        if not isinstance(bins, (int, np.integer)):
            raise EmberTypeError(f"histogram: bins must be an int or a 1-d tensor, got "
                                 f"{type(bins).__name__}")
        rng = None if range is None else [float(range[0]), float(range[1])]
        hist, edges = G.histogram_kernel(input, None, weight, builtins.int(bins), rng, density)
    return R.histogram(hist, edges)


def _part(f, d, start, stop):
    n = f.shape[d]
    start, stop = start % n if start < 0 else start, stop % n if stop <= 0 else stop
    return G.narrow(f, d, start, stop - start)


def _along(t, d, ndim):
    return G.reshape(t, (-1,) + (1,) * (ndim - 1 - d))


def _gradient_dim(f, d, h, edge_order):
    n, nd = f.shape[d], f.dim()
    if n < edge_order + 1:
        raise EmberRuntimeError(f"gradient: each dimension must have at least edge_order + 1 = "
                                f"{edge_order + 1} elements, got {n} along dim {d}")
    p = lambda a, b: _part(f, d, a, b)  # noqa: E731
    if not isinstance(h, Tensor):
        h = builtins.float(h)
        mid = G.sub(p(2, n), p(0, n - 2)) / (2 * h)
        if edge_order == 1:
            first, last = G.sub(p(1, 2), p(0, 1)) / h, G.sub(p(n - 1, n), p(n - 2, n - 1)) / h
        else:
            first = (p(0, 1) * -1.5 + p(1, 2) * 2.0 - p(2, 3) * 0.5) / h
            last = (p(n - 3, n - 2) * 0.5 - p(n - 2, n - 1) * 2.0 + p(n - 1, n) * 1.5) / h
        return G.cat([first, mid, last], d)
    if h.dim() != 1 or h.shape[0] != n:
        raise EmberRuntimeError(f"gradient: the coordinates along dim {d} must be a 1-d tensor "
                                f"of {n} values, got shape {tuple(h.shape)}")
    dx = G.diff(h)
    h1, h2 = _along(G.narrow(dx, 0, 0, n - 2), d, nd), _along(G.narrow(dx, 0, 1, n - 2), d, nd)
    mid = (p(0, n - 2) * (-h2 / (h1 * (h1 + h2))) + p(1, n - 1) * ((h2 - h1) / (h1 * h2))
           + p(2, n) * (h1 / (h2 * (h1 + h2))))
    e = [_along(G.narrow(dx, 0, i, 1), d, nd) for i in (0, 1, n - 3, n - 2)] if n > 2 else \
        [_along(dx, d, nd)] * 4
    if edge_order == 1:
        first = G.sub(p(1, 2), p(0, 1)) / e[0]
        last = G.sub(p(n - 1, n), p(n - 2, n - 1)) / e[3]
    else:
        a1, a2 = e[0], e[1]
        first = (p(0, 1) * (-(2 * a1 + a2) / (a1 * (a1 + a2))) + p(1, 2) * ((a1 + a2) / (a1 * a2))
                 + p(2, 3) * (-a1 / (a2 * (a1 + a2))))
        b1, b2 = e[2], e[3]
        last = (p(n - 3, n - 2) * (b2 / (b1 * (b1 + b2))) + p(n - 2, n - 1) * (-(b2 + b1) / (b1 * b2))
                + p(n - 1, n) * ((2 * b2 + b1) / (b2 * (b1 + b2))))
    return G.cat([first, mid, last], d)


def gradient(input, *, spacing=1, dim=None, edge_order=1):
    """Central-difference estimates of the derivative of ``input`` along each of ``dim`` (all
    dims by default): one tensor per dim, as torch.gradient. ``spacing`` is one step for every
    dim, a step per dim, or a 1-d tensor of coordinates per dim; ``edge_order`` 1 or 2 sets the
    accuracy of the one-sided differences at the ends."""
    if edge_order not in (1, 2):
        raise EmberRuntimeError(f"gradient: edge_order must be 1 or 2, got {edge_order}")
    nd = input.dim()
    dims = list(builtins.range(nd)) if dim is None else [dim] if isinstance(dim, int) else list(dim)
    dims = [d % nd if -nd <= d < nd else None for d in dims]
    if None in dims or len(set(dims)) != len(dims):
        raise EmberRuntimeError(f"gradient: dims {dim} are out of range or repeated for a "
                                f"{nd}-d input")
    if spacing is None:
        spacing = 1
    steps = list(spacing) if isinstance(spacing, (list, tuple)) else [spacing] * len(dims)
    if len(steps) != len(dims):
        raise EmberRuntimeError(f"gradient: expected spacing to be a scalar or to have one "
                                f"entry per dimension ({len(dims)}), got {len(steps)}")
    f = input if input._data.dtype.kind == "f" else G.to(input, _dtype.get_default_dtype().numpy)
    steps = [s.item() if isinstance(s, Tensor) and s.dim() == 0 else s for s in steps]
    return tuple(_gradient_dim(f, d, h, edge_order) for d, h in zip(dims, steps))


def histogramdd(input, bins, *, range=None, weight=None, density=False, out=None):
    """(hist, bin_edges) of the points in the rows of ``input`` (..., D): ``bins`` a count for
    every dim, a count per dim, or a 1-d tensor of edges per dim; ``range`` a flat
    [min0, max0, min1, max1, ...] for counted bins (default each dim's min and max)."""
    d = input.shape[-1] if input.dim() else 0
    if isinstance(bins, (int, np.integer)):
        bins = [builtins.int(bins)] * d
    bins = list(bins)
    if len(bins) != d:
        raise EmberRuntimeError(f"histogramdd: expected {d} bin counts or edge tensors for an "
                                f"input whose last dim is {d}, got {len(bins)}")
    if range is not None and len(range) != 2 * d:
        raise EmberRuntimeError(f"histogramdd: range must hold 2 * {d} values, got {len(range)}")
    pts = G.reshape(input, (-1, d))
    edges = []
    for i, b in enumerate(bins):
        if isinstance(b, Tensor):
            if b.dtype != input.dtype:
                raise EmberRuntimeError(f"histogramdd: input and bins must have the same dtype, "
                                        f"got input {input.dtype} and bins[{i}] {b.dtype}")
            edges.append(b)
            continue
        col = G.select(pts, 1, i)
        rng = None if range is None else [builtins.float(range[2 * i]),
                                          builtins.float(range[2 * i + 1])]
        edges.append(G.histogram_kernel(col, None, None, builtins.int(b), rng, False)[1])
    tensors = [input] + edges + ([] if weight is None else [weight])
    hist = G.histogramdd_kernel(tensors, weight is not None, density)
    return R.histogramdd(hist, edges)


def _dim(x, dim, op):
    n = x._data.ndim
    if not -builtins.max(n, 1) <= dim < builtins.max(n, 1) or n == 0:
        raise EmberValueError(f"{op}: dim {dim} is out of range for a tensor of shape "
                              f"{tuple(x._data.shape)}")
    return dim % n


def _as_float(x, bfloat16=False):
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
    y = _as_float(y, bfloat16=True)
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
    y = _as_float(y, bfloat16=True)
    if y._data.shape[d] == 0:
        return y
    h = _spacing(y, x, dx, d, "cumulative_trapezoid")
    hi, lo = _ends(y, d)
    return G.cumsum(G.mul(G.add(hi, lo), h), d) / 2


def cov(input, correction=1, fweights=None, aweights=None):
    """Covariance of the variables in the rows of ``input`` (observations in the columns)."""
    if input._data.ndim > 2:
        raise EmberValueError(f"cov: expected input to have two or fewer dimensions, got shape "
                              f"{tuple(input._data.shape)}")
    x = input if input._data.ndim == 2 else G.reshape(input, (1, -1))
    x = _as_float(x)
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
        c = G.div(c, builtins.max(norm_factor, 0.0))
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


# these raise ember's errors naming them (ember.errors.public)
for _n in ("max", "min", "var", "std"):
    globals()[_n] = _public(globals()[_n])
del _n
