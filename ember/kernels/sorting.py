"""Sorting, selection, scans and set kernels (sort, topk, kthvalue, median, mode, cummax/cummin,
logcumsumexp, unique, searchsorted, histc, ...). NaN sorts above every number, as in torch.
Index outputs are int64."""
import numpy as np

from ember.kernels.dtypes import to_float
from ember.kernels.errors import KernelError


def _dim(op, dim, ndim):
    n = max(ndim, 1)
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
        raise KernelError(f"{op}(): dim must be an int, got {type(dim).__name__}")
    if not -n <= dim < n:
        raise IndexError(f"{op}(): dimension {dim} out of range (expected to be in range of "
                          f"[{-n}, {n - 1}])")
    return int(dim) % n


def _argsort(a, d, descending):
    """Stable argsort along ``d``; descending keeps equal elements in their original order."""
    if not descending:
        return np.argsort(a, axis=d, kind="stable")
    n = a.shape[d]
    rev = np.flip(a, d)
    return np.flip(n - 1 - np.argsort(rev, axis=d, kind="stable"), d)


def sort(a, dim=-1, descending=False, stable=False):
    d = _dim("sort", dim, a.ndim)
    if a.ndim == 0:
        return a.copy(), np.zeros((), np.int64)
    idx = _argsort(a, d, descending)
    return np.take_along_axis(a, idx, d), idx.astype(np.int64, copy=False)


def argsort(a, dim=-1, descending=False, stable=False):
    return sort(a, dim, descending, stable)[1]


def topk(a, k, dim=-1, largest=True, sorted=True):
    d = _dim("topk", dim, a.ndim)
    n = a.shape[d] if a.ndim else 1
    if not 0 <= k <= n:
        raise KernelError(f"topk(): selected index k={k} out of range for dimension {d} of size "
                          f"{n} (shape {list(a.shape)})")
    if a.ndim == 0:
        return a.copy(), np.zeros((), np.int64)
    idx = np.take(_argsort(a, d, largest), np.arange(k), axis=d)
    return np.take_along_axis(a, idx, d), idx.astype(np.int64, copy=False)


def _select(a, d, pos, keepdim):
    """Values and indices of the ``pos``-th element (per slice, int or array) in sorted order."""
    idx = _argsort(a, d, False)
    pos = np.broadcast_to(np.asarray(pos, np.int64),
                          a.shape[:d] + (1,) + a.shape[d + 1:])
    i = np.take_along_axis(idx, pos, d)
    v = np.take_along_axis(a, i, d)
    if not keepdim:
        v, i = v.squeeze(d), i.squeeze(d)
    return v, i.astype(np.int64, copy=False)


def kthvalue(a, k, dim=-1, keepdim=False):
    d = _dim("kthvalue", dim, a.ndim)
    n = a.shape[d] if a.ndim else 1
    if not 1 <= k <= n:
        raise KernelError(f"kthvalue(): selected number k={k} out of range for dimension {d} of "
                          f"size {n} (shape {list(a.shape)})")
    if a.ndim == 0:
        return a.copy(), np.zeros((), np.int64)
    return _select(a, d, k - 1, keepdim)


def _nonempty(op, a, d):
    if a.ndim and a.shape[d] == 0:
        raise KernelError(f"{op}(): expected a non-empty dimension {d} to reduce, got shape "
                          f"{list(a.shape)}")


def _first_nan(a, d):
    """(has a NaN, index of the first NaN) per slice along ``d`` (keepdims)."""
    nan = np.isnan(a)
    return nan.any(axis=d, keepdims=True), np.argmax(nan, axis=d, keepdims=True)


def median_dim(a, dim, keepdim=False):
    d = _dim("median", dim, a.ndim)
    _nonempty("median", a, d)
    if a.ndim == 0:
        return a.copy(), np.zeros((), np.int64)
    v, i = _select(a, d, (a.shape[d] - 1) // 2, True)
    if a.dtype.kind in "fc":
        has, first = _first_nan(a, d)
        i = np.where(has, first, i)
        v = np.take_along_axis(a, i, d)
    if not keepdim:
        v, i = v.squeeze(d), i.squeeze(d)
    return v, i


def nanmedian_dim(a, dim, keepdim=False):
    d = _dim("nanmedian", dim, a.ndim)
    _nonempty("nanmedian", a, d)
    if a.ndim == 0:
        return a.copy(), np.zeros((), np.int64)
    if a.dtype.kind not in "fc":
        return median_dim(a, dim, keepdim)
    valid = np.sum(~np.isnan(a), axis=d, keepdims=True)
    return _select(a, d, np.maximum(valid - 1, 0) // 2, keepdim)


def median_all(a):
    if a.size == 0:
        return np.array(np.nan, to_float(a).dtype)
    return median_dim(a.reshape(-1), 0)[0]


def nanmedian_all(a):
    if a.size == 0:
        return np.array(np.nan, to_float(a).dtype)
    return nanmedian_dim(a.reshape(-1), 0)[0]


def mode(a, dim=-1, keepdim=False):
    """Most frequent value per slice (the smallest among equally frequent ones) and the index of
    its last occurrence."""
    d = _dim("mode", dim, a.ndim)
    _nonempty("mode", a, d)
    if a.ndim == 0:
        return a.copy(), np.zeros((), np.int64)
    m = np.moveaxis(a, d, -1)
    lead, n = m.shape[:-1], m.shape[-1]
    m = m.reshape(-1, n)
    idx = np.argsort(m, axis=1, kind="stable")
    s = np.take_along_axis(m, idx, 1)
    pos = np.arange(n)
    starts = np.ones(s.shape, bool)
    starts[:, 1:] = s[:, 1:] != s[:, :-1]
    start = np.maximum.accumulate(np.where(starts, pos, 0), axis=1)
    length = pos - start + 1
    j = np.argmax(length, axis=1)[:, None]  # first longest run: the smallest value; its end
    v = np.take_along_axis(s, j, 1).reshape(lead)
    i = np.take_along_axis(idx, j, 1).reshape(lead).astype(np.int64)
    if keepdim:
        v, i = np.expand_dims(v, d), np.expand_dims(i, d)
    return v, i


# ---------------------------------------------------------------- scans
def _scan_extreme(op, a, dim, ufunc):
    d = _dim(op, dim, a.ndim)
    if a.ndim == 0:
        return a.copy(), np.zeros((), np.int64)
    vals = ufunc.accumulate(a, axis=d)
    shape = [1] * a.ndim
    shape[d] = a.shape[d]
    pos = np.arange(a.shape[d]).reshape(shape)
    mark = a == vals  # ties take the later index, as torch
    if a.dtype.kind in "fc":
        mark |= np.isnan(a)
    idx = np.maximum.accumulate(np.where(mark, pos, 0), axis=d)
    return vals, idx.astype(np.int64)


def cummax(a, dim):
    return _scan_extreme("cummax", a, dim, np.maximum)


def cummin(a, dim):
    return _scan_extreme("cummin", a, dim, np.minimum)


def logcumsumexp(a, dim):
    d = _dim("logcumsumexp", dim, a.ndim)
    a = to_float(a)
    if a.ndim == 0:
        return a.copy()
    return np.logaddexp.accumulate(a, axis=d)
