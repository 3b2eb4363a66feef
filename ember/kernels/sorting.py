"""Sorting, selection, scans and set kernels (sort, topk, kthvalue, median, mode, cummax/cummin,
logcumsumexp, unique, searchsorted, histc, ...). NaN sorts above every number, as in torch.
Index outputs are int64."""
import numpy as np

from ember.kernels.dtypes import to_float
from ember.kernels.errors import KernelDimensionError, KernelError


def _dim(op, dim, ndim):
    n = max(ndim, 1)
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
        raise KernelError(f"{op}(): dim must be an int, got {type(dim).__name__}")
    if not -n <= dim < n:
        raise IndexError(f"{op}(): dimension {dim} out of range (expected to be in range of "
                          f"[{-n}, {n - 1}])")
    return int(dim) % n


def _of_scalar(a):
    """The (values, indices) every sort and selection gives a 0-d ``a``: itself and 0."""
    return a.copy(), np.zeros((), np.int64)


def _check_k(op, noun, k, low, a, d):
    """KernelError unless ``low <= k <=`` the size of dim ``d`` (1 for a 0-d ``a``)."""
    n = a.shape[d] if a.ndim else 1
    if not low <= k <= n:
        raise KernelError(f"{op}(): selected {noun} k out of range for dimension {d} (k={k}, "
                          f"size {n}, input: {a.dtype}{list(a.shape)})")


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
        return _of_scalar(a)
    idx = _argsort(a, d, descending)
    return np.take_along_axis(a, idx, d), idx.astype(np.int64, copy=False)


def argsort(a, dim=-1, descending=False, stable=False):
    return sort(a, dim, descending, stable)[1]


SELECT_MIN_SIZE = 256   # topk selects by partition from this many elements a slice, k <= n / 4


def topk(a, k, dim=-1, largest=True, sorted=True):
    """The k largest (smallest) along ``dim``, in order, equal values by index: the first k of a
    stable sort. A long slice with few picks is selected by partition instead of sorted
    ((131072,) float32, k = 10: 13 ms -> 1.4), with the same result."""
    d = _dim("topk", dim, a.ndim)
    _check_k("topk", "index", k, 0, a, d)
    if a.ndim == 0:
        return _of_scalar(a)
    n = a.shape[d]
    if 0 < k and n >= SELECT_MIN_SIZE and 4 * k <= n and a.dtype.kind in "fiu" and not (
            a.dtype.kind == "f" and np.isnan(a).any()):
        idx = np.moveaxis(_selected(np.moveaxis(a, d, -1), k, largest), -1, d)
    else:
        idx = np.take(_argsort(a, d, largest), np.arange(k), axis=d)
    return np.take_along_axis(a, idx, d), idx.astype(np.int64, copy=False)


def _selected(a, k, largest):
    """Indices of the first k of a stable sort of each last-axis slice of ``a`` (no NaN):
    the k-th value by ``np.partition``, every element beyond it and the first of those equal to
    it, then those k sorted."""
    n = a.shape[-1]
    kth = n - k if largest else k - 1
    t = np.partition(a, kth, axis=-1)[..., kth, None]
    beyond = a > t if largest else a < t
    equal = a == t
    take = beyond | equal
    if not (take.sum(-1) == k).all():   # ties at the k-th value: the first ones by index
        room = k - beyond.sum(-1, keepdims=True)
        take = beyond | (equal & (np.cumsum(equal, -1) <= room))
    idx = np.nonzero(take.reshape(-1, n))[1].reshape(a.shape[:-1] + (k,))
    order = _argsort(np.take_along_axis(a, idx, -1), -1, largest)
    return np.take_along_axis(idx, order, -1)


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
    _nonempty("kthvalue", a, d)
    _check_k("kthvalue", "number", k, 1, a, d)
    if a.ndim == 0:
        return _of_scalar(a)
    return _select(a, d, k - 1, keepdim)


def _nonempty(op, a, d):
    """torch's IndexError for a selection (median, mode, kthvalue) over an empty dim ``d``."""
    if a.ndim and a.shape[d] == 0:
        raise KernelDimensionError(f"{op}(): Expected reduction dim {d} to have non-zero size. "
                                   f"(input: {a.dtype}{list(a.shape)})")


def _first_nan(a, d):
    """(has a NaN, index of the first NaN) per slice along ``d`` (keepdims)."""
    nan = np.isnan(a)
    return nan.any(axis=d, keepdims=True), np.argmax(nan, axis=d, keepdims=True)


def median_dim(a, dim, keepdim=False):
    d = _dim("median", dim, a.ndim)
    _nonempty("median", a, d)
    if a.ndim == 0:
        return _of_scalar(a)
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
        return _of_scalar(a)
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
        return _of_scalar(a)
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
        return _of_scalar(a)
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


# ---------------------------------------------------------------- sets, search, histograms
def _empty_int(shape=(0,)):
    return np.zeros(shape, np.int64)


def unique(a, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """(sorted unique values, inverse indices, counts); always sorted (as torch on the CPU)."""
    if dim is None:
        flat = a.reshape(-1)
        vals, inv, counts = np.unique(flat, return_inverse=True, return_counts=True,
                                      equal_nan=False)  # NaNs stay distinct, as torch
        return vals, inv.reshape(a.shape).astype(np.int64), counts.astype(np.int64)
    d = _dim("unique", dim, a.ndim)
    if a.ndim == 0:
        raise KernelError("unique(): dim= needs a tensor of at least one dimension")
    n = a.shape[d]
    if n == 0:
        return a.copy(), _empty_int(), _empty_int()
    m = np.moveaxis(a, d, 0).reshape(n, -1)
    if m.shape[1] == 0:
        raise KernelError(f"unique(): there are 0 sized dimensions in shape {list(a.shape)} "
                          f"other than dim {d}, so unique cannot be applied")
    order = np.lexsort(m.T[::-1])
    s = m[order]
    starts = np.ones(n, bool)
    starts[1:] = np.any(s[1:] != s[:-1], axis=1)
    group = np.cumsum(starts) - 1
    inv = np.empty(n, np.int64)
    inv[order] = group
    counts = np.diff(np.append(np.flatnonzero(starts), n)).astype(np.int64)
    return np.take(a, order[starts], axis=d), inv, counts


def unique_consecutive(a, return_inverse=False, return_counts=False, dim=None):
    """(values with consecutive repeats collapsed, inverse indices, counts)."""
    if dim is None:
        flat = a.reshape(-1)
        n = flat.shape[0]
        if n == 0:
            return flat.copy(), _empty_int(a.shape), _empty_int()
        starts = np.ones(n, bool)
        starts[1:] = flat[1:] != flat[:-1]
        vals = flat[starts]
        inv = (np.cumsum(starts) - 1).reshape(a.shape)
    else:
        d = _dim("unique_consecutive", dim, a.ndim)
        if a.ndim == 0:
            raise KernelError("unique_consecutive(): dim= needs a tensor of at least one "
                              "dimension")
        n = a.shape[d]
        if n == 0:
            return a.copy(), _empty_int(), _empty_int()
        m = np.moveaxis(a, d, 0).reshape(n, -1)
        starts = np.ones(n, bool)
        starts[1:] = np.any(m[1:] != m[:-1], axis=1)
        vals = np.compress(starts, a, axis=d)
        inv = np.cumsum(starts) - 1
    counts = np.diff(np.append(np.flatnonzero(starts), n))
    return vals, inv.astype(np.int64), counts.astype(np.int64)


def _side(op, right, side):
    if side is not None:
        if side not in ("left", "right"):
            raise KernelError(f"{op}(): side can only be 'left' or 'right' but got {side!r}")
        if right and side == "left":
            raise KernelError(f"{op}(): side and right can't be set to opposites, got side of "
                              f"left while right was True")
        return side
    return "right" if right else "left"


def _has_nan(a):
    return a.dtype.kind in "fc" and bool(np.isnan(a).any())


def _bisect_as_torch(seq, vals, right):
    """torch's binary search where a NaN is in ``seq`` or ``vals``: the lower (upper) bound
    moves right past every ``mid`` with ``not seq[mid] >= v`` (``not seq[mid] > v``), so a NaN
    value lands after every element and a NaN boundary counts as below every value. NumPy
    sorts NaN last, which for a NaN value is the first NaN's index instead."""
    n = seq.shape[-1]
    rows_s = seq.reshape(-1, n) if seq.ndim > 1 else seq[None, :]
    v = vals.reshape(rows_s.shape[0], -1) if seq.ndim > 1 else vals.reshape(1, -1)
    lo = np.zeros(v.shape, np.int64)
    hi = np.full(v.shape, n, np.int64)
    rows = np.arange(v.shape[0])[:, None]
    with np.errstate(invalid="ignore"):
        while True:
            live = lo < hi
            if not live.any():
                break
            mid = lo + ((hi - lo) >> 1)
            m = rows_s[rows, np.minimum(mid, n - 1)]
            go_right = ~(m > v) if right else ~(m >= v)
            lo = np.where(live & go_right, mid + 1, lo)
            hi = np.where(live & ~go_right, mid, hi)
    return lo.reshape(vals.shape)


def searchsorted(sorted_sequence, values, sorter=None, out_int32=False, right=False, side=None):
    """Insertion indices of ``values`` in the last dimension of ``sorted_sequence`` (1-D, or
    with the same leading dimensions as ``values``)."""
    s = _side("searchsorted", right, side)
    seq = np.asarray(sorted_sequence)
    vals = np.asarray(values)
    if seq.ndim == 0:
        raise KernelError("searchsorted(): boundaries tensor should have positive dimension, "
                          "but got 0 dimension")
    if sorter is not None:
        sorter = np.asarray(sorter)
        if sorter.shape != seq.shape:
            raise KernelError(f"searchsorted(): boundary and sorter must have the same size, "
                              f"but got boundary tensor {list(seq.shape)} and got sorter "
                              f"tensor {list(sorter.shape)}")
        if sorter.dtype.kind not in "iu":
            raise KernelError(f"searchsorted(): sorter must be a tensor of long dtype but got "
                              f"dtype {sorter.dtype}")
        n = seq.shape[-1]
        if sorter.size and (sorter.min() < 0 or sorter.max() >= n):
            raise KernelError("searchsorted(): sorter index out of range")
        seq = np.take_along_axis(seq, sorter.astype(np.int64), -1)
    out_dt = np.int32 if out_int32 else np.int64
    if _has_nan(seq) or _has_nan(vals):
        if seq.ndim > 1 and (vals.ndim != seq.ndim or vals.shape[:-1] != seq.shape[:-1]):
            pass    # the shape error below
        else:
            return _bisect_as_torch(seq, vals, s == "right").astype(out_dt)
    if seq.ndim == 1:
        return np.asarray(np.searchsorted(seq, vals, side=s)).astype(out_dt)
    if vals.ndim != seq.ndim or vals.shape[:-1] != seq.shape[:-1]:
        raise KernelError(f"searchsorted(): boundaries tensor should be 1 dimension or the first "
                          f"N-1 dimensions of boundaries tensor and input value tensor must "
                          f"match, but we got boundaries tensor {list(seq.shape)} and input "
                          f"value tensor {list(vals.shape)}")
    lead = int(np.prod(seq.shape[:-1], dtype=np.int64))  # not -1: the rows may be empty
    rows_s = seq.reshape(lead, seq.shape[-1])
    rows_v = vals.reshape(lead, vals.shape[-1])
    out = np.empty(rows_v.shape, out_dt)
    for i in range(rows_s.shape[0]):
        out[i] = np.searchsorted(rows_s[i], rows_v[i], side=s)
    return out.reshape(vals.shape)


def bucketize(a, boundaries, out_int32=False, right=False):
    b = np.asarray(boundaries)
    if b.ndim != 1:
        raise KernelError(f"bucketize(): boundaries tensor must be 1 dimension, but got dim("
                          f"{b.ndim})")
    return searchsorted(b, a, None, out_int32, right, None)


def isin(elements, test_elements, assume_unique=False, invert=False):
    return np.asarray(np.isin(elements, test_elements, assume_unique=assume_unique,
                              invert=invert))


def histc(a, bins=100, min=0, max=0):
    """Counts of ``a`` in ``bins`` equal bins over [min, max] (the data's range when
    min == max; widened by 1 each way when that is one point); values outside are ignored."""
    if a.dtype.kind != "f":
        raise KernelError(f"histc(): expected a floating point input, got {a.dtype}")
    if bins <= 0:
        raise KernelError(f"histc(): bins must be > 0, but got {bins}")
    lo, hi = float(min), float(max)
    if lo > hi:
        raise KernelError(f"histc(): max must be larger than min, got min={lo} max={hi}")
    if lo == hi and a.size:
        lo, hi = float(np.min(a)), float(np.max(a))
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise KernelError(f"histc(): range of [{lo}, {hi}] is not finite")
    x = a.reshape(-1)
    x = x[(x >= lo) & (x <= hi)]
    dt = a.dtype.type
    pos = ((x - dt(lo)) * dt(bins) / (dt(hi) - dt(lo))).astype(np.int64)
    pos = np.minimum(pos, bins - 1)
    return np.bincount(pos, minlength=bins).astype(a.dtype)
