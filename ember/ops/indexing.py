"""Indexing: ``Tensor.__getitem__`` / ``__setitem__`` (a Python index turned into a kernel key,
then dispatched), torch's ``where``, ``nonzero``, ``index_put``, ``tril_indices``,
``unravel_index``, and the composites of ember/ops/spec/indexing.yaml (``take``,
``take_along_dim``, ``select_scatter``, ``index_reduce``, ...)."""
import warnings

import numpy as np

from ember import _dtype
from ember.autograd._generated import functions as G
from ember.errors import EmberIndexError, EmberRuntimeError
from ember.errors import public as _public
from ember.kernels.indexing import check_range
from ember.ops.shape import _broadcast_shape, _data_read, _norm
from ember.tensor import Tensor

_U8 = np.dtype(np.uint8)


def _tensor_cls():
    from ember.tensor import Tensor
    return Tensor


def to_key(key):
    """Convert tensors and lists inside an index to ndarrays; validate the element types. A
    uint8 index is a mask, as in torch (with its deprecation warning where it has dimensions)."""
    Tensor = _tensor_cls()
    if isinstance(key, tuple):
        return tuple(_one(k, Tensor) for k in key)
    return _one(key, Tensor)


def _byte_mask(a):
    """A uint8 index array as the bool mask torch reads it as."""
    if a.ndim:
        warnings.warn("indexing with dtype ember.uint8 is now deprecated, please use a dtype "
                      "ember.bool instead.", UserWarning, stacklevel=6)
    return a != 0


def _one(k, Tensor):
    if isinstance(k, Tensor):
        a = k._data
        if a.dtype.kind == "f":
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        return _byte_mask(a) if a.dtype == _U8 else a
    if isinstance(k, range):
        return np.arange(k.start, k.stop, k.step, dtype=np.int64)
    if isinstance(k, (list,)):
        if not k:
            return np.zeros(0, np.int64)
        a = np.asarray([x._data if isinstance(x, Tensor) else x for x in k])
        if a.dtype.kind == "f":
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        return a
    if isinstance(k, np.ndarray):
        return _byte_mask(np.asarray(k)) if k.dtype == _U8 else np.asarray(k)
    if k is None or k is Ellipsis or isinstance(k, (int, np.integer, slice, bool)):
        if isinstance(k, slice) and k.step is not None and k.step <= 0:
            raise ValueError("step must be greater than zero")
        return k
    raise IndexError(f"only integers, slices (`:`), ellipsis (`...`), None and long or byte "
                     f"tensors are valid indices (got {type(k).__name__})")


def _check_byte_mask_fill(name, key, values, accumulate):
    """torch writes a one-element value through one mask index with ``masked_fill_``, which
    refuses a uint8 mask: the same call raises here."""
    if accumulate:
        return
    keys = key if isinstance(key, tuple) else (key,)
    advanced = [k for k in keys if k is not None and k is not Ellipsis
                and not isinstance(k, (int, np.integer, slice, bool))]
    if len(advanced) != 1:
        return
    k = advanced[0]
    a = getattr(k, "_data", k)
    if a.__class__ is not np.ndarray or a.dtype != _U8 or not a.ndim:
        return
    size = np.size(getattr(values, "_data", values))
    if size == 1:
        raise EmberRuntimeError(f"{name}: masked_fill_ only supports boolean masks, but got mask "
                                "with dtype uint8 (torch fills a one-element value through one "
                                "mask index with masked_fill_; use a bool mask)")


def getitem(t, key):
    """``t[key]``: basic indexing returns a view; advanced indexing a copy.

    An integer index into a 0-dim tensor raises IndexError, as torch's does (``.item()`` is
    what code like ``loss.data[0]``, written for torch < 0.4, means)."""
    if (isinstance(key, (int, np.integer)) and not isinstance(key, (bool, np.bool_))
            and t.dim() == 0):
        raise EmberIndexError(f"getitem: invalid index of a 0-dim tensor (self: "
                              f"{str(t.dtype).split('.')[-1]}[], index {int(key)}). Use "
                              f"`tensor.item()` to convert a 0-dim tensor to a number")
    return G.getitem(t, to_key(key))


def setitem(t, key, value):
    """``t[key] = value`` in place (recorded by autograd as index_put)."""
    _check_byte_mask_fill("setitem", key, value, False)
    G.index_put_(t, to_key(key), value, False)


def _index_put(t, indices, values, accumulate=False, inplace=False):
    """``index_put`` / ``index_put_`` with ``indices`` a tuple of index tensors (torch's
    dtype rule: the values' dtype must be the tensor's); other keys (slices, ints) write as
    ``t[key] = values``, which casts."""
    name = "index_put_" if inplace else "index_put"
    src, dst = getattr(values, "_data", None), getattr(t, "_data", None)
    tensor_keys = all(isinstance(getattr(i, "_data", i), np.ndarray) for i in indices)
    if tensor_keys and src is not None and dst is not None and src.dtype != dst.dtype and \
            not accumulate and len(indices) == 1 and src.size == 1 and \
            getattr(indices[0], "_data", indices[0]).dtype == np.bool_:
        values = values.to(t.dtype)    # one bool mask, one value: torch's masked_fill_, which casts
        src = values._data
    if tensor_keys and src is not None and dst is not None and src.dtype != dst.dtype:
        raise EmberRuntimeError(f"{name}: Index put requires the source and destination dtypes "
                                f"match, got {dst.dtype} for the destination and {src.dtype} "
                                "for the source (setitem casts; index_put does not)")
    _check_byte_mask_fill(name, tuple(indices), values, accumulate)
    fn = G.index_put_ if inplace else G.index_put
    return fn(t, to_key(tuple(indices)), values, accumulate)


def nonzero(input, *, out=None, as_tuple=False):
    """Indices of the non-zero elements: an (n, ndim) int64 tensor, or with ``as_tuple`` one 1-d
    tensor per dimension (a 0-d input counts as 1-d)."""
    idx = G.nonzero(input)
    if not as_tuple:
        return idx
    if input._data.ndim == 0:
        return (G.reshape(idx, (-1,)),) if idx._data.shape[0] == 0 else \
            (G.zeros((idx._data.shape[0],), np.dtype(np.int64)),)
    return tuple(G.unbind(idx, 1))


def where(condition, input=None, other=None):
    """``input`` where ``condition`` is true, else ``other``; ``where(condition)`` alone is
    ``nonzero(condition, as_tuple=True)``, as torch."""
    if input is None and other is None:
        return nonzero(condition, as_tuple=True)
    if input is None or other is None:
        raise TypeError("where() takes a condition alone, or a condition, input and other "
                        f"(got {'input' if other is None else 'other'} without the other)")
    return G.where(condition, input, other)


def _where_method(self, condition, y):
    """``Tensor.where(condition, y)``: ``where(condition, self, y)``, as torch."""
    return G.where(condition, self, y)


def index_put(input, indices, values, accumulate=False):
    """``input`` with ``values`` put at ``indices`` (a tuple of index tensors), added there when
    ``accumulate``."""
    return _index_put(input, indices, values, accumulate)


def _index_put_(self, indices, values, accumulate=False):
    return _index_put(self, indices, values, accumulate, inplace=True)


def _tri_indices(which):
    def indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
        from ember.ops import creation
        creation._check_device(device)
        if row < 0 or col < 0:
            raise EmberRuntimeError(f"{which}_indices: row and col must be non-negative, got "
                                    f"{row} and {col}")
        fn = np.triu_indices if which == "triu" else np.tril_indices
        r, c = fn(row, offset, col)
        return creation.tensor(np.stack([r, c]).astype(np.int64),
                               dtype=_dtype.int64 if dtype is None else dtype)
    indices.__name__ = f"{which}_indices"
    indices.__doc__ = (f"The (2, N) indices of the {'upper' if which == 'triu' else 'lower'} "
                       f"triangle (diagonal ``offset``) of a row x col matrix.")
    return indices


def unravel_index(indices, shape):
    """The coordinates in ``shape`` of the flat ``indices``: a tuple of int64 tensors."""
    from ember.ops import creation
    i = indices._data if isinstance(indices, Tensor) else np.asarray(indices)
    if i.dtype.kind not in "iu":
        raise EmberRuntimeError(f"unravel_index: expected 'indices' to be an integer tensor, "
                                f"got {i.dtype}")
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    n = int(np.prod(shape, dtype=np.int64))
    i = i.astype(np.int64)   # computed in int64, as torch's (a uint8 index and a large shape)
    if i.size and (i.min() < -n or i.max() >= n):
        raise EmberRuntimeError(f"unravel_index: 'indices' must be in range [{-n}, {n - 1}] for "
                                f"shape {list(shape)}")
    coords = np.unravel_index(np.where(i < 0, i + n, i), shape) if shape else ()
    return tuple(creation.tensor(np.asarray(c, np.int64)) for c in coords)


def _put_(self, index, source, accumulate=False):
    return G.copy_(self, G.put(self, index, source, accumulate))


def _fill_diagonal_(self, fill_value, wrap=False):
    """``Tensor.fill_diagonal_``: ``fill_value`` on the main diagonal (positions (i, i, ...)) of
    a tensor of at least 2 dimensions, all equal when more than 2; ``wrap``: a tall matrix's
    diagonal starts again after each N columns plus one row, as torch (and NumPy). A masked
    fill: autograd gives the filled positions no gradient."""
    shape = tuple(self.shape)
    if len(shape) < 2:
        raise EmberRuntimeError(f"fill_diagonal_: dimensions must larger than 1 (got a tensor "
                                f"of shape {list(shape)})")
    if len(shape) > 2 and len(set(shape)) != 1:
        raise EmberRuntimeError(f"fill_diagonal_: all dimensions of input must be of equal "
                                f"length (got shape {list(shape)})")
    mask = np.zeros(shape, np.bool_)
    np.fill_diagonal(mask, True, wrap=wrap)
    return self.masked_fill_(Tensor._make(mask), fill_value)


triu_indices, tril_indices = _tri_indices("triu"), _tri_indices("tril")


def take_along_dim(input, indices, dim=None):
    if dim is None:
        return G.gather(G.reshape(input, (-1,)), 0, G.reshape(indices, (-1,)))
    if input.ndim != indices.ndim:
        raise EmberRuntimeError(f"take_along_dim(): input and indices should have the same "
                                f"number of dimensions, but got {input.ndim} dimensions for "
                                f"input, and {indices.ndim} dimensions for indices")
    d = _norm("take_along_dim", dim, input.ndim)
    a_shape, i_shape = list(input._data.shape), list(indices._data.shape)
    a_shape[d] = i_shape[d] = 1
    shape = list(_broadcast_shape("take_along_dim", [a_shape, i_shape]))
    a_to, i_to = list(shape), list(shape)
    a_to[d], i_to[d] = input._data.shape[d], indices._data.shape[d]
    if tuple(a_to) != input._data.shape:
        input = G.expand(input, tuple(a_to))
    if tuple(i_to) != indices._data.shape:
        indices = G.expand(indices, tuple(i_to))
    n = input._data.shape[d]
    if n:   # as torch 2.13: indices wrap modulo the size (an op, so a trace keeps it)
        indices = G.remainder(indices, n)
    elif indices._data.size:
        raise EmberRuntimeError(f"take_along_dim(): ZeroDivisionError: indices into dimension "
                                f"{d} of size 0 (input: {list(input._data.shape)})")
    return G.gather(input, d, indices)


def _embed(g, shape):
    """``g`` (the leading block of a tensor of ``shape``) padded with zeros to ``shape``."""
    if tuple(g._data.shape) == tuple(shape):
        return g
    key = tuple(slice(0, s) for s in g._data.shape)
    return G.index_put(Tensor._make(np.zeros(tuple(shape), g._data.dtype)), key, g, False)


def scatter_reduce_backward(grad, input, index, src, result, dim, reduce, include_self, needs):
    if input.ndim == 0:  # as the kernel: a 0-d self is a 1-element vector
        flat = [G.reshape(t, (-1,)) for t in (grad, input, index, src, result)]
        gs = scatter_reduce_backward(*flat, 0, reduce, include_self, needs)
        return tuple(None if g is None else G.reshape(g, ()) for g in gs)
    d = _norm("scatter_reduce", dim, input.ndim)
    idx = index._data
    src_s = src if src._data.shape == idx.shape else \
        G.getitem(src, tuple(slice(0, s) for s in idx.shape))
    dt = grad._data.dtype
    if reduce == "sum":
        g_self, g_src = grad, G.gather(grad, d, index)
    elif reduce == "mean":   # the count of each position (kernels.indexing.scatter_count's
        # rule) as ops on index, not read from its values: a trace follows the index
        base = Tensor._make(np.full(input._data.shape, 1.0 if include_self else 0.0, dt))
        count = G.clamp(G.scatter_add(base, d, index, Tensor._make(np.ones(idx.shape, dt))),
                        1.0)
        g_self, g_src = G.div(grad, count), G.gather(G.div(grad, count), d, index)
    elif reduce == "prod":  # zeros handled as torch does: the product of the others
        masked_self = G.masked_fill(input, G.eq(input, 0.0), 1.0)
        masked_self_result = G.scatter_reduce(masked_self, d, index, src_s, "prod",
                                              include_self=include_self)
        g_self = G.div(G.mul(grad, masked_self_result), masked_self)
        src_zero = G.eq(src_s, 0.0)
        zeros_at = G.scatter_add(Tensor._make(np.zeros(input._data.shape, dt)), d, index,
                                 G.to(src_zero, dt, False))
        single = G.logical_and(src_zero, G.eq(G.gather(zeros_at, d, index), 1.0))
        masked_src_result = G.scatter_reduce(input, d, index, G.masked_fill(src_s, single, 1.0),
                                             "prod", include_self=include_self)
        g_src = G.where(single, G.gather(G.mul(grad, masked_src_result), d, index),
                        G.div(G.gather(G.mul(grad, result), d, index),
                              G.masked_fill(src_s, src_zero, 1.0)))
    else:  # amax / amin: shared evenly among the values equal to the result (self counted as
        # torch counts it, also with include_self=False)
        mask_self = G.to(G.eq(input, result), dt, False)
        mask_src = G.to(G.eq(src_s, G.gather(result, d, index)), dt, False)
        share = G.div(grad, G.scatter_add(mask_self, d, index, mask_src))
        g_self = G.mul(share, mask_self)
        g_src = G.mul(G.gather(share, d, index), mask_src)
    if not include_self:
        g_self = G.scatter(g_self, d, index, 0.0)
    return (g_self if needs[0] else None, None,
            _embed(g_src, src._data.shape) if needs[2] else None)


def masked_scatter_source_grad(grad, mask, source_shape):
    taken = G.masked_select(grad, mask)
    n, total = taken._data.size, int(np.prod(source_shape))
    if n < total:
        taken = G.cat([taken, Tensor._make(np.zeros(total - n, grad._data.dtype))], 0)
    return G.reshape(taken, tuple(source_shape))


def take(input, index):
    flat = G.reshape(input, (-1,))
    n = flat._data.shape[0]
    i = index._data
    if i.size and (i.max() >= n or i.min() < -n):
        raise EmberIndexError(f"take: index out of range in self of {n} elements")
    if n:   # take reads [-n, n), index_select [0, n)
        index = G.remainder(index, n)
    return G.reshape(G.index_select(flat, 0, G.reshape(index, (-1,))), tuple(i.shape))


def put(input, index, source, accumulate=False):
    n = input._data.size
    i = index._data
    if i.size and (i.max() >= n or i.min() < -n):
        raise EmberIndexError(f"put: index out of range in self of {n} elements")
    if i.size != source._data.size:
        raise EmberRuntimeError(f"put: expected source and index to have the same number of "
                                f"elements, but got {source._data.size} and {i.size}")
    # the positions are an array made from index's values: a trace would freeze them
    _data_read(index, "put", "the positions written follow index")
    flat = G.index_put(G.reshape(input, (-1,)), (i.reshape(-1).astype(np.int64),),
                       G.reshape(source, (-1,)), accumulate)
    return G.reshape(flat, tuple(input._data.shape))


def argwhere(input):
    return G.nonzero(input)


def nonzero_static(input, size, fill_value=-1):
    if size < 0:
        raise EmberRuntimeError(f"nonzero_static: 'size' must be an non-negative integer, got "
                                f"{size}")
    idx = G.nonzero(input)
    _data_read(input, "nonzero_static", "how much is padded follows the values")
    k, nd = idx._data.shape
    if k >= size:
        return G.narrow(idx, 0, 0, size)
    pad = Tensor._make(np.full((size - k, nd), fill_value, np.int64))
    return G.cat([idx, pad], 0)


def index_reduce(input, dim, index, source, reduce, include_self=True):
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise EmberRuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax "
                                f"or amin but got {reduce}.")
    i = index._data
    if i.ndim > 1 or i.dtype.kind not in "iu":
        raise EmberIndexError(f"index_reduce(): Index is supposed to be a vector of integers, "
                              f"got {i.dtype} of shape {list(i.shape)}")
    if input.ndim == 0:
        return G.reshape(index_reduce(G.reshape(input, (1,)), 0, index,
                                      G.reshape(source, (-1,)), reduce, include_self), ())
    d = _norm("index_reduce", dim, input.ndim)
    check_range(i, input._data.shape[d], "index_reduce", d, EmberIndexError)
    src_shape = source._data.shape if source.ndim else (1,)
    if len(src_shape) != input.ndim or src_shape[d] != i.size:
        raise EmberIndexError(f"index_reduce(): source {list(source._data.shape)} must have "
                              f"self's dimensions {list(input._data.shape)} with index.numel() "
                              f"= {i.size} entries along dim {d}")
    view = [1] * input.ndim
    view[d] = i.size
    full = G.expand(G.reshape(index, tuple(view)), tuple(src_shape))
    return G.scatter_reduce(input, d, full, G.reshape(source, src_shape), reduce,
                            include_self=include_self)


def select(input, dim, index):
    nd = input.ndim
    if nd == 0:
        raise EmberIndexError("select() cannot be applied to a 0-dim tensor.")
    d = _norm("select", dim, nd)
    n = input._data.shape[d]
    if not -n <= index < n:
        raise EmberIndexError(f"select(): index {index} out of range for tensor of size "
                              f"{list(input._data.shape)} at dimension {dim}")
    return G.getitem(input, (slice(None),) * d + (index % n,))


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    from ember.kernels.shape import diagonal
    m = np.zeros(input._data.shape, bool)
    diagonal(m, offset, dim1, dim2)[...] = True
    placed = G.diagonal_backward(src, tuple(input._data.shape), offset, dim1, dim2)
    return G.where(Tensor._make(m), placed, input)


def select_scatter(input, src, dim, index):
    d = _norm("select_scatter", dim, input.ndim)
    n = input._data.shape[d]
    if not -n <= index < n:
        raise EmberIndexError(f"select_scatter(): index {index} out of range for tensor of size "
                              f"{list(input._data.shape)} at dimension {dim}")
    key = (slice(None),) * d + (index % n,)
    want = input._data[key].shape
    if tuple(src._data.shape) != want:
        raise EmberRuntimeError(f"select_scatter: expected src to have a size equal to the slice "
                                f"of self, src size = {list(src._data.shape)}, slice size = "
                                f"{list(want)}")
    return G.index_put(input, key, src, False)


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    d = _norm("slice_scatter", dim, input.ndim)
    key = (slice(None),) * d + (slice(start, end, step),)
    want = input._data[key].shape
    if tuple(src._data.shape) != want:
        raise EmberRuntimeError(f"slice_scatter: expected src to have a size equal to the slice "
                                f"of self, src size = {list(src._data.shape)}, slice size = "
                                f"{list(want)}")
    return G.index_put(input, key, src, False)


def as_strided_scatter(input, src, size, stride, storage_offset=None):
    """A copy of ``input`` (contiguous) with ``src`` written where
    ``copy.as_strided(size, stride, storage_offset)`` reads."""
    from ember.kernels.strided import scatter_indices
    idx = scatter_indices(tuple(input.shape), size, stride, storage_offset)
    if tuple(src.shape) != tuple(idx.shape):
        raise EmberRuntimeError(f"as_strided_scatter: expected src to have a size equal to the "
                                f"slice of self: src {list(src.shape)}, slice "
                                f"{list(idx.shape)}")
    flat = G.index_copy(G.reshape(input, (-1,)), 0, Tensor._make(idx.ravel()),
                        G.reshape(src, (-1,)))
    return G.reshape(flat, tuple(input.shape))


# these raise ember's errors naming them (ember.errors.public)
for _n in ("nonzero", "where", "index_put", "unravel_index", "take_along_dim",
           "scatter_reduce_backward", "masked_scatter_source_grad", "take", "put",
           "argwhere", "nonzero_static", "index_reduce", "select", "diagonal_scatter",
           "select_scatter", "slice_scatter"):
    globals()[_n] = _public(globals()[_n])
del _n
