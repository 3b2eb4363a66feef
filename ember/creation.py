"""Tensor creation: ``tensor``, ``zeros``, ``arange``, ``rand`` and friends (torch's signatures).

Factories dispatch like every other op (so the tracer records them); this module only turns
torch-style arguments (varargs sizes, dtypes, ``requires_grad``) into the spec's."""
import builtins
import functools

import numpy as np

from ember import _dtype
from ember.autograd import _generated as G
from ember.kernels.dtypes import storable_range
from ember.errors import (EmberOverflowError, EmberRuntimeError, EmberTypeError, EmberValueError,
                          public)
from ember.random import resolve
from ember.tensor import Tensor


def _size(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    for s in size:
        if not isinstance(s, (int, np.integer)) and not (isinstance(s, Tensor) and s.numel() == 1):
            raise EmberTypeError(f"size must be a sequence of ints, got "
                                 f"{_dtype._short_repr(size)}")
    # int subclasses (the JIT's traced sizes) pass through unchanged
    return tuple(s if isinstance(s, builtins.int) else builtins.int(s) for s in size)


def _np(dtype, default=None):
    if dtype is None:
        return (default or _dtype.get_default_dtype()).numpy
    return _dtype.to_numpy_dtype(dtype)


def _finish(t, requires_grad):
    if requires_grad:
        t.requires_grad_(True)
    return t


def _takes_out(fn):
    """``fn`` (a factory) with torch's ``out=``: the result has ``out``'s dtype unless ``dtype``
    is given (then the two must match) and is written into ``out``, resized to its shape
    (ember.autograd.out)."""
    name = fn.__name__

    @functools.wraps(fn)
    def make(*args, out=None, **kwargs):
        if out is None:
            return fn(*args, **kwargs)
        from ember.autograd.out import check_grad, write
        if not isinstance(out, Tensor):
            raise EmberTypeError(f"{name}(): argument 'out' must be Tensor, not "
                                 f"{type(out).__name__}")
        dtype = kwargs.get("dtype")
        if dtype is None:
            kwargs["dtype"] = out.dtype
        elif _dtype.to_numpy_dtype(dtype) != out._data.dtype:
            raise EmberRuntimeError(f"{name}(): dtype {dtype} does not match dtype of out "
                                    f"parameter ({out.dtype})")
        check_grad(name, (), kwargs, out)
        return write(name, fn(*args, **kwargs), out, warn=False)
    return make


def _check_device(device):
    from ember.tensor import check_device
    check_device(device)


def _infer(data):
    if isinstance(data, Tensor):
        return data._data
    if isinstance(data, (list, tuple)):
        items = [_infer(d) for d in data]
        if not items:
            return np.zeros((0,), _dtype.get_default_dtype().numpy)
        return np.array(items) if not builtins.all(isinstance(i, np.ndarray) for i in items) \
            else np.stack(items) if len({i.shape for i in items}) == 1 else _ragged(data)
    return data


def _ragged(data):
    raise EmberValueError(f"expected a sequence of equal-length sequences, got "
                          f"{_dtype._short_repr(data)}")


def _typed_leaves(data):
    if isinstance(data, (np.ndarray, np.generic, Tensor)):
        return True
    if isinstance(data, (list, tuple)):
        return builtins.any(_typed_leaves(d) for d in data)
    return False


_INT64 = np.iinfo(np.int64)


_TWO63 = 2.0 ** 63


def _check_int64(data):
    """Every Python int in ``data`` (nested lists) must fit int64, as in torch."""
    if isinstance(data, (list, tuple)):
        for d in data:
            _check_int64(d)
    elif isinstance(data, builtins.int) and not _INT64.min <= data <= _INT64.max:
        raise EmberOverflowError(f"tensor: Python int {data} is outside the int64 range "
                                 f"[{_INT64.min}, {_INT64.max}]")


def tensor(data, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """A new tensor holding a copy of ``data`` (nested lists, numbers, arrays or tensors).

    Python floats become the default float dtype, ints int64, bools bool. Raises EmberValueError
    for ragged nested lists, EmberOverflowError for ints outside int64 and EmberTypeError for
    unsupported element types.
    """
    _check_device(device)
    if isinstance(data, np.ndarray):
        arr = np.array(data, copy=True)
    else:
        raw = _infer(data)
        try:
            arr = np.array(raw)
        except (ValueError, TypeError, OverflowError) as e:
            raise EmberValueError(f"tensor: {e}") from None
        typed = _typed_leaves(data)
        if not typed and (arr.dtype == object or arr.dtype == np.uint64 or (
                arr.dtype == np.float64 and arr.size and np.abs(arr).max() >= _TWO63)):
            _check_int64(data)
        if arr.dtype.kind == "f" and not typed and dtype is None:
            arr = arr.astype(_dtype.get_default_dtype().numpy)
        elif arr.dtype.kind == "c" and not typed and dtype is None:
            arr = arr.astype(_dtype.default_complex().numpy)
        elif arr.dtype.kind in "iu" and not typed:
            arr = arr.astype(np.int64)
    if arr.dtype.kind in "OUSV":
        raise EmberTypeError(f"tensor: can't convert {type(data).__name__} with elements of type "
                        f"{arr.dtype} to a tensor")
    if dtype is not None:
        target = _dtype.to_numpy_dtype(dtype)
        if target.kind in "iu" and arr.size and arr.dtype.kind in "iuf" and \
                not isinstance(data, np.ndarray) and not _typed_leaves(data):
            _check_storable(arr, target)
        arr = arr.astype(target)
    else:
        _dtype.from_numpy_dtype(arr.dtype)
    return _finish(Tensor._make(np.asarray(arr, order="C")), requires_grad)


def _check_storable(arr, target):
    """Python numbers given for an integer dtype must fit it as torch converts them (uint8
    takes -255..255, a negative wrapping)."""
    lo, hi = storable_range(target)
    low, high = arr.min(), arr.max()
    if not (lo <= low and high <= hi):
        bad = low if not lo <= low else high
        raise EmberRuntimeError(f"tensor: value {bad.item()!r} cannot be converted to type "
                                f"{target} without overflow")


def as_tensor(data, dtype=None, device=None):
    """Like ``tensor`` but shares memory with an ndarray or tensor when the dtype already fits."""
    _check_device(device)
    if isinstance(data, Tensor):
        return data if dtype is None or data.dtype == dtype else data.to(dtype)
    if isinstance(data, np.ndarray) and (dtype is None or data.dtype == _dtype.to_numpy_dtype(dtype)):
        _dtype.from_numpy_dtype(data.dtype)
        return Tensor._make(np.asarray(data))   # a subclass's (memmap, matrix) memory as ndarray
    return tensor(data, dtype=dtype)


def from_numpy(arr):
    """A tensor sharing memory with ``arr`` (zero-copy; an ndarray subclass such as np.memmap
    is held as a plain ndarray view of the same memory, so it promotes as a tensor). TypeError
    for unsupported dtypes."""
    if not isinstance(arr, np.ndarray):
        raise EmberTypeError(f"from_numpy expects an np.ndarray, got {type(arr).__name__}")
    _dtype.from_numpy_dtype(arr.dtype)
    return Tensor._make(np.asarray(arr))


def from_dlpack(ext):
    """A tensor sharing memory with any object supporting the DLPack protocol."""
    return from_numpy(np.from_dlpack(ext))


@_takes_out
def zeros(*size, dtype=None, device=None, requires_grad=False):
    """A tensor of zeros with the given shape."""
    _check_device(device)
    return _finish(G.zeros(_size(size), _np(dtype)), requires_grad)


@_takes_out
def ones(*size, dtype=None, device=None, requires_grad=False):
    """A tensor of ones with the given shape."""
    _check_device(device)
    return _finish(G.ones(_size(size), _np(dtype)), requires_grad)


@_takes_out
def empty(*size, dtype=None, device=None, requires_grad=False, memory_format=None):
    """An uninitialised tensor with the given shape."""
    _check_device(device)
    return _finish(G.empty(_size(size), _np(dtype)), requires_grad)


@_takes_out
def full(size, fill_value, dtype=None, device=None, requires_grad=False):
    """A tensor filled with ``fill_value`` (dtype inferred from it when not given)."""
    _check_device(device)
    if isinstance(fill_value, builtins.int) and not _INT64.min <= fill_value <= _INT64.max:
        raise EmberOverflowError(f"full: fill_value {fill_value} is outside the int64 range "
                                 f"[{_INT64.min}, {_INT64.max}]")
    if dtype is None:
        dtype = _dtype.bool_ if isinstance(fill_value, bool) else (
            _dtype.int64 if isinstance(fill_value, int) else (
                _dtype.default_complex() if isinstance(fill_value, complex) else None))
    return _finish(G.full(_size((size,)), fill_value, _np(dtype)), requires_grad)


def _like(fn, input, dtype, requires_grad, *args):
    npd = None if dtype is None else _dtype.to_numpy_dtype(dtype)
    return _finish(fn(input, *args, npd) if args else fn(input, npd), requires_grad)


def zeros_like(input, dtype=None, device=None, requires_grad=False, memory_format=None):
    """Zeros with ``input``'s shape (and dtype unless given)."""
    _check_device(device)
    return _like(G.zeros_like, input, dtype, requires_grad)


def ones_like(input, dtype=None, device=None, requires_grad=False, memory_format=None):
    """Ones with ``input``'s shape (and dtype unless given)."""
    _check_device(device)
    return _like(G.ones_like, input, dtype, requires_grad)


def empty_like(input, dtype=None, device=None, requires_grad=False, memory_format=None):
    """Uninitialised with ``input``'s shape (and dtype unless given)."""
    _check_device(device)
    return _like(G.empty_like, input, dtype, requires_grad)


def full_like(input, fill_value, dtype=None, device=None, requires_grad=False, memory_format=None):
    """``fill_value`` with ``input``'s shape (and dtype unless given)."""
    _check_device(device)
    return _like(G.full_like, input, dtype, requires_grad, fill_value)


@_takes_out
def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False):
    """Values from ``start`` to ``end`` (exclusive) by ``step``; int64 unless a bound is a float."""
    _check_device(device)
    if end is None:
        start, end = 0, start
    vals = [float(v) if isinstance(v, Tensor) else v for v in (start, end, step)]
    if dtype is None:
        is_float = builtins.any(isinstance(v, (float, np.floating)) for v in vals)
        dtype = _dtype.get_default_dtype() if is_float else _dtype.int64
    return _finish(G.arange(*vals, _np(dtype)), requires_grad)


@_takes_out
def linspace(start, end, steps, dtype=None, device=None, requires_grad=False):
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive."""
    _check_device(device)
    return _finish(G.linspace(start, end, steps, _np(dtype)), requires_grad)


@_takes_out
def eye(n, m=None, dtype=None, device=None, requires_grad=False):
    """A 2-D tensor with ones on the diagonal."""
    _check_device(device)
    return _finish(G.eye(n, m, _np(dtype)), requires_grad)


@_takes_out
def rand(*size, generator=None, dtype=None, device=None, requires_grad=False):
    """Uniform samples in [0, 1)."""
    _check_device(device)
    return _finish(G.rand(_size(size), resolve(generator), _np(dtype)), requires_grad)


@_takes_out
def randn(*size, generator=None, dtype=None, device=None, requires_grad=False):
    """Standard normal samples."""
    _check_device(device)
    return _finish(G.randn(_size(size), resolve(generator), _np(dtype)), requires_grad)


@_takes_out
def randint(low=0, high=None, size=None, *, generator=None, dtype=None, device=None,
            requires_grad=False):
    """Integers uniform in [low, high): ``randint(high, size)`` or ``randint(low, high, size)``."""
    _check_device(device)
    if size is None:
        if high is None:
            raise EmberTypeError("randint() missing required argument 'size'")
        low, high, size = 0, low, high
    return G.randint(low, high, _size((size,)), resolve(generator), _np(dtype, _dtype.int64))


def randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False):
    """A random permutation of 0..n-1."""
    _check_device(device)
    return G.randperm(n, resolve(generator), _np(dtype, _dtype.int64))


@_takes_out
def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None,
           requires_grad=False, layout=None):
    """Normal samples; ``mean``/``std`` may be tensors (then the shape follows them).
    ``layout`` may only be ``ember.strided``."""
    if layout is not None and layout is not _dtype.strided:
        raise EmberTypeError(f"normal: ember has only the ember.strided layout, got {layout!r}")
    _check_device(device)
    gen = resolve(generator)
    if isinstance(mean, Tensor) or isinstance(std, Tensor):
        ref = mean if isinstance(mean, Tensor) else std
        shape = np.broadcast_shapes(np.shape(getattr(mean, "_data", mean)),
                                    np.shape(getattr(std, "_data", std)))
        z = G.randn(shape, gen, ref._data.dtype)
        from ember.autograd.grad_mode import no_grad
        with no_grad():
            return G.add(G.mul(z, std), mean)
    if size is None:
        size = ()
    return _finish(G.normal(mean, std, _size((size,)), gen, _np(dtype)), requires_grad)


def rand_like(input, dtype=None, generator=None, requires_grad=False, device=None):
    """Uniform [0, 1) samples with ``input``'s shape and dtype."""
    _check_device(device)
    t = G.uniform_like(input if dtype is None else input.to(dtype), 0.0, 1.0, resolve(generator))
    return _finish(t, requires_grad)


def randn_like(input, dtype=None, generator=None, requires_grad=False, device=None):
    """Standard normal samples with ``input``'s shape and dtype."""
    _check_device(device)
    t = G.normal_like(input if dtype is None else input.to(dtype), 0.0, 1.0, resolve(generator))
    return _finish(t, requires_grad)


def bernoulli(input, *, generator=None):
    """0/1 samples with probabilities ``input``."""
    return G.bernoulli(input, resolve(generator))


def multinomial(input, num_samples, replacement=False, *, generator=None):
    """Indices sampled from the rows of ``input`` (unnormalised probabilities)."""
    return G.multinomial(input, num_samples, replacement, resolve(generator))


# every public function raises ember's errors naming it (ember.errors.public)
for _n in ("tensor", "as_tensor", "from_numpy", "from_dlpack", "zeros", "ones", "empty", "full",
           "zeros_like", "ones_like", "empty_like", "full_like", "arange", "linspace", "eye",
           "rand", "randn", "randint", "randperm", "normal", "rand_like", "randn_like",
           "bernoulli", "multinomial"):
    globals()[_n] = public(globals()[_n])
del _n
