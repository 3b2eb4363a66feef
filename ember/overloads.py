"""Python front ends for spec ops whose torch signature is overloaded (max/min, dropout, to, ...),
and the Tensor methods that are not one spec op each. Everything here calls spec ops."""
import builtins
from collections import namedtuple

import numpy as np

from ember import _dtype
from ember.autograd import _generated as G
from ember.autograd import shape_ops as _shape_ops
from ember.errors import EmberRuntimeError, EmberTypeError, public
from ember.random import resolve
from ember.tensor import Tensor, view_dtype

ValuesIndices = namedtuple("ValuesIndices", ["values", "indices"])


def max(input, dim=None, keepdim=False):
    """``max(x)``, ``max(x, dim, keepdim)`` -> (values, indices), or ``max(x, other)`` elementwise."""
    if isinstance(dim, Tensor):
        return G.maximum(input, dim)
    if dim is None:
        return G.max_all(input)
    return ValuesIndices(*G.max_dim(input, dim, keepdim))


def min(input, dim=None, keepdim=False):
    """``min(x)``, ``min(x, dim, keepdim)`` -> (values, indices), or ``min(x, other)`` elementwise."""
    if isinstance(dim, Tensor):
        return G.minimum(input, dim)
    if dim is None:
        return G.min_all(input)
    return ValuesIndices(*G.min_dim(input, dim, keepdim))


def dropout(input, p=0.5, training=True, inplace=False, generator=None):
    """Zero elements with probability ``p`` and scale the rest by 1/(1-p) when training."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    out = G.native_dropout(input, p, True, resolve(generator))[0]
    if inplace:
        return input.copy_(out)
    return out


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
        from ember.autograd.linalg_composites import linalg_matrix_norm
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


def clip(input, min=None, max=None):
    """Alias of clamp."""
    return G.clamp(input, min, max)


def numel(input):
    """Number of elements of ``input``."""
    return input.numel()


def is_tensor(obj):
    """Whether ``obj`` is an ember Tensor."""
    return isinstance(obj, Tensor)


def is_floating_point(input):
    """Whether ``input`` has a floating dtype."""
    return input.is_floating_point()


def is_complex(input):
    """Whether ``input`` has a complex dtype (complex64 or complex128)."""
    return input.is_complex()


def _atleast(op):
    def front(*tensors):
        if len(tensors) == 1 and isinstance(tensors[0], Tensor):
            return op(tensors[0])
        if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
            tensors = tensors[0]
        return tuple(op(t) for t in tensors)
    front.__name__ = op.__name__
    front.__doc__ = (f"``{op.__name__}(x)`` -> x viewed with at least {op.__name__[-2]} "
                     f"dimensions; several tensors (or one sequence) -> a tuple.")
    return front


atleast_1d, atleast_2d, atleast_3d = (_atleast(G.atleast_1d), _atleast(G.atleast_2d),
                                      _atleast(G.atleast_3d))


# ---- Tensor methods --------------------------------------------------------------------------
def _to(self, *args, **kwargs):
    """``to(dtype)``, ``to(device)``, ``to(other)``, ``to(device, dtype)``; returns self if nothing
    changes. RuntimeError for devices other than cpu."""
    dtype = kwargs.pop("dtype", None)
    copy = kwargs.pop("copy", False)
    device = kwargs.pop("device", None)
    kwargs.pop("non_blocking", None)
    kwargs.pop("memory_format", None)  # every format is ember's contiguous layout
    flags = [a for a in args if isinstance(a, bool)]  # to(..., non_blocking, copy)
    if len(flags) > 1:
        copy = flags[1]
    for a in args:
        if isinstance(a, (_dtype.memory_format, bool)):
            continue
        if isinstance(a, Tensor):
            dtype = a.dtype
        elif isinstance(a, _dtype.dtype) or isinstance(a, (np.dtype, type)):
            dtype = a
        elif a is not None:
            device = a
    from ember.tensor import check_device
    check_device(device, "to()")
    if dtype is None:
        return G.clone(self) if copy else self
    npd = _dtype.to_numpy_dtype(dtype)
    if npd == self._data.dtype and not copy:
        return self
    return G.to(self, npd, copy)


def _cast(dt):
    def method(self, memory_format=None):
        return _to(self, dt)
    method.__doc__ = f"Return this tensor as {dt.name} (self if it already is)."
    return method


def _bfloat16(self, memory_format=None):
    """Return this tensor as bfloat16 (self if it already is)."""
    return _to(self, _dtype.bfloat16_dtype())


def _type(self, dtype=None, non_blocking=False):
    """No argument: the legacy type name, as torch ("ember.FloatTensor"); a dtype, a legacy
    type or its name ("torch.LongTensor"): this tensor cast to it."""
    from ember import _legacy
    if dtype is None:
        return "ember." + _legacy.NAME_OF[self.dtype]
    named = _legacy.dtype_of_type_name(dtype)
    if named is not None:
        return _to(self, named)
    if isinstance(dtype, str):
        from ember.errors import EmberTypeError
        raise EmberTypeError(f"type(): invalid type {dtype!r} (expected a dtype or a legacy "
                             "type name such as 'torch.FloatTensor')")
    return _to(self, dtype)


def _cuda(self, device=None, non_blocking=False, memory_format=None):
    """ember runs only on the CPU: raises UnsupportedError naming CUDA."""
    from ember.tensor import check_device
    check_device("cuda" if device is None or isinstance(device, int) else device, "cuda()")


def _type_as(self, other):
    return _to(self, other.dtype)


def _zero_(self):
    return G.copy_(self, G.zeros_like(self))


def _fill_(self, value):
    return G.copy_(self, value if isinstance(value, Tensor) else G.full_like(self, value))


def _uniform_(self, a=0.0, b=1.0, generator=None):
    return G.copy_(self, G.uniform_like(self, a, b, resolve(generator)))


def _normal_(self, mean=0.0, std=1.0, generator=None):
    return G.copy_(self, G.normal_like(self, mean, std, resolve(generator)))


def _bernoulli_(self, p=0.5, generator=None):
    probs = G.full_like(self, p) if not isinstance(p, Tensor) else p
    return G.copy_(self, G.bernoulli(probs, resolve(generator)))


def _new(fill):
    def method(self, *size, dtype=None, device=None, requires_grad=False):
        from ember import creation
        creation._check_device(device)
        dt = self.dtype if dtype is None else dtype
        if fill == "zeros":
            return creation.zeros(*size, dtype=dt, requires_grad=requires_grad)
        if fill == "ones":
            return creation.ones(*size, dtype=dt, requires_grad=requires_grad)
        return creation.empty(*size, dtype=dt, requires_grad=requires_grad)
    return method


def _new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False):
    from ember import creation
    creation._check_device(device)
    return creation.full(size, fill_value, dtype=self.dtype if dtype is None else dtype,
                         requires_grad=requires_grad)


def _new_tensor(self, data, dtype=None, device=None, requires_grad=False):
    from ember import creation
    creation._check_device(device)
    return creation.tensor(data, dtype=self.dtype if dtype is None else dtype,
                           requires_grad=requires_grad)


def _view(self, *shape):
    """``view(*shape)``: the same data in another shape; ``view(dtype)``: the same memory read as
    another dtype (``ember.tensor.view_dtype``)."""
    if len(shape) == 1 and shape[0].__class__ is _dtype.dtype:
        return view_dtype(self, shape[0])
    return G.view(self, *shape)


def _multinomial_method(self, num_samples, replacement=False, *, generator=None):
    return G.multinomial(self, num_samples, replacement, resolve(generator))


def _rdiv(self, other):
    """``Tensor.__rdiv__`` (torch's name for ``other / self``)."""
    return G.div(other, self)


def _polygamma_method(self, n):
    """``x.polygamma(n)`` is ``polygamma(n, x)`` (torch's order)."""
    return G.polygamma(n, self)


def _T(self):
    nd = self._data.ndim
    return self if nd < 2 else G.permute(self, tuple(range(nd - 1, -1, -1)))


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


def _softmax_method(self, dim, dtype=None):
    return G.softmax(self, dim, dtype)


def _log_softmax_method(self, dim, dtype=None):
    return G.log_softmax(self, dim, dtype)


def _cpu(self):
    return self


def _max_method(self, dim=None, keepdim=False):
    return max(self, dim, keepdim)


def _min_method(self, dim=None, keepdim=False):
    return min(self, dim, keepdim)


def _allclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    self._python_value("allclose")
    other._python_value("allclose")
    return builtins.bool(np.allclose(self._data, other._data, rtol, atol, equal_nan))


def equal(input, other):
    """Whether ``input`` and ``other`` have the same shape and the same values (a Python bool;
    the dtypes may differ, NaN is unequal to itself), as ``torch.equal``."""
    if not isinstance(input, Tensor):
        raise EmberTypeError(f"equal(): argument 'input' (position 1) must be Tensor, not "
                             f"{type(input).__name__}")
    return _equal(input, other)


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether ``isclose(input, other, rtol, atol, equal_nan)`` holds everywhere (a Python bool)."""
    return builtins.bool(G.all(G.isclose(input, other, rtol, atol, equal_nan)).item())


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


def result_type(tensor1, tensor2):
    """The dtype an arithmetic op on ``tensor1`` and ``tensor2`` (tensors or Python numbers)
    gives, by torch's promotion (dimensioned tensors, then 0-d ones, then numbers)."""
    from ember.kernels.dtypes import result_type as rt
    return _dtype.from_numpy_dtype(rt(*(getattr(t, "_data", t) for t in (tensor1, tensor2))))


def promote_types(type1, type2):
    """The smallest dtype both ``type1`` and ``type2`` promote to, as ``torch.promote_types``."""
    from ember.kernels.dtypes import result_type as rt
    a, b = (np.ones(1, _dtype.to_numpy_dtype(t)) for t in (type1, type2))
    return _dtype.from_numpy_dtype(rt(a, b))


def can_cast(from_, to):
    """Whether an op's result of dtype ``from_`` may be written into a tensor of dtype ``to``
    (not complex to real, floating to integral, or a non-bool to bool), as ``torch.can_cast``."""
    from ember.kernels.dtypes import can_cast as cc
    return cc(_dtype.to_numpy_dtype(from_), _dtype.to_numpy_dtype(to))


def index_put(input, indices, values, accumulate=False):
    """``input`` with ``values`` put at ``indices`` (a tuple of index tensors), added there when
    ``accumulate``."""
    from ember.autograd.indexing import index_put as put
    return put(input, indices, values, accumulate)


def _index_put_(self, indices, values, accumulate=False):
    from ember.autograd.indexing import index_put as put
    return put(self, indices, values, accumulate, inplace=True)


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


def _tri_indices(which):
    def indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
        from ember import creation
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


triu_indices, tril_indices = _tri_indices("triu"), _tri_indices("tril")


def unravel_index(indices, shape):
    """The coordinates in ``shape`` of the flat ``indices``: a tuple of int64 tensors."""
    from ember import creation
    i = indices._data if isinstance(indices, Tensor) else np.asarray(indices)
    if i.dtype.kind not in "iu":
        raise EmberRuntimeError(f"unravel_index: expected 'indices' to be an integer tensor, "
                                f"got {i.dtype}")
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    n = int(np.prod(shape))
    if i.size and (i.min() < -n or i.max() >= n):
        raise EmberRuntimeError(f"unravel_index: 'indices' must be in range [{-n}, {n - 1}] for "
                                f"shape {list(shape)}")
    coords = np.unravel_index(np.where(i < 0, i + n, i), shape) if shape else ()
    return tuple(creation.tensor(np.asarray(c, np.int64)) for c in coords)


def _put_(self, index, source, accumulate=False):
    return G.copy_(self, G.put(self, index, source, accumulate))


def _rfloordiv(self, other):
    return G.div(other, self, rounding_mode="floor")


def _ifloordiv(self, other):
    return G.div_(self, other, rounding_mode="floor")


def _rmod(self, other):
    return G.remainder(other, self)


def _imod(self, other):
    return G.copy_(self, G.remainder(self, other))


def _equal(self, other):
    if not isinstance(other, Tensor):
        raise EmberTypeError(f"equal(): argument 'other' (position 2) must be Tensor, not "
                             f"{type(other).__name__}")
    self._python_value("equal")
    other._python_value("equal")
    return self._data.shape == other._data.shape and builtins.bool(np.array_equal(self._data,
                                                                                  other._data))


METHODS = {
    "to": _to, "float": _cast(_dtype.float32), "double": _cast(_dtype.float64),
    "half": _cast(_dtype.float16), "long": _cast(_dtype.int64), "int": _cast(_dtype.int32),
    "short": _cast(_dtype.int16), "bool": _cast(_dtype.bool_), "byte": _cast(_dtype.uint8),
    "char": _cast(_dtype.int8), "bfloat16": _bfloat16, "cfloat": _cast(_dtype.complex64),
    "cdouble": _cast(_dtype.complex128), "is_conj": lambda self: False, "type": _type,
    "type_as": _type_as, "cpu": _cpu, "cuda": _cuda,
    "zero_": _zero_, "fill_": _fill_, "uniform_": _uniform_, "normal_": _normal_,
    "bernoulli_": _bernoulli_, "new_zeros": _new("zeros"), "new_ones": _new("ones"),
    "new_empty": _new("empty"), "new_full": _new_full, "new_tensor": _new_tensor,
    "max": _max_method, "min": _min_method, "norm": norm, "var": var, "std": std, "clip": clip,
    "clip_": G.clamp_, "softmax": _softmax_method, "log_softmax": _log_softmax_method,
    "copy_": G.copy_, "allclose": _allclose, "equal": _equal, "split": G.split,
    "index_put_": _index_put_, "index_put": index_put, "masked_fill": G.masked_fill,
    "relu": G.relu, "relu_": G.relu_, "nonzero": nonzero,
    "absolute": G.abs, "arctan2": G.atan2, "greater": G.gt, "less": G.lt, "eq": G.eq,
    "multiply": G.mul, "divide": G.div, "subtract": G.sub, "view": _view,
    "multinomial": _multinomial_method,
    "polygamma": _polygamma_method,
    "__rdiv__": _rdiv,
    "clamp_min_": lambda self, min: G.clamp_(self, min, None),
    "clamp_max_": lambda self, max: G.clamp_(self, None, max),
    "floor_divide_": _ifloordiv, "__rfloordiv__": _rfloordiv, "__ifloordiv__": _ifloordiv,
    "__rmod__": _rmod, "__imod__": _imod, "put_": _put_,
    "storage_offset": _shape_ops.storage_offset,
}
# raise only ember's errors already (they need no ember.errors.public wrapper; hot)
_NAMED = {"view"}
PROPERTIES = {"T": _T, "mT": _mT, "mH": _mH, "H": _H}


def install():
    """Attach generated and hand-written methods to Tensor (once, at import)."""
    for name, fn in G.TENSOR_METHODS.items():
        setattr(Tensor, name, fn)
    for name, fn in METHODS.items():
        # hand-written methods raise ember's errors naming the method (ember.errors.public)
        wrap = fn.__module__ == __name__ and name not in _NAMED
        setattr(Tensor, name, public(fn, name) if wrap else fn)
    for name, fn in PROPERTIES.items():
        setattr(Tensor, name, property(fn))


for _n in ("max", "min", "dropout", "var", "std", "clip", "numel", "is_tensor",
           "is_floating_point", "atleast_1d", "atleast_2d", "atleast_3d", "allclose", "equal",
           "nonzero", "index_put", "where", "broadcast_shapes", "unravel_index", "result_type",
           "promote_types", "can_cast"):
    globals()[_n] = public(globals()[_n])
del _n
