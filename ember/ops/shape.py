"""Shape ops declared ``composite`` in ember/ops/spec/shape.yaml (``movedim``, ``hstack``,
``tensor_split``, the ``*_copy`` ops, ...): written in other spec ops, so their gradients, views,
tracing and export come from those ops; and torch's entry points and Tensor methods of the
family (``atleast_*d`` on several tensors, ``broadcast_shapes``, ``view(dtype)``, ``T``/``mT``/
``mH``/``H``, ``resize_``)."""
import builtins

import numpy as np

from ember.autograd._generated import functions as G
from ember.autograd.formulas import _varargs_or_keyword
from ember import _dtype
from ember.errors import DimensionError, EmberIndexError, EmberRuntimeError, EmberValueError
from ember.errors import public as _public
from ember.ops.creation import _ints
from ember.tensor import Tensor, view_dtype


def _norm(op, d, nd):
    n = max(nd, 1)
    if not -n <= d < n:
        raise DimensionError(f"{op}: dimension {d} out of range (expected to be in range of "
                              f"[{-n}, {n - 1}])")
    return d % n


def _data_read(t, op, why):
    """Tell an active tracer that ``op`` read ``t``'s values in Python (they are frozen)."""
    from ember.autograd.state import STATE
    read = getattr(STATE.tracer, "data_read", None)
    if read is not None:
        read(t, op, why)


def _dims(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def movedim(input, source, destination):
    nd = input.ndim
    if nd == 0:  # only dims 0 / -1, which leave a 0-d tensor as it is
        for d in _dims(source) + _dims(destination):
            _norm("movedim", int(d), 0)
        return G.permute(input, ())
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
    if isinstance(repeats, Tensor):
        _data_read(repeats, "repeat_interleave", "the output's shape follows repeats")
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


def fliplr(input):
    if input.ndim < 2:
        raise EmberRuntimeError(f"fliplr: Input must be >= 2-d, got {input.ndim}-d")
    return G.flip(input, (1,))


def flipud(input):
    if input.ndim < 1:
        raise EmberRuntimeError("flipud: Input must be >= 1-d, got a 0-d tensor")
    return G.flip(input, (0,))


def ravel(input):
    return G.reshape(input, (-1,))


def tensor_split(input, indices_or_sections, dim=0):
    if input.ndim == 0:
        raise EmberRuntimeError("tensor_split: expected at least a 1-dimensional tensor")
    d = _norm("tensor_split", dim, input.ndim)
    n = input._data.shape[d]
    ios = indices_or_sections
    if isinstance(ios, Tensor):
        _data_read(ios, "tensor_split", "the split points follow indices_or_sections")
        if ios._data.dtype.kind not in "iu" or ios.ndim > 1:
            raise EmberRuntimeError(f"tensor_split: indices_or_sections must be a 0-d or 1-d "
                                    f"integer tensor, got {ios._data.dtype} of shape "
                                    f"{list(ios._data.shape)}")
        ios = int(ios._data) if ios.ndim == 0 else [int(i) for i in ios._data]
    if isinstance(ios, (int, np.integer)):
        if ios <= 0:
            raise EmberRuntimeError(f"tensor_split: number of sections must be larger than 0, "
                                    f"got {ios}")
        q, r = divmod(n, int(ios))
        sizes = [q + 1] * r + [q] * (int(ios) - r)
        bounds = np.cumsum([0] + sizes)
    else:
        cuts = [min(max(int(i) + (n if i < 0 else 0), 0), n) for i in ios]
        bounds = [0] + cuts + [n]
    return tuple(G.narrow(input, d, int(a), max(int(b) - int(a), 0))
                 for a, b in zip(bounds[:-1], bounds[1:]))


def _split_along(op, input, ios, d):
    if isinstance(ios, (int, np.integer)) and input._data.shape[d] % ios:
        raise EmberRuntimeError(f"{op} attempted to split along dimension {d}, but the size of "
                                f"the dimension {input._data.shape[d]} is not divisible by the "
                                f"split_size {ios}!")
    return tensor_split(input, ios, d)


def hsplit(input, indices_or_sections):
    if input.ndim < 1:
        raise EmberRuntimeError("hsplit: requires a tensor with at least 1 dimension, but got a "
                                "tensor with 0 dimensions!")
    return _split_along("hsplit", input, indices_or_sections, 1 if input.ndim > 1 else 0)


def vsplit(input, indices_or_sections):
    if input.ndim < 2:
        raise EmberRuntimeError(f"vsplit: requires a tensor with at least 2 dimension, but got a "
                                f"tensor with {input.ndim} dimensions!")
    return _split_along("vsplit", input, indices_or_sections, 0)


def dsplit(input, indices_or_sections):
    if input.ndim < 3:
        raise EmberRuntimeError(f"dsplit: requires a tensor with at least 3 dimension, but got a "
                                f"tensor with {input.ndim} dimensions!")
    return _split_along("dsplit", input, indices_or_sections, 2)


def _copy_of(view):
    def copy(*args, **kwargs):
        out = view(*args, **kwargs)
        if isinstance(out, (tuple, list)):
            return type(out)(G.clone(o) for o in out)
        return G.clone(out)
    return copy


expand_copy = _copy_of(lambda input, size: G.expand(input, tuple(size)))
diagonal_copy = _copy_of(lambda input, offset=0, dim1=0, dim2=1:
                         G.diagonal(input, offset, dim1, dim2))
permute_copy = _copy_of(lambda input, dims: G.permute(input, tuple(dims)))
narrow_copy = _copy_of(lambda input, dim, start, length: G.narrow(input, dim, start, length))
view_copy = _copy_of(lambda input, size: G.view(input, tuple(size)))
unbind_copy = _copy_of(lambda input, dim=0: tuple(G.unbind(input, dim)))
unfold_copy = _copy_of(lambda input, dimension, size, step: G.unfold(input, dimension, size, step))
squeeze_copy = _copy_of(lambda input, dim=None: G.squeeze(input, dim))
unsqueeze_copy = _copy_of(lambda input, dim: G.unsqueeze(input, dim))
transpose_copy = _copy_of(lambda input, dim0, dim1: G.transpose(input, dim0, dim1))
t_copy = _copy_of(lambda input: G.t(input))
alias_copy = _copy_of(lambda input: input)
split_with_sizes_copy = _copy_of(lambda input, split_sizes, dim=0:
                                 tuple(G.split_with_sizes(input, tuple(split_sizes), dim)))
select_copy = _copy_of(lambda input, dim, index: G.select(input, dim, index))
split_copy = _copy_of(lambda input, split_size, dim=0: tuple(G.split(input, split_size, dim)))
view_as_real_copy = _copy_of(lambda input: G.view_as_real(input))
view_as_complex_copy = _copy_of(lambda input: G.view_as_complex(input))
detach_copy = _copy_of(lambda input: input.detach())
slice_copy = _copy_of(lambda input, dim=0, start=None, end=None, step=1:
                      input[(slice(None),) * (dim % builtins.max(input.dim(), 1))
                            + (slice(start, end, step),)])
for _n in ("expand_copy", "diagonal_copy", "permute_copy", "narrow_copy", "view_copy",
           "unbind_copy", "unfold_copy", "squeeze_copy", "unsqueeze_copy", "transpose_copy",
           "t_copy", "alias_copy", "split_with_sizes_copy", "select_copy", "split_copy",
           "view_as_real_copy", "view_as_complex_copy", "detach_copy", "slice_copy"):
    globals()[_n].__name__ = globals()[_n].__qualname__ = _n
    globals()[_n].__module__ = __name__


def unsafe_split(input, split_size, dim=0):
    return tuple(G.split(input, split_size, dim))


def unsafe_chunk(input, chunks, dim=0):
    return tuple(G.chunk(input, chunks, dim))


def sum_to_size(input, size):
    from ember.kernels.shape import broadcast_axes
    size = tuple(size)
    try:
        np.broadcast_shapes(size, input._data.shape)
        ok = np.broadcast_shapes(size, input._data.shape) == input._data.shape
    except ValueError:
        ok = False
    if not ok:
        raise EmberRuntimeError(f"sum_to_size: size {list(size)} is not expandable to size "
                                f"{list(input._data.shape)}")
    if size == input._data.shape and input.ndim:
        return input
    if input._data.dtype == np.bool_:  # summed as torch sums bools (a 0-d one too): to int64
        input = G.to(input, np.dtype(np.int64), False)
    dims = broadcast_axes(input._data.shape, size)
    out = G.sum(input, dims, True) if dims else input
    return G.reshape(out, size)


def cartesian_prod(tensors):
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(tensors, "ij")
    return G.stack([G.reshape(t, (-1,)) for t in grids], 1)


def combinations(input, r=2, with_replacement=False):
    import itertools
    if input.ndim != 1:
        raise EmberRuntimeError(f"combinations: Expect a 1D vector, but got shape "
                                f"{list(input._data.shape)}")
    if r < 0:
        raise EmberRuntimeError(f"combinations: Expect a non-negative number, but got {r}")
    if r == 0:
        return Tensor._make(np.zeros(0, input._data.dtype))
    pick = itertools.combinations_with_replacement if with_replacement else \
        itertools.combinations
    rows = np.array(list(pick(range(input._data.shape[0]), r)), np.int64).reshape(-1, r)
    return G.stack([G.index_select(input, 0, Tensor._make(rows[:, j].copy()))
                    for j in range(r)], 1)


def block_diag(tensors):
    mats = []
    for t in tensors:
        if t.ndim > 2:
            raise EmberRuntimeError(f"block_diag: Input tensors must have 2 or fewer dimensions. "
                                    f"Input has {t.ndim} dimensions")
        mats.append(G.reshape(t, (1, 1)) if t.ndim == 0 else
                    G.reshape(t, (1, -1)) if t.ndim == 1 else t)
    if not mats:  # as torch: a (1, 0) float32 tensor
        return Tensor._make(np.zeros((1, 0), np.float32))
    from ember.kernels.dtypes import result_type
    dt = result_type(*[m._data for m in mats])
    total = sum(m._data.shape[1] for m in mats)
    rows, left = [], 0
    for m in mats:
        w = m._data.shape[1]
        m = m if m._data.dtype == dt else G.to(m, dt, False)
        rows.append(G.pad(m, (left, total - left - w), "constant", 0))
        left += w
    return G.cat(rows, 0)


def diff(input, n=1, dim=-1, prepend=None, append=None):
    if input.ndim == 0:
        raise EmberRuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise EmberRuntimeError(f"order must be non-negative but got {n}")
    d = _norm("diff", dim, input.ndim)
    if n == 0:  # as torch: prepend and append are then ignored
        return input
    parts = [p for p in (prepend, input, append) if p is not None]
    x = G.cat(parts, d) if len(parts) > 1 else input
    for _ in range(n):
        m = x._data.shape[d]
        if m == 0:
            break
        hi, lo = G.narrow(x, d, 1, m - 1), G.narrow(x, d, 0, m - 1)
        x = G.logical_xor(hi, lo) if x._data.dtype == np.bool_ else G.sub(hi, lo)
    return x


def constant_pad_nd(input, pad, value=0):
    return G.pad(input, tuple(pad), "constant", value)


def as_strided_copy(input, size, stride, storage_offset=None):
    """A contiguous copy of ``input.as_strided(size, stride, storage_offset)``."""
    return G.clone(G.as_strided(input, size, stride, storage_offset))


def _memory_format(op, memory_format):
    if memory_format is not None and not isinstance(memory_format, _dtype.memory_format):
        from ember.errors import EmberTypeError
        raise EmberTypeError(f"{op}(): memory_format must be an ember memory format "
                             f"(ember.contiguous_format, channels_last, ...), got "
                             f"{type(memory_format).__name__}")


def clone(input, *, memory_format=None):
    """A copy of ``input`` (its own memory; autograd records it). ``memory_format`` is accepted
    as torch takes it; ember's copy is always in the contiguous layout, which every format gives
    the same values in (docs/unsupported.md)."""
    _memory_format("clone", memory_format)
    return G.clone(input)


def _contiguous(self, memory_format=None):
    """``Tensor.contiguous()``: self when its memory is C-contiguous, else a contiguous copy.
    ``memory_format`` is accepted as torch takes it (the contiguous layout for every format,
    docs/unsupported.md)."""
    _memory_format("contiguous", memory_format)
    return G.contiguous(self)


def storage_offset(self):
    """``Tensor.storage_offset()``: the offset, in elements, of the tensor's first element in its
    storage (the array at the root of its memory), like torch."""
    from ember.kernels.strided import storage_offset as offset
    return offset(self._data)


def atleast(name):
    """torch's ``atleast_Nd`` entry point over the spec op ``name``: one tensor -> the tensor
    viewed with at least N dimensions; several tensors (or one sequence) -> a tuple."""
    def front(*tensors):
        op = getattr(G, name)
        if len(tensors) == 1 and isinstance(tensors[0], Tensor):
            return op(tensors[0])
        if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
            tensors = tensors[0]
        return tuple(op(t) for t in tensors)
    front.__name__ = front.__qualname__ = name
    front.__doc__ = (f"``{name}(x)`` -> x viewed with at least {name[-2]} dimensions; several "
                     f"tensors (or one sequence) -> a tuple.")
    return front


def _view(self, *shape, **kwargs):
    """``view(*shape)`` (or ``view(size=shape)``): the same data in another shape;
    ``view(dtype)`` (or ``view(dtype=dtype)``): the same memory read as another dtype
    (``ember.tensor.view_dtype``)."""
    if len(shape) == 1 and shape[0].__class__ is _dtype.dtype:
        return view_dtype(self, shape[0])
    if kwargs.keys() == {"dtype"} and not shape:
        return view_dtype(self, kwargs["dtype"])
    return G.view(self, *shape, **kwargs)


def _flip_method(self, *dims, **kwargs):
    """``Tensor.flip(*dims)``: also ``flip((0, 1))`` and ``flip(dims=(0, 1))``, as torch's method
    (``torch.flip(input, dims)`` takes one sequence)."""
    return G.flip(self, _varargs_or_keyword(dims, kwargs, "dims", "flip"))


def _tile_method(self, *dims, **kwargs):
    """``Tensor.tile(*dims)``: also ``tile((2, 1))`` and ``tile(dims=(2, 1))``, as torch's method
    (``torch.tile(input, dims)`` takes one sequence)."""
    return G.tile(self, _varargs_or_keyword(dims, kwargs, "dims", "tile"))


_T_warned = []


def _T(self):
    nd = self._data.ndim
    if nd != 2 and not _T_warned:   # once per process, as torch's
        _T_warned.append(True)
        import warnings
        warnings.warn("The use of `x.T` on tensors of dimension other than 2 to reverse their "
                      "shape is deprecated and it will throw an error in a future release. "
                      "Consider `x.mT` to transpose batches of matrices or "
                      "`x.permute(*torch.arange(x.ndim - 1, -1, -1))` to reverse the dimensions "
                      "of a tensor.", UserWarning, stacklevel=2)
    return self if nd < 2 else G.permute(self, tuple(range(nd - 1, -1, -1)))


def _dim_order(self):
    """``Tensor.dim_order()``: the dimensions from the outermost in memory to the innermost
    (strides largest first; ties keep their order), as torch's."""
    strides = self._data.strides
    return tuple(sorted(range(len(strides)), key=lambda d: -abs(strides[d])))


def _apply_(self, callable):
    """``Tensor.apply_(f)``: each element replaced by ``f(element)`` (a Python function of a
    number, called once per element: slow, as torch warns). Refused on a tensor that requires
    grad."""
    _python_map("apply_", self, lambda a: callable(a))
    return self


def _map_(self, tensor, callable):
    """``Tensor.map_(other, f)``: each element replaced by ``f(element, other's element)``,
    ``other`` broadcast to this tensor's shape (Python calls per element, as torch's)."""
    other = np.broadcast_to(tensor._data if isinstance(tensor, Tensor) else np.asarray(tensor),
                            self._data.shape)
    it = iter(other.reshape(-1).tolist()) if other.size else iter(())
    _python_map("map_", self, lambda a: callable(a, next(it)))
    return self


def _python_map(name, t, f):
    if t.requires_grad:
        raise EmberRuntimeError(f"{name}: a tensor that requires grad cannot be changed by a "
                                f"Python function in place")
    a = t._data
    if a.size:
        a[...] = np.array([f(v) for v in a.reshape(-1).tolist()], dtype=object) \
            .reshape(a.shape).astype(a.dtype)
    t._bump()


def _nbytes(self):
    """``Tensor.nbytes``: the bytes of its elements (``numel() * element_size()``)."""
    return self.numel() * self.element_size()


def _itemsize(self):
    """``Tensor.itemsize``: the bytes of one element (``element_size()``)."""
    return self.element_size()


def _mT(self):
    if self._data.ndim < 2:
        raise EmberRuntimeError(f"tensor.mT is only supported on matrices or batches of matrices. "
                                f"Got {self._data.ndim}-D tensor.")
    return G.transpose(self, -2, -1)


def _adjoint(t):
    return t.conj() if t._data.dtype.kind == "c" else t


def _mH(self):
    if self._data.ndim < 2:
        raise EmberRuntimeError(f"tensor.mH is only supported on matrices or batches of matrices. "
                                f"Got {self._data.ndim}-D tensor.")
    return _adjoint(G.transpose(self, -2, -1))


def _H(self):
    nd = self._data.ndim
    if nd not in (0, 2):
        raise EmberRuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got "
                                f"{nd}-D tensor.")
    return _adjoint(self if nd == 0 else G.transpose(self, 0, 1))


def broadcast_shapes(*shapes):
    """The shape that ``shapes`` (sizes or ints) broadcast to, as an ember Size."""
    from ember.errors import EmberRuntimeError as _E
    from ember.tensor import Size
    norm = [(s,) if isinstance(s, (int, np.integer)) else tuple(s) for s in shapes]
    try:
        return Size(np.broadcast_shapes(*norm))
    except ValueError:
        raise _E(f"broadcast_shapes: shapes {[list(s) for s in norm]} cannot be broadcast "
                 f"together") from None


def _resize_(self, *size, memory_format=None):
    """Resize in place to ``size``, keeping the first elements in row-major order (new
    elements, when it grows, are uninitialised), as torch's ``Tensor.resize_``."""
    from ember.autograd.state import STATE
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    size = _ints(size, "size", "resize_")
    if builtins.any(s < 0 for s in size):
        raise EmberRuntimeError(f"resize_: sizes must be non-negative, got {list(size)}")
    if self.requires_grad:
        raise EmberRuntimeError("resize_: cannot resize a tensor that requires grad")
    if STATE.tracer is not None:
        STATE.tracer.untraceable("resize_: a tensor cannot change its shape in place inside a "
                                 "trace")
    n = builtins.int(np.prod(size, dtype=np.int64))
    flat = self._data.reshape(-1) if self._data.flags.c_contiguous else \
        np.ascontiguousarray(self._data).reshape(-1)
    if n <= flat.size:
        new = flat[:n].reshape(size)
    else:
        new = np.empty(n, self._data.dtype)
        new[:flat.size] = flat
        new = new.reshape(size)
    self._data = new
    self._bump()
    return self


def _inplace_view(name, view):
    """``Tensor.<name>``: ``view(self, ...)``'s shape and strides given to self in place (the
    same memory; views taken before keep theirs), as torch's in-place view ops. ember refuses
    it on a tensor that requires grad (docs/unsupported.md) and inside a trace."""
    def method(self, *args, **kwargs):
        from ember.autograd.state import STATE
        if self.requires_grad:
            raise EmberRuntimeError(f"{name}: ember does not change the shape of a tensor that "
                                    f"requires grad in place; use {name[:-1]}(...) (its "
                                    f"out-of-place form) instead")
        if STATE.tracer is not None:
            STATE.tracer.untraceable(f"{name}: a tensor cannot change its shape in place "
                                     f"inside a trace")
        out = view(self, *args, **kwargs)
        if self._view is not None:   # a view stays one of its base, through one more op
            self._view = out._view
        self._data = out._data
        self._bump()
        return self
    method.__name__ = name
    return method


squeeze_ = _inplace_view("squeeze_", lambda t, *dim: G.squeeze(t, *dim))
unsqueeze_ = _inplace_view("unsqueeze_", lambda t, dim: G.unsqueeze(t, dim))
t_ = _inplace_view("t_", lambda t: G.t(t))
transpose_ = _inplace_view("transpose_", lambda t, dim0, dim1: G.transpose(t, dim0, dim1))
swapaxes_ = _inplace_view("swapaxes_", lambda t, axis0, axis1: G.transpose(t, axis0, axis1))
swapdims_ = _inplace_view("swapdims_", lambda t, dim0, dim1: G.transpose(t, dim0, dim1))
as_strided_ = _inplace_view("as_strided_", lambda t, size, stride, storage_offset=None:
                            G.as_strided(t, size, stride, storage_offset))


def _resize_as_(self, the_template, *, memory_format=None):
    """Resize in place to the shape of ``the_template`` (see ``resize_``)."""
    return _resize_(self, tuple(the_template.shape))


resize_as_ = _resize_as_


def expand_as(input, other):
    return G.expand(input, tuple(other.shape))


def view_as(input, other):
    return G.view(input, tuple(other.shape))


def reshape_as(input, other):
    return G.reshape(input, tuple(other.shape))


def concat(tensors, dim=0):
    """torch.concat: torch.cat's other name."""
    return G.cat(tensors, dim)


def concatenate(tensors, axis=0):
    """torch.concatenate: torch.cat's NumPy-style name (its dim is called ``axis``)."""
    return G.cat(tensors, axis)


def swapaxes(input, axis0, axis1):
    """torch.swapaxes: torch.transpose's NumPy name (a view)."""
    return G.transpose(input, axis0, axis1)


def swapdims(input, dim0, dim1):
    """torch.swapdims: torch.transpose's other name (a view)."""
    return G.transpose(input, dim0, dim1)


def row_stack(tensors):
    """torch.row_stack: torch.vstack's other name."""
    return G.vstack(tensors)


def adjoint(input):
    """torch.adjoint / Tensor.adjoint: the conjugate transpose of the last two dims (a view for
    real tensors, as ``mH``)."""
    if input._data.ndim < 2:
        raise EmberRuntimeError(f"adjoint: tensor.adjoint() is only supported on matrices or "
                                f"batches of matrices. Got {input._data.ndim}-D tensor.")
    return _mH(input)


# these raise ember's errors naming them (ember.errors.public)
for _n in ("movedim", "moveaxis", "diag", "diagflat", "broadcast_to", "broadcast_tensors",
           "meshgrid", "atleast_1d", "atleast_2d", "atleast_3d", "hstack", "vstack",
           "dstack", "column_stack", "rot90", "repeat_interleave", "fliplr", "flipud",
           "ravel", "tensor_split", "hsplit", "vsplit", "dsplit", "expand_copy",
           "diagonal_copy", "permute_copy", "narrow_copy", "view_copy", "unbind_copy",
           "unfold_copy", "squeeze_copy", "unsqueeze_copy", "transpose_copy", "t_copy",
           "alias_copy", "split_with_sizes_copy", "unsafe_split", "unsafe_chunk",
           "sum_to_size", "cartesian_prod", "combinations", "block_diag", "diff",
           "constant_pad_nd", "broadcast_shapes", "expand_as", "view_as", "reshape_as"):
    globals()[_n] = _public(globals()[_n])
del _n
