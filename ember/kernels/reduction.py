"""Reduction kernels: ``dim`` is None, an int or a tuple of ints; ``keepdim`` keeps reduced axes."""
import sys
import warnings

import numpy as np

from ember import _dtype
from ember.kernels.dtypes import to_float
from ember.kernels.errors import KernelDimensionError, KernelError
from ember.kernels.runtime.fpstate import quiet as _fp_quiet, restore as _fp_restore
from ember.kernels.opmath import in_float32


def norm_dims(dim, ndim):
    """Normalise ``dim`` (None/int/sequence) to a sorted tuple of non-negative axes."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, (int, np.integer)):
        dim = (int(dim),)
    n = max(ndim, 1)
    out = []
    for d in dim:
        if not -n <= d < n:
            raise KernelDimensionError(f"dimension {d} out of range (expected to be in range of "
                              f"[{-n}, {n - 1}])")
        d = d % n
        if d in out:
            raise KernelError(f"dim {d} appears multiple times in the list of dims")
        out.append(d)
    if ndim == 0:
        return ()
    return tuple(sorted(out))


def _np_dtype(dtype):
    """A ``dtype=`` argument (ember dtype, NumPy dtype or None) as a NumPy dtype or None."""
    return None if dtype is None else _dtype.to_numpy_dtype(dtype)


def _axis(dim, a):
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        return None
    return norm_dims(dim, a.ndim)


def sum(a, dim=None, keepdim=False, dtype=None):
    dtype = _np_dtype(dtype)
    if dtype is None and a.dtype.kind in "bui":
        dtype = np.int64
    axis = _axis(dim, a)
    if axis is not None and (dtype is None or dtype == a.dtype) and \
            (a.dtype is _F32 or a.dtype is _F64) and a.size >= LEADING_SUM_GEMV_MIN and \
            axis == tuple(range(len(axis))) and len(axis) < a.ndim and a.flags.c_contiguous:
        return _leading_sum(a, len(axis), keepdim)
    return np.sum(a, axis=axis, keepdims=keepdim, dtype=dtype)


# a float sum over the leading dims of a C-contiguous array of at least this many elements
# (a linear layer's bias gradient) runs as one GEMV, ones(N) @ a.reshape(N, C): BLAS reads the
# rows at memory speed where NumPy adds one row at a time (NumPy / the GEMV: (1024, 512)
# float32 ~50 / ~22 us, (1024, 128) ~26 / ~7 us, one process, 2 cores; equal up to rounding,
# and a column of -0.0 sums to +0.0, as torch's)
LEADING_SUM_GEMV_MIN = 1 << 12
_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
_ONES = {}


def _leading_sum(a, k, keepdim):
    """``a``'s sum over its first ``k`` dims as ones(N) @ a.reshape(N, C)."""
    n = 1
    for d in a.shape[:k]:
        n *= d
    ones = _ONES.get((n, a.dtype))
    if ones is None:
        if len(_ONES) > 64:
            _ONES.clear()
        ones = _ONES[(n, a.dtype)] = np.ones(n, a.dtype)
    from ember.kernels.runtime.threads import FREE, blas_mode
    with blas_mode(FREE):
        out = np.matmul(ones, a.reshape(n, -1))
    return out.reshape((1,) * k + a.shape[k:] if keepdim else a.shape[k:])


def _count(a, axis):
    """The number of elements each slice of a reduction of ``a`` over ``axis`` holds."""
    if axis is None:
        return a.size
    n = 1
    for d in axis:
        n *= a.shape[d]
    return n


def mean(a, dim=None, keepdim=False, dtype=None):
    dtype = _np_dtype(dtype)
    if dtype is None and a.dtype.kind not in "fc":
        raise KernelError(f"mean(): could not infer output dtype. Input dtype must be either a "
                          f"floating point or complex dtype. Got: {a.dtype}")
    axis = _axis(dim, a)
    if a.size == 0 and _count(a, axis) == 0:
        # the mean of no elements is NaN, silently as torch (np.mean warns "Mean of empty slice")
        total = np.sum(a, axis=axis, keepdims=keepdim, dtype=dtype)
        if total.dtype.kind in "fc":
            return np.full(total.shape, complex(np.nan, np.nan) if total.dtype.kind == "c"
                           else np.nan, total.dtype)
    return np.mean(a, axis=axis, keepdims=keepdim, dtype=dtype)


@in_float32
def prod(a, dim=None, keepdim=False, dtype=None):
    dtype = _np_dtype(dtype)
    if dtype is None and a.dtype.kind in "bui":
        dtype = np.int64
    return np.prod(a, axis=_axis(dim, a), keepdims=keepdim, dtype=dtype)


def _check_nonempty(a, dim, name):
    """torch's errors for a reduction with no identity over nothing: over every element of an
    empty ``a`` (``dim`` None) a RuntimeError (an IndexError for argmax/argmin), over a
    reduced dim (an int or the reduced axes, the first empty one named) of size 0 an
    IndexError, "Expected reduction dim 0 to have non-zero size."."""
    if a.size != 0:
        return
    of = f" (input: {a.dtype}{list(a.shape)})"
    if dim is None:
        if name in ("argmax", "argmin"):
            raise KernelDimensionError(f"{name}(): Expected reduction dim to be specified for "
                                       f"input.numel() == 0.{of}")
        raise KernelError(f"{name}(): Expected reduction dim to be specified for input.numel() "
                          f"== 0. Specify the reduction dim with the 'dim' argument.{of}")
    for d in (dim,) if isinstance(dim, (int, np.integer)) else dim:
        if a.ndim and a.shape[d % a.ndim] == 0:
            raise KernelDimensionError(f"{name}(): Expected reduction dim {d % a.ndim} to have "
                                       f"non-zero size.{of}")


def max_all(a):
    _check_nonempty(a, None, "max")
    return np.max(a)


def min_all(a):
    _check_nonempty(a, None, "min")
    return np.min(a)


def _dim1(dim, a):
    return norm_dims(dim, a.ndim)[0] if a.ndim else 0


def max_dim(a, dim, keepdim=False):
    d = _dim1(dim, a)
    _check_nonempty(a, d, "max")
    if a.ndim == 0:
        return a.copy(), np.zeros((), np.int64)
    idx = np.argmax(a, axis=d, keepdims=True)
    vals = np.take_along_axis(a, idx, d)
    if not keepdim:
        vals, idx = vals.squeeze(d), idx.squeeze(d)
    return vals, idx.astype(np.int64, copy=False)


def min_dim(a, dim, keepdim=False):
    d = _dim1(dim, a)
    _check_nonempty(a, d, "min")
    if a.ndim == 0:
        return a.copy(), np.zeros((), np.int64)
    idx = np.argmin(a, axis=d, keepdims=True)
    vals = np.take_along_axis(a, idx, d)
    if not keepdim:
        vals, idx = vals.squeeze(d), idx.squeeze(d)
    return vals, idx.astype(np.int64, copy=False)


def amax(a, dim=(), keepdim=False):
    ax = _axis(dim, a)
    _check_nonempty(a, ax or None, "amax")
    return np.max(a, axis=ax, keepdims=keepdim)


def amin(a, dim=(), keepdim=False):
    ax = _axis(dim, a)
    _check_nonempty(a, ax or None, "amin")
    return np.min(a, axis=ax, keepdims=keepdim)


def argmax(a, dim=None, keepdim=False):
    if dim is None:
        _check_nonempty(a, None, "argmax")
        r = np.argmax(a)
        return np.asarray(r, np.int64).reshape((1,) * a.ndim if keepdim else ())
    d = _dim1(dim, a)
    _check_nonempty(a, d, "argmax")
    return np.argmax(a, axis=d, keepdims=keepdim).astype(np.int64, copy=False)


def argmin(a, dim=None, keepdim=False):
    if dim is None:
        _check_nonempty(a, None, "argmin")
        r = np.argmin(a)
        return np.asarray(r, np.int64).reshape((1,) * a.ndim if keepdim else ())
    d = _dim1(dim, a)
    _check_nonempty(a, d, "argmin")
    return np.argmin(a, axis=d, keepdims=keepdim).astype(np.int64, copy=False)


@in_float32
def var(a, dim=None, correction=1, keepdim=False):
    if a.dtype.kind not in "fc":
        _var_needs_float(a)
    a = to_float(a)
    axis = _axis(dim, a)
    if correction >= _count(a, axis):
        return _var_no_dof("var", a, axis, keepdim)
    return np.var(a, axis=axis, ddof=correction, keepdims=keepdim)


@in_float32
def std(a, dim=None, correction=1, keepdim=False):
    if a.dtype.kind not in "fc":
        _var_needs_float(a)
    a = to_float(a)
    axis = _axis(dim, a)
    if correction >= _count(a, axis):
        return np.sqrt(_var_no_dof("std", a, axis, keepdim))
    return np.std(a, axis=axis, ddof=correction, keepdims=keepdim)


def _var_needs_float(a):
    raise KernelError(f"std and var only support floating point and complex dtypes, got "
                      f"{a.dtype}; convert the input with .float()")


def _var_no_dof(name, a, axis, keepdim):
    """The variance when the correction is at least the element count, as torch: the squared
    deviations' sum over max(count - correction, 0) = 0, inf (NaN where there is no spread),
    from ``np.var``'s deviations; of a complex input the real part's plus the imaginary
    part's (NaN where either has no spread, where ``np.var`` gives inf). torch's UserWarning,
    for the user's line, in place of NumPy's RuntimeWarning "Degrees of freedom <= 0"."""
    frame, level = sys._getframe(0), 1
    while frame is not None and frame.f_globals.get("__name__", "").startswith("ember."):
        frame, level = frame.f_back, level + 1
    warnings.warn(f"{name}(): degrees of freedom is <= 0. Correction should be strictly less "
                  "than the reduction factor (input numel divided by output numel).",
                  UserWarning, stacklevel=level)
    n = np.intp(_count(a, axis))
    m = np.sum(a, axis=axis, keepdims=True)
    m = np.true_divide(m, n, out=m, casting="unsafe") if isinstance(m, np.ndarray) else \
        m.dtype.type(m / n)
    x = np.asarray(a - m)

    def over_no_dof(part):
        total = np.sum(part * part, axis=axis, keepdims=keepdim)
        return np.true_divide(total, np.intp(0)).astype(total.dtype, copy=False)
    if x.dtype.kind == "c":
        return over_no_dof(x.real) + over_no_dof(x.imag)
    return over_no_dof(x)


def shifted_log_sum_exp(x, axis, m, out=None, log_dtype=None):
    """The log-sum-exp sequence, its one home: ``(s, log(sum(exp(s), axis)))`` with ``s = x - m``
    (written into ``out`` when given) for ``m`` the maximum over ``axis`` (kept dims; where
    it is not finite the caller decides what to shift by), the sum's dims kept; the log taken
    in ``log_dtype`` when given (cross entropy's float64). logsumexp, log_softmax, the cross
    entropy's NumPy path and CTC's recursions use it."""
    s = np.subtract(x, m, out=out)
    total = np.add.reduce(np.exp(s), axis=axis, keepdims=True)
    return s, np.log(total if log_dtype is None else total.astype(log_dtype))


def log_sum_exp(a, axis, keepdim=False):
    """log(sum(exp(a), axis)) of a float array, shifted by the finite maxima (an all -inf
    slice gives -inf, one holding +inf gives +inf, NaN stays NaN)."""
    if a.size == 0:
        return np.log(np.sum(np.exp(a), axis=axis, keepdims=keepdim))
    m = np.max(a, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    token = _fp_quiet()   # log(0) = -inf, inf - inf = nan: values
    try:
        out = shifted_log_sum_exp(a, axis, m)[1] + m
    finally:
        _fp_restore(token)
    return out if keepdim else np.squeeze(out, axis=axis if axis is not None else None)


@in_float32
def logsumexp(a, dim, keepdim=False):
    a = to_float(a)
    return log_sum_exp(a, _axis(dim, a), keepdim)


@in_float32
def norm(a, p=2, dim=None, keepdim=False):
    a = to_float(a)
    ax = _axis(dim, a)
    if p in (2, 2.0, "fro"):
        return np.sqrt(np.sum(a * a, axis=ax, keepdims=keepdim))
    if p in (1, 1.0):
        return np.sum(np.abs(a), axis=ax, keepdims=keepdim)
    if p == float("inf") or p == "inf":
        return np.max(np.abs(a), axis=ax, keepdims=keepdim)
    if p == float("-inf"):
        return np.min(np.abs(a), axis=ax, keepdims=keepdim)
    if p == 0:
        return np.sum(a != 0, axis=ax, keepdims=keepdim).astype(a.dtype)
    if isinstance(p, (int, float)):
        return np.sum(np.abs(a) ** p, axis=ax, keepdims=keepdim) ** (1.0 / p)
    raise KernelError(f"unsupported norm type {p!r}")


@in_float32
def cumsum(a, dim, dtype=None):
    """Running sums along ``dim``; float32 and float64 accumulate in float64 and round each
    output once, as torch's CPU kernel (``scan_numba``; NumPy's float64 running sum, the same
    values, while it compiles or without Numba)."""
    dtype = _np_dtype(dtype)
    d = norm_dims(dim, a.ndim)[0] if a.ndim else None
    if dtype is None and a.dtype.kind in "bui":
        dtype = np.int64
    if a.ndim == 0:
        return a.astype(dtype or a.dtype)
    if (dtype or a.dtype) in (np.float32, np.float64):
        return _float_cumsum(a.astype(dtype or a.dtype, copy=False), d)
    return np.cumsum(a, axis=d, dtype=dtype)


# elements from which a cumsum splits its outer blocks over Numba's TBB threads: (256, 512)
# float32 over its last axis, one thread 106 us, two 55 us (AMD EPYC Zen 4)
CUMSUM_PARALLEL_SIZE = 1 << 15
_cumsum_signatures = {}


def cumsum_input_grad(grad, dim, dtype):
    """cumsum's first-order backward (``backward_kernel``): the running sums of ``grad`` from
    the end of ``dim`` (the formula's flip, cumsum, flip in one pass, the same values), in
    ``dtype``; None for a gradient that is not float32 / float64 (the formula runs)."""
    if grad.dtype not in (np.float32, np.float64) or not grad.ndim:
        return None
    out = _float_cumsum(grad, norm_dims(dim, grad.ndim)[0], reverse=True)
    return out if out.dtype == dtype else out.astype(dtype)


def _float_cumsum(a, d, reverse=False):
    a = np.ascontiguousarray(a)
    out = np.empty(a.shape, a.dtype)
    if not a.size:
        return out
    n = a.shape[d]
    inner = int(np.prod(a.shape[d + 1:], dtype=np.int64))
    outer = a.size // (n * inner)
    nb = _scan_kernels(a.dtype)
    if nb is None:
        src = np.flip(a, d) if reverse else a
        out = np.cumsum(src, axis=d, dtype=np.float64).astype(a.dtype, copy=False)
        return np.ascontiguousarray(np.flip(out, d)) if reverse else out
    from ember.kernels.runtime import compiler, threadpool, threads
    x, y = a.reshape(-1), out.reshape(-1)
    parts = 0
    if a.size >= CUMSUM_PARALLEL_SIZE and outer > 1 and not threadpool.inside():
        parts = threads.tbb_parts(outer, threads.working_threads())
    if parts and compiler.ready(nb.cumsum_parallel, _cumsum_signatures[a.dtype.str],
                                later=True):
        nb.cumsum_parallel(x, y, n, inner, reverse, outer, parts)
    else:
        nb.cumsum_blocks(x, y, n, inner, reverse, 0, outer)
    return out


def _scan_kernels(dt):
    """``scan_numba`` when its one-thread kernel can run now for dtype ``dt``, else None."""
    from ember.kernels.runtime import compiler
    nb = compiler.kernel_module("ember.kernels.scan_numba")
    if nb is None:
        return None
    sig = _cumsum_signatures.get(dt.str)
    if sig is None:    # (the one-thread kernel's argument types, also its prange driver's)
        one = np.empty(1, dt)
        sig = _cumsum_signatures[dt.str] = compiler.signature(one, one, 0, 0, True, 0, 0)
    return nb if compiler.ready(nb.cumsum_blocks, sig) else None


@in_float32
def cumprod(a, dim, dtype=None):
    dtype = _np_dtype(dtype)
    d = norm_dims(dim, a.ndim)[0] if a.ndim else None
    if dtype is None and a.dtype.kind in "bui":
        dtype = np.int64
    if a.ndim == 0:
        return a.astype(dtype or a.dtype)
    return np.cumprod(a, axis=d, dtype=dtype)


def all(a, dim=None, keepdim=False):
    return np.all(a, axis=_axis(dim, a), keepdims=keepdim)


def any(a, dim=None, keepdim=False):
    return np.any(a, axis=_axis(dim, a), keepdims=keepdim)


def count_nonzero(a, dim=None):
    return np.asarray(np.count_nonzero(a, axis=_axis(dim, a)), np.int64)
