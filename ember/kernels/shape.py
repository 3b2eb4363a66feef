"""Shape kernels. View kernels return NumPy views; dispatch links them to their base."""
import operator

import numpy as np

from ember.kernels.transpose import tiled as _tiled, transposed as _transposed
from ember.kernels.errors import KernelDimensionError, KernelError, KernelValueError
from ember.kernels.reduction import norm_dims


def infer_shape(shape, numel):
    """Resolve one -1 in ``shape``; KernelError when the sizes do not match ``numel``."""
    shape = tuple(int(s) for s in shape)
    if shape.count(-1) > 1:
        raise KernelError("only one dimension can be inferred")
    known = 1
    for s in shape:
        if s != -1:
            if s < 0:
                raise KernelError(f"invalid shape dimension {s}")
            known *= s
    if -1 in shape:
        if known == 0 or numel % known:
            raise KernelError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape = tuple(numel // known if s == -1 else s for s in shape)
    elif known != numel:
        raise KernelError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return shape


def view(a, shape):
    shape = infer_shape(shape, a.size)
    v = a.view()
    try:
        v.shape = shape
    except AttributeError:
        raise KernelError(
            f"view size is not compatible with input tensor's size and stride (at least one "
            f"dimension spans across two contiguous subspaces) for shape {list(a.shape)} -> "
            f"{list(shape)}. Use .reshape(...) instead.") from None
    return v


def reshape(a, shape):
    shape = infer_shape(shape, a.size)
    if _swapped(a):
        v = a.view()
        try:
            v.shape = shape     # a view where one exists (as NumPy's and torch's reshape)
            return v
        except AttributeError:
            return contiguous(a).reshape(shape)
    return np.reshape(a, shape)


def _dim(d, ndim):
    return norm_dims(d, ndim)[0] if ndim else 0


def flatten(a, start_dim=0, end_dim=-1):
    if a.ndim == 0:
        return a.reshape(1)
    s, e = _dim(start_dim, a.ndim), _dim(end_dim, a.ndim)
    if s > e:
        raise KernelError("flatten() has invalid args: start_dim cannot come after end_dim")
    shape = a.shape[:s] + (-1 if a.size else int(np.prod(a.shape[s:e + 1])),) + a.shape[e + 1:]
    return np.reshape(a, shape)


def unflatten(a, dim, sizes):
    d = _dim(dim, a.ndim)
    inner = infer_shape(sizes, a.shape[d])
    return np.reshape(a, a.shape[:d] + inner + a.shape[d + 1:])


def permute(a, dims):
    if len(dims) != a.ndim:
        raise KernelError(f"number of dims don't match in permute: input has {a.ndim} dims, "
                          f"got {len(dims)}")
    axes = [_dim(d, a.ndim) for d in dims]
    if len(set(axes)) != len(axes):
        raise KernelError("repeated dim in permute")
    return np.transpose(a, axes)


def transpose(a, dim0, dim1):
    if a.ndim == 0:
        return a.view()
    return np.swapaxes(a, _dim(dim0, a.ndim), _dim(dim1, a.ndim))


def t(a):
    if a.ndim > 2:
        raise KernelError(f"t() expects a tensor with <= 2 dimensions, but self is {a.ndim}D")
    return a.T


def squeeze(a, dim=None):
    if dim is None:
        return np.squeeze(a)
    dims = norm_dims(dim, a.ndim)
    dims = tuple(d for d in dims if a.shape[d] == 1)
    return np.squeeze(a, axis=dims) if dims else a.view()


def unsqueeze(a, dim):
    n = a.ndim + 1
    if not -n <= dim < n:
        raise KernelDimensionError(f"dimension {dim} out of range (expected to be in range of "
                                   f"[{-n}, {n - 1}])")
    return np.expand_dims(a, dim % n)


def expand(a, size):
    size = tuple(size)
    if len(size) < a.ndim:
        raise KernelError(f"the number of sizes provided ({len(size)}) must be greater or equal to "
                          f"the number of dimensions in the tensor ({a.ndim})")
    lead = len(size) - a.ndim
    target = []
    for i, s in enumerate(size):
        if i < lead:
            if s < 0:
                raise KernelError(f"the expanded size {s} is not allowed in a leading dimension")
            target.append(s)
        else:
            cur = a.shape[i - lead]
            if s == -1:
                target.append(cur)
            elif cur != s and cur != 1:
                raise KernelError(f"the expanded size of the tensor ({s}) must match the existing "
                                  f"size ({cur}) at non-singleton dimension {i}. Target sizes: "
                                  f"{list(size)}. Tensor sizes: {list(a.shape)}")
            else:
                target.append(s)
    return np.broadcast_to(a, tuple(target))


def repeat(a, repeats):
    repeats = tuple(repeats)
    if len(repeats) < a.ndim:
        raise KernelError("number of dimensions of repeat dims can not be smaller than number of "
                          "dimensions of tensor")
    a = a.reshape((1,) * (len(repeats) - a.ndim) + a.shape)
    return np.tile(a, repeats)


def tile(a, dims):
    dims = tuple(dims)
    if len(dims) < a.ndim:
        dims = (1,) * (a.ndim - len(dims)) + dims
    return repeat(a, dims)


def _list_dim(op, dim):
    """``dim`` as an int; a TypeError for torch.cat(a, b) / torch.stack(a, b), where the second
    tensor lands in ``dim``."""
    try:
        if not isinstance(dim, bool):
            return operator.index(dim)
    except TypeError:
        pass
    hint = f": pass the tensors as one list or tuple, {op}([a, b], dim=0)" \
        if hasattr(dim, "shape") else ""
    raise TypeError(f"argument 'dim' must be int, not {type(dim).__name__}{hint}")


def cat(arrays, dim=0):
    if dim.__class__ is not int:
        dim = _list_dim("cat", dim)
    arrays = [x for x in arrays if not (x.ndim == 1 and x.shape[0] == 0)] or arrays[:1]
    if not arrays:
        raise KernelValueError("expected a non-empty list of Tensors")
    nd = arrays[0].ndim
    if nd == 0:
        raise KernelError("zero-dimensional tensor cannot be concatenated")
    d = _dim(dim, nd)
    for i, x in enumerate(arrays):
        if x.ndim != nd:
            raise KernelError(f"Tensors must have same number of dimensions: got {nd} and "
                              f"{x.ndim} (tensor 0 has shape {list(arrays[0].shape)} and tensor "
                              f"{i} has {list(x.shape)})")
        if x.shape[:d] != arrays[0].shape[:d] or x.shape[d + 1:] != arrays[0].shape[d + 1:]:
            raise KernelError(f"sizes of tensors must match except in dimension {d}: tensor 0 has "
                              f"shape {list(arrays[0].shape)} and tensor {i} has {list(x.shape)}")
    from ember.kernels.dtypes import result_type
    dt = result_type(*arrays)
    return np.concatenate(arrays, axis=d, dtype=dt)


def stack(arrays, dim=0):
    if dim.__class__ is not int:
        dim = _list_dim("stack", dim)
    if not arrays:
        raise KernelError("expected a non-empty list of Tensors")
    for i, x in enumerate(arrays):
        if x.shape != arrays[0].shape:
            raise KernelError(f"stack expects each tensor to be equal size, but got "
                              f"{list(arrays[0].shape)} at entry 0 and {list(x.shape)} at entry {i}")
    n = arrays[0].ndim + 1
    if not -n <= dim < n:
        raise KernelDimensionError(f"dimension {dim} out of range (expected to be in range of "
                                   f"[{-n}, {n - 1}])")
    from ember.kernels.dtypes import result_type
    return np.stack(arrays, axis=dim % n, dtype=result_type(*arrays))


def split_with_sizes(a, split_sizes, dim=0):
    d = _dim(dim, a.ndim)
    if sum(split_sizes) != a.shape[d]:
        raise KernelError(f"split_with_sizes expects split_sizes to sum exactly to {a.shape[d]} "
                          f"(input tensor's size at dimension {d}), but got split_sizes="
                          f"{list(split_sizes)}")
    idx = np.cumsum(split_sizes)[:-1]
    return tuple(np.split(a, idx, axis=d))


def split(a, split_size, dim=0):
    if not isinstance(split_size, (int, np.integer)):
        return split_with_sizes(a, tuple(split_size), dim)
    d = _dim(dim, a.ndim)
    n = a.shape[d]
    if split_size <= 0 and n > 0:
        raise KernelError(f"split_size must be positive, got {split_size}")
    sizes = [split_size] * (n // split_size) if split_size else []
    if split_size and n % split_size:
        sizes.append(n % split_size)
    return split_with_sizes(a, sizes or [0], d)


def chunk(a, chunks, dim=0):
    if chunks <= 0:
        raise KernelError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    d = _dim(dim, a.ndim)
    n = a.shape[d]
    if not n:   # an empty dimension gives ``chunks`` empty pieces, as torch's
        return split_with_sizes(a, [0] * chunks, d)
    return split(a, -(-n // chunks), d)


def unbind(a, dim=0):
    d = _dim(dim, a.ndim)
    return tuple(a[(slice(None),) * d + (i,)] for i in range(a.shape[d]))


def narrow(a, dim, start, length):
    d = _dim(dim, a.ndim)
    n = a.shape[d]
    if start < 0:
        start += n
    if not 0 <= start <= n or length < 0 or start + length > n:
        raise KernelError(f"start ({start}) + length ({length}) exceeds dimension size ({n}).")
    return a[(slice(None),) * d + (slice(start, start + length),)]


def flip(a, dims):
    axes = norm_dims(dims, a.ndim)
    return np.ascontiguousarray(np.flip(a, axis=axes)) if axes else a.copy()


def roll(a, shifts, dims=None):
    if dims is None or dims == ():
        return np.roll(a.reshape(-1), shifts).reshape(a.shape)
    if isinstance(dims, int):
        dims = (dims,)
    if isinstance(shifts, int):
        shifts = (shifts,)
    if len(shifts) != len(dims):
        raise KernelError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims: {len(dims)}")
    return np.roll(a, shifts, axis=tuple(_dim(d, a.ndim) for d in dims))


def _swapped(a):
    """Whether ``a`` is not C-contiguous but a C-contiguous array with its last two axes
    swapped (``x.t()``, ``x.transpose(-1, -2)``), large enough for the tiled copy
    (``kernels.transpose.tiled``)."""
    return (not a.flags.c_contiguous and a.ndim >= 2 and _tiled(a.shape[-1], a.shape[-2])
            and np.swapaxes(a, -1, -2).flags.c_contiguous)


def contiguous(a):
    """``a`` in C order; a swapped-axes view copied in tiles (``kernels.transpose``; NumPy's
    copy of a (2304, 512) float32 ``x.t()``: 7.7 ms, tiled 1.2; torch 1.0)."""
    if a.flags.c_contiguous:
        return a
    if _swapped(a):
        return _transposed(np.swapaxes(a, -1, -2))
    return np.ascontiguousarray(a)


def clone(a):
    return _transposed(np.swapaxes(a, -1, -2)) if _swapped(a) else a.copy()


def to_dtype(a, dtype, copy=False):
    if a.dtype == dtype and not copy:
        return a
    if a.dtype.kind == "c" and np.dtype(dtype).kind != "c":
        a = a.real  # complex to real keeps the real part, as torch
    return a.astype(dtype)


def tril(a, diagonal=0):
    if a.ndim < 2:
        raise KernelError("tril: input tensor must have at least 2 dimensions")
    return np.tril(a, diagonal)


def triu(a, diagonal=0):
    if a.ndim < 2:
        raise KernelError("triu: input tensor must have at least 2 dimensions")
    return np.triu(a, diagonal)


def _pad_width(ndim, pad):
    if len(pad) % 2:
        raise KernelError(f"padding length must be divisible by 2, got {len(pad)}")
    if len(pad) // 2 > ndim:
        raise KernelError(f"padding length ({len(pad)}) is too large for a {ndim}-d input")
    width = [(0, 0)] * ndim
    for i in range(len(pad) // 2):
        width[ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    return width


def pad(a, pad, mode="constant", value=None):
    width = _pad_width(a.ndim, pad)
    neg = any(l < 0 or r < 0 for l, r in width)
    if neg and mode == "replicate":  # torch: out[i] = a[clip(i - left, 0, n - 1)] per axis
        for ax, (l, r) in enumerate(width):
            if l or r:
                if a.shape[ax] == 0:
                    raise KernelError(f"replicate padding of the empty dimension {ax}")
                a = np.take(a, np.clip(np.arange(-l, a.shape[ax] + r), 0, a.shape[ax] - 1), ax)
        return a
    if mode == "circular":
        for i, (l, r) in enumerate(width):
            if l > a.shape[i] or r > a.shape[i]:    # torch wraps at most once
                raise KernelError(f"Padding value causes wrapping around more than once. "
                                  f"(padding ({l}, {r}) at dimension {i} of input "
                                  f"{list(a.shape)})")
    if neg:  # crop first (as torch for constant, reflect and circular), then pad the rest
        sl = tuple(slice(-l if l < 0 else 0, a.shape[i] + r if r < 0 else None)
                   for i, (l, r) in enumerate(width))
        a = a[sl]
        width = [(max(l, 0), max(r, 0)) for l, r in width]
    if mode == "constant":
        return np.pad(a, width, mode="constant", constant_values=0 if value is None else value)
    if mode == "reflect":
        for i, (l, r) in enumerate(width):
            if (l or r) and (l >= a.shape[i] or r >= a.shape[i]):
                raise KernelError(f"padding size should be less than the corresponding input "
                                  f"dimension, but got padding ({l}, {r}) at dimension {i} of "
                                  f"input {list(a.shape)}")
        return np.pad(a, width, mode="reflect")
    if mode == "replicate":
        return np.pad(a, width, mode="edge")
    if mode == "circular":
        return np.pad(a, width, mode="wrap")
    raise KernelError(f"unsupported padding mode {mode!r}")


def pad_backward(grad, input_shape, pad, mode="constant"):
    """Gradient of ``pad`` w.r.t. its input (the padded regions folded back for reflect/replicate)."""
    width = _pad_width(len(input_shape), pad)
    if mode == "constant":
        sl = []
        for i, (l, r) in enumerate(width):
            sl.append(slice(l, l + input_shape[i]) if l >= 0 else slice(0, grad.shape[i]))
        g = grad[tuple(sl)]
        if any(l < 0 or r < 0 for l, r in width):
            out = np.zeros(input_shape, grad.dtype)
            dst = tuple(slice(-l if l < 0 else 0, input_shape[i] + r if r < 0 else None)
                        for i, (l, r) in enumerate(width))
            out[dst] = grad[tuple(slice(max(l, 0), max(l, 0) + (out[dst].shape[i]))
                                  for i, (l, r) in enumerate(width))]
            return out
        return np.ascontiguousarray(g)
    # reflect / replicate / circular: scatter-add through the index map of each padded axis
    if mode != "replicate" and any(l < 0 or r < 0 for l, r in width):
        # the forward cropped first: fold the padding back, then embed the kept part
        crop = tuple(slice(-l if l < 0 else 0, input_shape[i] + r if r < 0 else None)
                     for i, (l, r) in enumerate(width))
        out = np.zeros(tuple(input_shape), grad.dtype)
        kept = out[crop].shape
        out[crop] = _fold_pad(grad, kept, [(max(l, 0), max(r, 0)) for l, r in width], mode)
        return out
    return _fold_pad(grad, input_shape, width, mode)


def _fold_pad(grad, input_shape, width, mode):
    """The gradient of a reflect / replicate / circular pad: each padded axis's border slices
    added back onto the positions they copied (a replicate pad's negative widths through the
    index map, ``indexing.add_at_axis``)."""
    from ember.kernels.indexing import add_at_axis
    out = grad
    for ax in range(len(input_shape)):
        l, r = width[ax]
        if l == 0 and r == 0:
            continue
        n = input_shape[ax]
        if l < 0 or r < 0:
            idx = np.clip(np.arange(-l, n + r), 0, n - 1)
            shape = list(out.shape)
            shape[ax] = n
            acc = np.zeros(shape, grad.dtype)
            add_at_axis(acc, ax, idx, out)
            out = acc
            continue
        lead = (slice(None),) * ax

        def at(a, *sl):
            return a[lead + sl]
        acc = at(out, slice(l, l + n)).copy()
        left, right = at(out, slice(0, l)), at(out, slice(l + n, None))
        if mode == "reflect":       # out[i] = in[l - i] left, out[l + n + j] = in[n - 2 - j] right
            at(acc, slice(1, l + 1))[...] += np.flip(left, ax)
            at(acc, slice(n - 1 - r, n - 1))[...] += np.flip(right, ax)
        elif mode == "replicate":   # the edge values
            if l:
                at(acc, slice(0, 1))[...] += left.sum(ax, keepdims=True)
            if r:
                at(acc, slice(n - 1, n))[...] += right.sum(ax, keepdims=True)
        else:                       # circular: out[i] = in[n - l + i], out[l + n + j] = in[j]
            at(acc, slice(n - l, n))[...] += left
            at(acc, slice(0, r))[...] += right
        out = acc
    return out if out is not grad else out.copy()


def diagonal(a, offset, dim1, dim2):
    """A writable view of the diagonal ``offset`` of the planes (dim1, dim2), last in the result."""
    nd = a.ndim
    if nd < 2:
        raise KernelError(f"diagonal: expected a tensor with at least 2 dimensions, got shape "
                          f"{list(a.shape)}")
    d1, d2 = _dim(dim1, nd), _dim(dim2, nd)
    if d1 == d2:
        raise KernelError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    sl = [slice(None)] * nd
    if offset >= 0:
        sl[d2] = slice(min(offset, a.shape[d2]), None)
    else:
        sl[d1] = slice(min(-offset, a.shape[d1]), None)
    b = a[tuple(sl)]
    rest = [i for i in range(nd) if i not in (d1, d2)]
    shape = tuple(b.shape[i] for i in rest) + (min(b.shape[d1], b.shape[d2]),)
    strides = tuple(b.strides[i] for i in rest) + (b.strides[d1] + b.strides[d2],)
    return np.lib.stride_tricks.as_strided(b, shape, strides, writeable=b.flags.writeable)


def diagonal_backward(grad, input_shape, offset, dim1, dim2):
    """Gradient of ``diagonal``: ``grad`` written on that diagonal of zeros of ``input_shape``."""
    out = np.zeros(tuple(input_shape), grad.dtype)
    diagonal(out, offset, dim1, dim2)[...] = grad
    return out


def diag_embed(a, offset, dim1, dim2):
    """Matrices (in dims dim1, dim2 of the result) whose diagonal ``offset`` is ``a``'s last dim."""
    if a.ndim == 0:
        raise KernelError("diag_embed: expected a tensor with at least 1 dimension, got a 0-d one")
    nd = a.ndim + 1
    d1, d2 = _dim(dim1, nd), _dim(dim2, nd)
    if d1 == d2:
        raise KernelError(f"diag_embed: diagonal dimensions cannot be identical {dim1}, {dim2}")
    n = a.shape[-1] + abs(int(offset))
    shape = list(a.shape[:-1])
    for d in sorted((d1, d2)):
        shape.insert(d, n)
    out = np.zeros(shape, a.dtype)
    diagonal(out, offset, d1, d2)[...] = a
    return out


def unfold(a, dimension, size, step):
    """A view of all windows of ``size`` elements, ``step`` apart, along ``dimension`` (the
    window is the new last dimension)."""
    d = _dim(dimension, a.ndim)
    n = a.shape[d] if a.ndim else 1
    if size < 0 or size > n:
        raise KernelError(f"unfold: maximum size for tensor at dimension {d} is {n} but size "
                          f"is {size}")
    if step <= 0:
        raise KernelError(f"unfold: step is {step} but must be > 0")
    if a.ndim == 0:
        return np.lib.stride_tricks.as_strided(a, (size,), (0,), writeable=a.flags.writeable)
    shape = a.shape[:d] + ((n - size) // step + 1,) + a.shape[d + 1:] + (size,)
    strides = a.strides[:d] + (a.strides[d] * step,) + a.strides[d + 1:] + (a.strides[d],)
    return np.lib.stride_tricks.as_strided(a, shape, strides, writeable=a.flags.writeable)


def unfold_backward(grad, input_shape, dimension, size, step):
    """Gradient of ``unfold``: each window's gradient added back where the window came from."""
    shape = tuple(input_shape)
    if not shape:
        return np.sum(grad, dtype=grad.dtype).reshape(())
    d = _dim(dimension, len(shape))
    out = np.zeros(shape, grad.dtype)
    nwin = grad.shape[d]
    for k in range(size):
        sl = (slice(None),) * d + (slice(k, k + (nwin - 1) * step + 1, step),)
        out[sl] += grad[..., k]
    return out


def broadcast_axes(from_shape, shape):
    """The axes of ``from_shape`` to sum over to undo broadcasting ``shape`` to it: the leading
    ones ``shape`` lacks and those where ``shape`` has 1."""
    lead = len(from_shape) - len(shape)
    return tuple(range(lead)) + tuple(i + lead for i, s in enumerate(shape)
                                      if s == 1 and from_shape[i + lead] != 1)


def sum_to_shape(a, shape):
    """Sum a broadcast array back down to ``shape`` (in ``a``'s dtype)."""
    shape = tuple(shape)
    if a.shape == shape:
        return a
    out = np.sum(a, axis=broadcast_axes(a.shape, shape), keepdims=True, dtype=a.dtype)
    return out.reshape(shape)


def copy_from(a, src):
    """``src`` broadcast to ``a``'s shape and cast to its dtype (the value of ``a.copy_(src)``)."""
    try:
        return np.broadcast_to(src, a.shape).astype(a.dtype, copy=True)
    except ValueError:
        raise KernelError(f"the source of shape {list(np.shape(src))} cannot be broadcast to the "
                          f"destination of shape {list(a.shape)}") from None


def size(a, dim):
    """The length of dimension ``dim`` of ``a`` as a 0-d int64 array (the ``size`` op the tracer
    records when Python reads a shape)."""
    return np.array(a.shape[dim], np.int64)


def copy_inplace(dst, src):
    """Write ``src`` into ``dst`` (broadcasting, unsafe cast) and return ``dst``."""
    np.copyto(dst, src, casting="unsafe")
    return dst
