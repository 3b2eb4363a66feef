"""Shape and indexing ops declared ``composite`` in derivatives.yaml (issue 12): written in other
spec ops, so their gradients, views, tracing and export come from those ops."""
import numpy as np

import ember.autograd._generated as G
from ember.errors import EmberIndexError, EmberRuntimeError, EmberValueError
from ember.errors import public as _public
from ember.tensor import Tensor


def _norm(op, d, nd):
    n = max(nd, 1)
    if not -n <= d < n:
        raise EmberIndexError(f"{op}: dimension {d} out of range (expected to be in range of "
                              f"[{-n}, {n - 1}])")
    return d % n


def _dims(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def movedim(input, source, destination):
    nd = input.ndim
    src = [_norm("movedim", int(d), nd) for d in _dims(source)]
    dst = [_norm("movedim", int(d), nd) for d in _dims(destination)]
    if len(src) != len(dst):
        raise EmberRuntimeError(f"movedim: Invalid source or destination dims: source "
                                f"({list(_dims(source))} dims) should contain the same number of "
                                f"dims as destination ({list(_dims(destination))} dims)")
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise EmberRuntimeError(f"movedim: repeated dim in source {list(_dims(source))} or "
                                f"destination {list(_dims(destination))}")
    order = [None] * nd
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(i for i in range(nd) if i not in src)
    order = [next(rest) if o is None else o for o in order]
    return G.permute(input, tuple(order))


def moveaxis(input, source, destination):
    return movedim(input, source, destination)


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


def diag(input, diagonal=0):
    if input.ndim == 1:
        return G.diag_embed(input, diagonal, 0, 1)
    if input.ndim == 2:
        return G.clone(G.diagonal(input, diagonal, 0, 1))
    raise EmberRuntimeError(f"diag(): Supports 1D or 2D tensors. Got {input.ndim}D")


def diagflat(input, offset=0):
    return G.diag_embed(G.reshape(input, (-1,)), offset, 0, 1)


def broadcast_to(input, size):
    return G.expand(input, tuple(size))


def _broadcast_shape(op, shapes):
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        raise EmberRuntimeError(f"{op}: shapes {[list(s) for s in shapes]} cannot be broadcast "
                                f"together") from None


def broadcast_tensors(tensors):
    shape = _broadcast_shape("broadcast_tensors", [t._data.shape for t in tensors])
    return tuple(G.expand(t, shape) for t in tensors)


def meshgrid(tensors, indexing=None):
    if indexing is None:
        import warnings
        warnings.warn("meshgrid: in an upcoming release, it will be required to pass the "
                      "indexing argument.", UserWarning, stacklevel=3)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise EmberValueError(f"meshgrid: indexing must be one of 'xy' or 'ij', got {indexing!r}")
    if not tensors:
        raise EmberRuntimeError("meshgrid expects a non-empty TensorList")
    for t in tensors:
        if t.ndim > 1:
            raise EmberRuntimeError(f"meshgrid: Expected 0D or 1D tensor in the tensor list but "
                                    f"got a tensor of shape {list(t._data.shape)}")
    pos = list(range(len(tensors)))
    if indexing == "xy" and len(tensors) >= 2:
        pos[0], pos[1] = 1, 0
    shape = [0] * len(tensors)
    for t, p in zip(tensors, pos):
        shape[p] = t._data.size
    out = []
    for t, p in zip(tensors, pos):
        view = [1] * len(tensors)
        view[p] = -1
        out.append(G.expand(G.reshape(t, tuple(view)), tuple(shape)))
    return tuple(out)


def atleast_1d(input):
    return G.reshape(input, (1,)) if input.ndim == 0 else input


def atleast_2d(input):
    if input.ndim == 0:
        return G.reshape(input, (1, 1))
    return G.unsqueeze(input, 0) if input.ndim == 1 else input


def atleast_3d(input):
    if input.ndim == 0:
        return G.reshape(input, (1, 1, 1))
    if input.ndim == 1:
        return G.unsqueeze(G.unsqueeze(input, 0), -1)
    return G.unsqueeze(input, -1) if input.ndim == 2 else input


def _nonempty(op, tensors):
    if not tensors:
        raise EmberRuntimeError(f"{op} expects a non-empty TensorList")
    return tensors


def hstack(tensors):
    ts = [atleast_1d(t) for t in _nonempty("hstack", tensors)]
    return G.cat(ts, 0 if ts[0].ndim == 1 else 1)


def vstack(tensors):
    return G.cat([atleast_2d(t) for t in _nonempty("vstack", tensors)], 0)


def dstack(tensors):
    return G.cat([atleast_3d(t) for t in _nonempty("dstack", tensors)], 2)


def column_stack(tensors):
    ts = [G.reshape(t, (t._data.size, 1)) if t.ndim <= 1 else t
          for t in _nonempty("column_stack", tensors)]
    return G.cat(ts, 1)


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
    return G.gather(input, d, indices)


def rot90(input, k=1, dims=(0, 1)):
    dims = tuple(dims)
    if len(dims) != 2:
        raise EmberRuntimeError(f"rot90: expected total rotation dims == 2, but got dims = "
                                f"{len(dims)}")
    if input.ndim < 2:
        raise EmberRuntimeError(f"rot90: expected total dims >= 2, but got total dims = "
                                f"{input.ndim}")
    d0, d1 = (_norm("rot90", d, input.ndim) for d in dims)
    if d0 == d1:
        raise EmberRuntimeError(f"rot90: expected rotation dims to be different, but got "
                                f"dim0 = {dims[0]} and dim1 = {dims[1]}")
    k %= 4
    if k == 1:
        return G.transpose(G.flip(input, (d1,)), d0, d1)
    if k == 2:
        return G.flip(input, (d0, d1))
    if k == 3:
        return G.transpose(G.flip(input, (d0,)), d0, d1)
    return G.clone(input)


def _repeats_array(repeats):
    r = repeats._data if isinstance(repeats, Tensor) else np.asarray(repeats)
    if r.dtype.kind not in "iu":
        raise EmberRuntimeError(f"repeat_interleave: repeats must be an int or an integer tensor, "
                                f"got {r.dtype}")
    if r.ndim > 1:
        raise EmberRuntimeError(f"repeat_interleave: repeats must be 0-dim or 1-dim tensor, got "
                                f"shape {list(r.shape)}")
    if r.size and r.min() < 0:
        raise EmberRuntimeError("repeat_interleave: repeats can not be negative")
    return r.astype(np.int64)


def repeat_interleave(input, repeats=None, dim=None, output_size=None):
    if repeats is None:  # repeat_interleave(repeats): indices repeated repeats[i] times
        r = _repeats_array(input)
        if r.ndim != 1:
            raise EmberRuntimeError("repeat_interleave: repeats must be 1-dim")
        return Tensor._make(np.repeat(np.arange(r.size, dtype=np.int64), r))
    if dim is None:
        input, d = G.reshape(input, (-1,)), 0
    else:
        d = _norm("repeat_interleave", dim, input.ndim)
    if input.ndim == 0:
        input = G.reshape(input, (1,))
    n = input._data.shape[d]
    r = _repeats_array(repeats)
    if r.ndim == 0 or r.size == 1:
        r = np.full(n, int(r.reshape(())) if r.ndim == 0 else int(r[0]), np.int64)
    elif r.size != n:
        raise EmberRuntimeError(f"repeat_interleave: repeats must have the same size as input "
                                f"along dim, but got repeats.size(0) = {r.size} and "
                                f"input.size({d}) = {n}")
    index = np.repeat(np.arange(n, dtype=np.int64), r)
    if output_size is not None and output_size != index.size:
        raise EmberRuntimeError(f"repeat_interleave: output_size {output_size} does not match "
                                f"the sum of repeats {index.size}")
    return G.index_select(input, d, Tensor._make(index))


def clamp_min(input, min):
    return G.clamp(input, min, None)


def clamp_max(input, max):
    return G.clamp(input, None, max)


def floor_divide(input, other):
    return G.div(input, other, rounding_mode="floor")


def _embed(g, shape):
    """``g`` (the leading block of a tensor of ``shape``) padded with zeros to ``shape``."""
    if tuple(g._data.shape) == tuple(shape):
        return g
    key = tuple(slice(0, s) for s in g._data.shape)
    return G.index_put(Tensor._make(np.zeros(tuple(shape), g._data.dtype)), key, g, False)


def scatter_reduce_backward(grad, input, index, src, result, dim, reduce, include_self, needs):
    from ember.kernels.index import scatter_count
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
    elif reduce == "mean":
        count = Tensor._make(scatter_count(input._data.shape, idx, d, include_self).astype(dt))
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


# every composite raises ember's errors naming it (ember.errors.public)
for _n, _f in list(globals().items()):
    if not _n.startswith("_") and callable(_f) and getattr(_f, "__module__", None) == __name__:
        globals()[_n] = _public(_f)
del _n, _f
