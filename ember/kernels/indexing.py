"""Indexing kernels: basic and advanced getitem, index_put, gather/scatter, masks."""
import numpy as np

from ember.kernels.dtypes import fill_value
from ember.kernels.elementwise import where
from ember.kernels.errors import KernelError
from ember.kernels.reduction import norm_dims


def _dim(d, ndim):
    return norm_dims(d, ndim)[0] if ndim else 0


def check_range(index, n, name, dim=0, error=KernelError, wrap=False):
    """Raise ``error`` naming ``name``, an index outside ``[0, n)`` (``[-n, n)`` where negative
    indices ``wrap``) and the size, as torch's gather/scatter/index_* kernels do (most do not
    wrap negative indices): one min and one max over ``index``."""
    if not index.size:
        return
    lo, hi = index.min(), index.max()
    low = -n if wrap else 0
    if lo < low or hi >= n:
        bad = int(lo if lo < low else hi)
        raise error(f"{name}(): index {bad} is out of bounds for dimension {dim} with size {n}")


def getitem(a, key):
    try:
        r = a[key]
    except IndexError as e:
        raise IndexError(f"index out of range: {e}") from None
    if r.__class__ is not np.ndarray:   # an all-integer index: NumPy copies out a scalar, torch
        r = a[(key if isinstance(key, tuple) else (key,)) + (Ellipsis,)]   # gives a 0-d view
    return r


_BASIC = (int, slice, type(None), type(Ellipsis), np.integer)


def _basic(key):
    """Whether ``key`` is basic indexing (ints, slices, None, Ellipsis), which reaches each
    element at most once (a bool is an advanced index in NumPy)."""
    for k in (key if key.__class__ is tuple else (key,)):
        if not isinstance(k, _BASIC) or isinstance(k, bool):
            return False
    return True


def getitem_backward(grad, shape, key):
    """The gradient of ``a[key]`` for ``a`` of ``shape``: ``grad`` where the key read, zeros
    elsewhere; summed where an advanced index repeats an element (``np.add.at``). A basic key
    is one assignment (``add.at`` took 1.1 ms for ``x[:64]`` of a (256, 512) float32, the
    assignment ~20 us), and keeps a gradient's -0.0 as torch's slice backward does."""
    out = np.zeros(shape, grad.dtype)
    if _basic(key):
        out[key] = grad
    else:
        np.add.at(out, key, grad)
    return out


def index_put(a, values, key, accumulate=False):
    out = a.copy()
    index_put_into(out, values, key, accumulate)
    return out


def index_put_into(out, values, key, accumulate=False):
    """``out[key] = values`` (added with ``accumulate``) in ``out``'s memory: only the indexed
    elements are written (``setitem`` on a tensor other processes or threads also write)."""
    values = np.asarray(fill_value(values, out.dtype), dtype=out.dtype) \
        if values.__class__ is not np.ndarray else values.astype(out.dtype, copy=False)
    try:
        if accumulate:
            np.add.at(out, key, values)
        else:
            out[key] = values
    except ValueError as e:
        raise KernelError(f"shape mismatch: value tensor of shape {list(np.shape(values))} cannot "
                          f"be broadcast to indexing result ({e})") from None


def index_select(a, index, dim):
    if index.ndim > 1:
        raise KernelError("index_select(): Index is supposed to be a vector")
    if index.dtype.kind not in "iu":
        raise KernelError(f"index_select(): Expected dtype int32/int64 for index, got {index.dtype}")
    d = _dim(dim, a.ndim)
    n = a.shape[d] if a.ndim else 1
    check_range(index, n, "index_select", d, IndexError)
    if a.ndim == 0:
        out = np.take(a.reshape(1), index.reshape(-1))
        return out.reshape(()) if out.size == 1 else out
    return np.take(a, index.reshape(-1), axis=d)


def add_at_axis(out, axis, index, values):
    """``out[index[i]] += values[i]`` along ``axis`` (``index`` 1-D, within ``[-n, n)``), in
    index order: ``np.add.at``'s result and bits, as rows through ``nn.scatter_add_rows`` (its
    compiled loop; ``np.add.at`` took 20 ms for a reflect pad's gradient of 16x32x36x36, a
    Python-level loop over the indices)."""
    from ember.kernels.nn import scatter_add_rows
    index = np.asarray(index).reshape(-1)
    if not index.size or not out.size:
        return
    moved = np.moveaxis(out, axis, 0)
    work = np.ascontiguousarray(moved)
    width = work.size // work.shape[0]
    vals = np.ascontiguousarray(np.moveaxis(values, axis, 0), out.dtype)
    scatter_add_rows(work.reshape(work.shape[0], width), index, vals.reshape(index.size, width))
    if work is not moved:
        moved[...] = work


def index_add(a, index, source, dim, alpha=1):
    if a.ndim == 0:  # a 0-d self is a 1-element vector
        return index_add(a.reshape(1), index.reshape(-1), np.reshape(source, -1), 0,
                         alpha).reshape(())
    out = a.copy()
    d = _dim(dim, a.ndim)
    check_range(index, a.shape[d], "index_add", d)
    src = source if alpha == 1 else source * alpha
    add_at_axis(out, d, index, np.asarray(src, a.dtype))
    return out


def _grid(index, dim):
    idx = list(np.indices(index.shape, sparse=True))
    idx[dim] = index
    return tuple(idx)


def _check_gather(a, dim, index, name):
    if index.dtype.kind not in "iu":
        raise KernelError(f"{name}(): Expected dtype int64 for index, got {index.dtype}")
    if index.ndim != a.ndim:
        raise KernelError(f"{name}(): Index tensor must have the same number of dimensions as "
                          f"input tensor ({index.ndim} vs {a.ndim})")
    for i in range(a.ndim):
        if i != dim and index.shape[i] > a.shape[i]:
            raise KernelError(f"{name}(): Size does not match at dimension {i} expected index "
                              f"{list(index.shape)} to be smaller than self {list(a.shape)} "
                              f"apart from dimension {dim}")
    check_range(index, a.shape[dim], name, dim)


def _lift(x):
    """torch's gather/scatter family treats a 0-d self, index or src as 1-d of size 1."""
    return x.reshape(1) if x.__class__ is np.ndarray and x.ndim == 0 else x


# index elements from which gather takes flat positions (3.4 -> 1.0 ms on (16, 32, 1024));
# below, building them costs more than NumPy's indexing saves (13 against 3 us at (64, 1))
FLAT_MIN_SIZE = 4096


def _flat(shape, index, dim):
    """Flat positions in a C-ordered array of ``shape`` of ``index`` along ``dim`` (gather's
    and scatter's pairing: every other coordinate the index's own): one int64 pass."""
    strides = np.cumprod((1,) + tuple(shape[:0:-1]), dtype=np.int64)[::-1]
    flat = index.astype(np.int64) * strides[dim]
    for k in range(index.ndim):
        if k != dim and index.shape[k] > 1:
            flat += (np.arange(index.shape[k], dtype=np.int64) * strides[k]).reshape(
                (-1,) + (1,) * (index.ndim - 1 - k))
    return flat


def gather(a, index, dim, sparse_grad=False):
    d = _dim(dim, a.ndim)
    if index.size == 0 and index.dtype.kind in "iu":  # torch: an empty index of any rank
        return np.empty(index.shape, a.dtype)
    shape = index.shape
    a, index = _lift(a), _lift(index)
    _check_gather(a, d, index, "gather")
    if index.size >= FLAT_MIN_SIZE and a.flags.c_contiguous:
        return np.take(a.reshape(-1), _flat(a.shape, index, d)).reshape(shape)
    return a[_grid(index, d)].reshape(shape)


_SCATTER_UFUNC = {None: None, "add": np.add, "multiply": np.multiply}


def scatter(a, index, src, dim, reduce=None):
    """``a`` with ``src`` (a tensor or a scalar) written at ``index`` along ``dim``;
    ``reduce='add'``/``'multiply'`` combine with the values there instead (torch's scatter)."""
    return scatter_into(a.copy(), index, src, dim, reduce)


def scatter_into(out, index, src, dim, reduce=None):
    """``scatter`` written into ``out`` itself (``scatter_`` without autograd: no copy of the
    tensor, nor of the result back into it). From FLAT_MIN_SIZE index elements into a
    C-contiguous ``out``, a plain write is one assignment at flat positions (a one-hot of
    (32, 64) classes into (32, 64, 1000) int64: 5.5 -> ~0.5 ms with the copies gone; torch
    0.27)."""
    if reduce not in _SCATTER_UFUNC:
        raise KernelError(f"scatter(): reduce argument must be either 'add' or 'multiply', got "
                          f"{reduce!r}")
    d = _dim(dim, out.ndim)
    if index.size == 0 and index.dtype.kind in "iu":  # torch: an empty index writes nothing
        return out
    view, index = _lift(out), _lift(index)
    _check_gather(view, d, index, "scatter")
    if src.__class__ is np.ndarray and src.ndim:
        src = src[tuple(slice(0, s) for s in index.shape)]
    ufunc = _SCATTER_UFUNC[reduce]
    src = fill_value(src, out.dtype)
    if ufunc is None and index.size >= FLAT_MIN_SIZE and view.flags.c_contiguous:
        view.reshape(-1)[_flat(view.shape, index, d)] = src
    elif ufunc is None:
        view[_grid(index, d)] = src
    else:
        ufunc.at(view, _grid(index, d), np.asarray(src, out.dtype))
    return out


def scatter_add(a, index, src, dim):
    d = _dim(dim, a.ndim)
    if index.size == 0 and index.dtype.kind in "iu":
        return a.copy()
    out, index, src = _lift(a).copy(), _lift(index), _lift(src)
    _check_gather(out, d, index, "scatter_add")
    values = src[tuple(slice(0, s) for s in index.shape)]
    if index.size >= FLAT_MIN_SIZE and out.flags.c_contiguous:   # np.add.at's order and bits
        from ember.kernels.nn import scatter_add_rows   # (its compiled loop: 7.5 -> ~1 ms on
        vals = np.ascontiguousarray(np.broadcast_to(  # gather's gradient in grid_sample)
            np.asarray(values, out.dtype), index.shape))
        scatter_add_rows(out.reshape(-1, 1), _flat(out.shape, index, d).reshape(-1),
                         vals.reshape(-1, 1))
    else:
        np.add.at(out, _grid(index, d), values)
    return out.reshape(a.shape)


def masked_fill(a, mask, value):
    if mask.dtype != np.bool_:
        raise KernelError(f"masked_fill only supports boolean masks, but got mask with dtype "
                          f"{mask.dtype}")
    if np.ndim(value) != 0:
        raise KernelError(f"masked_fill only supports a 0-dimensional value tensor, but got "
                          f"tensor with {np.ndim(value)} dimension(s)")
    try:
        np.broadcast_shapes(mask.shape, a.shape)
    except ValueError:
        raise KernelError(f"mask of shape {list(mask.shape)} cannot be broadcast with the input "
                          f"shape {list(a.shape)}") from None
    # out of place, as torch: the result has the broadcast shape (masked_fill_ keeps self's);
    # ``where``'s bit select (an attention mask: one pass or two)
    return where(mask, np.asarray(fill_value(value, a.dtype), dtype=a.dtype), a)


def masked_select(a, mask):
    if mask.dtype != np.bool_:
        raise KernelError(f"masked_select: expected a bool mask, got {mask.dtype}")
    shape = np.broadcast_shapes(a.shape, mask.shape)
    return np.broadcast_to(a, shape)[np.broadcast_to(mask, shape)]


def masked_select_backward(grad, mask, shape):
    full = np.broadcast_shapes(tuple(shape), mask.shape)
    out = np.zeros(full, grad.dtype)
    out[np.broadcast_to(mask, full)] = grad
    return out


def nonzero(a):
    return np.stack(np.nonzero(a), axis=1).astype(np.int64) if a.ndim else np.zeros((int(bool(a)), 0), np.int64)


def nan_to_num(a, nan, posinf, neginf):
    """``a`` with NaN, +inf and -inf replaced (infinities by the dtype's extremes by default)."""
    if a.dtype.kind != "f":
        return a.copy()
    return np.nan_to_num(a, nan=nan, posinf=posinf, neginf=neginf)


def isclose(a, b, rtol, atol, equal_nan):
    """Elementwise ``|a - b| <= atol + rtol * |b|`` (NaNs equal when ``equal_nan``)."""
    if a.dtype != b.dtype:
        raise KernelError(f"isclose(): expected both inputs to have the same dtype, but got "
                          f"{a.dtype} and {b.dtype}")
    if rtol < 0 or atol < 0:
        raise KernelError(f"isclose(): rtol ({rtol}) and atol ({atol}) must be non-negative")
    if a.dtype == np.bool_:
        return np.broadcast_to(a == b, np.broadcast_shapes(a.shape, b.shape)).copy()
    return np.isclose(a, b, rtol, atol, equal_nan)


_SCATTER_REDUCE = ("sum", "prod", "mean", "amax", "amin")


def scatter_reduce(a, index, src, dim, reduce, include_self):
    """``a`` with ``src[i]`` reduced into ``a[index[i]]`` along ``dim`` (torch's scatter_reduce:
    sum, prod, mean, amax, amin; ``include_self=False`` leaves ``a``'s own value out)."""
    if reduce not in _SCATTER_REDUCE:
        raise KernelError(f"scatter_reduce(): reduce argument must be one of {_SCATTER_REDUCE}, "
                          f"got {reduce!r}")
    if a.ndim == 0:  # a 0-d self is a 1-element vector
        return scatter_reduce(a.reshape(1), index.reshape(-1), src.reshape(-1), dim, reduce,
                              include_self).reshape(())
    d = _dim(dim, a.ndim)
    _check_gather(a, d, index, "scatter_reduce")
    if src.dtype != a.dtype:
        raise KernelError(f"scatter_reduce(): expected self and src to have the same dtype, got "
                          f"{a.dtype} and {src.dtype}")
    for i in range(src.ndim):
        if index.shape[i] > src.shape[i]:
            raise KernelError(f"scatter_reduce(): index {list(index.shape)} must not be larger "
                              f"than src {list(src.shape)} at dimension {i}")
    grid = _grid(index, d)
    src = src[tuple(slice(0, s) for s in index.shape)]
    out = a.copy()
    if not include_self:
        if reduce in ("sum", "mean"):
            init = 0
        elif reduce == "prod":
            init = 1
        elif a.dtype.kind == "f":
            init = -np.inf if reduce == "amax" else np.inf
        elif a.dtype == np.bool_:
            init = reduce == "amin"
        else:
            info = np.iinfo(a.dtype)
            init = info.min if reduce == "amax" else info.max
        out[grid] = init
    ufunc = {"sum": np.add, "mean": np.add, "prod": np.multiply, "amax": np.maximum,
             "amin": np.minimum}[reduce]
    ufunc.at(out, grid, src)
    if reduce == "mean":
        count = scatter_count(a.shape, index, d, include_self)
        out = (out // count if a.dtype.kind in "iub" else out / count).astype(a.dtype, copy=False)
    return out


def scatter_count(shape, index, dim, include_self):
    """How many values scatter_reduce's mean averages at each position of ``shape`` (at least 1:
    a position no index reaches keeps its own value)."""
    if not shape:
        return scatter_count((1,), index.reshape(-1), 0, include_self).reshape(())
    count = scatter_hits(shape, index, dim)
    if include_self:
        count += 1
    return np.maximum(count, 1)


def scatter_hits(shape, index, dim):
    """How many entries of ``index`` (along ``dim``) point at each position of ``shape``."""
    count = np.zeros(shape, np.int64)
    np.add.at(count, _grid(index, dim), 1)
    return count


def _check_index_along(a, dim, index, name):
    if index.dtype.kind not in "iu":
        raise KernelError(f"{name}(): Expected dtype int64 for index, got {index.dtype}")
    if index.ndim > 1:
        raise KernelError(f"{name}(): Index should have dimension 1 or 0 (got {index.ndim})")
    d = _dim(dim, a.ndim)
    check_range(index, a.shape[d] if a.ndim else 1, name, d, IndexError, wrap=True)
    return d


def index_copy(a, index, source, dim):
    """``a`` with the slices ``index[i]`` along ``dim`` replaced by the slices ``i`` of ``source``."""
    d = _check_index_along(a, dim, index, "index_copy")
    if index.size and index.min() < 0:
        raise IndexError(f"index_copy(): index {int(index.min())} is out of bounds for dimension "
                         f"{d} with size {a.shape[d] if a.ndim else 1}")
    index = index.reshape(-1)
    want = a.shape[:d] + (index.size,) + a.shape[d + 1:] if a.ndim else (index.size,) * bool(
        source.ndim)
    if source.shape != want and source.size != index.size:
        raise KernelError(f"index_copy(): source of shape {list(source.shape)} does not match "
                          f"self {list(a.shape)} with {index.size} indices along dim {d}")
    out = a.copy()
    if a.ndim == 0:
        if index.size:
            out[...] = source.reshape(-1)[-1]
        return out
    np.moveaxis(out, d, 0)[index] = np.moveaxis(source.reshape(want), d, 0)
    return out


def index_fill(a, index, value, dim):
    """``a`` with the slices ``index`` along ``dim`` set to ``value``."""
    d = _check_index_along(a, dim, index, "index_fill")
    if np.ndim(value) != 0:
        raise KernelError(f"index_fill(): only supports a 0-dimensional value tensor, got "
                          f"{np.ndim(value)} dimension(s)")
    out = a.copy()
    value = fill_value(value, a.dtype)
    if a.ndim == 0:
        if index.size:
            out[...] = value
        return out
    np.moveaxis(out, d, 0)[index.reshape(-1)] = value
    return out


def masked_scatter(a, mask, source):
    """``a`` with the positions where ``mask`` (broadcast to ``a``) is True filled, in order, by
    the leading elements of ``source``."""
    if mask.dtype != np.bool_:
        raise KernelError(f"masked_scatter_: expected BoolTensor for mask, got {mask.dtype}")
    try:
        shape = np.broadcast_shapes(a.shape, mask.shape)
    except ValueError:
        raise KernelError(f"masked_scatter: mask of shape {list(mask.shape)} cannot be broadcast "
                          f"with self of shape {list(a.shape)}") from None
    m = np.broadcast_to(mask, shape)
    n = int(m.sum())
    if source.size < n:
        raise KernelError(f"masked_scatter: expected source to have at least {n} elements (the "
                          f"number of True in mask), got {source.size}")
    out = np.broadcast_to(a, shape).copy()
    out[m] = source.reshape(-1)[:n]
    return out
