"""Tensor creation and random sampling: ``tensor``, ``zeros``, ``arange``, ``rand``, ``logspace``,
``empty_strided``, ``randint_like`` and friends (torch's signatures), and the Tensor methods that
create or fill (``new_zeros``, ``fill_``, ``uniform_``, ``cauchy_``, ...).

Factories dispatch like every other op (so the tracer records them); this module only turns
torch-style arguments (varargs sizes, dtypes, ``requires_grad``) into the spec's."""
import builtins
import functools

import numpy as np

from ember import _dtype
from ember.autograd._generated import functions as G
from ember.kernels.dtypes import storable_range
from ember.autograd.function import Function
from ember.errors import (EmberOverflowError, EmberRuntimeError, EmberTypeError, EmberValueError,
                          UnsupportedError)
from ember.errors import public as _public
from ember.random import resolve
from ember.tensor import Size, Tensor


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


def _tensor_options(fn=None, *, layout=True, pin_memory=True):
    """``fn`` (a factory) taking torch's ``layout=`` and ``pin_memory=`` too (each where torch's
    does): ember's tensors are strided CPU tensors, so ``layout`` may be None or
    ``ember.strided`` and ``pin_memory`` False; other values raise torch's CPU-only errors
    (pinned memory only serves copies to an accelerator)."""
    if fn is None:
        return functools.partial(_tensor_options, layout=layout, pin_memory=pin_memory)
    name = fn.__name__.lstrip("_")
    takes = {"layout"} if layout else set()
    takes |= {"pin_memory"} if pin_memory else set()

    @functools.wraps(fn)
    def make(*args, **kwargs):
        if takes:
            lay = kwargs.pop("layout", None) if "layout" in takes else None
            pin = kwargs.pop("pin_memory", False) if "pin_memory" in takes else False
            if lay is not None and not isinstance(lay, _dtype.layout):
                raise EmberTypeError(f"{name}(): argument 'layout' must be ember.layout, not "
                                     f"{type(lay).__name__}")
            if lay is not None and lay is not _dtype.strided:
                raise UnsupportedError(f"{name}(): layout={lay} is not supported: ember's "
                                       f"factories make strided tensors "
                                       f"(ember.sparse_coo_tensor makes sparse ones)")
            if pin:
                raise EmberRuntimeError(f"{name}(): pin_memory=True requires a CUDA or other "
                                        f"accelerator backend; ember runs only on the CPU")
        return fn(*args, **kwargs)
    return make


def _infer(data, nested=False):
    if isinstance(data, Tensor):
        if not nested:
            return data._data
        if data._data.size != 1:  # inside a list a tensor is one number, as in torch
            raise EmberValueError(f"tensor: only one element tensors can be converted to Python "
                                  f"scalars, got an element of shape {list(data._data.shape)}; "
                                  f"to join tensors into one use ember.stack(tensors) (a new "
                                  f"dimension) or ember.cat(tensors)")
        return data._data.reshape(())
    if isinstance(data, (list, tuple)):
        items = [_infer(d, True) for d in data]
        if not items:
            return np.zeros((0,), _dtype.get_default_dtype().numpy)
        return np.array(items) if not builtins.all(isinstance(i, np.ndarray) for i in items) \
            else np.stack(items) if len({i.shape for i in items}) == 1 else _ragged()
    return data


class _Ragged(Exception):
    """Nested lists whose lengths differ (``tensor`` names where, in the whole of them)."""


def _ragged():
    raise _Ragged


def _ragged_error(data):
    return EmberValueError(f"tensor: {_first_mismatch(data)}: expected a sequence of "
                           f"equal-length sequences, got {_dtype._short_repr(data)}")


def _first_mismatch(data):
    """torch's words for the first place ragged nested lists ``data`` differ from the shape
    their first elements give."""
    def length(d):
        if isinstance(d, (list, tuple)):
            return len(d)
        shape = getattr(d, "shape", ())
        return shape[0] if len(shape) else None

    shape, d = [], data
    while length(d) is not None:
        shape.append(length(d))
        d = d[0] if len(d) else None

    def walk(d, dim):
        n = length(d)
        if n != shape[dim]:
            return f"expected sequence of length {shape[dim]} at dim {dim} (got " \
                   f"{type(d).__name__ if n is None else n})"
        if dim + 1 < len(shape):
            for item in d:
                found = walk(item, dim + 1)
                if found:
                    return found
        return None
    return walk(data, 0) or "ragged nested sequences"


def _leaf_arrays(data, out):
    """One-element arrays of the dtypes torch infers for the leaves of nested lists ``data``
    (a tensor's, array's or NumPy scalar's own, int64 / the default float / complex for Python
    numbers); False where no leaf is a tensor, an array or a NumPy scalar (NumPy's inference
    then stands)."""
    found = False
    for d in data:
        if isinstance(d, (list, tuple)):
            found = _leaf_arrays(d, out) or found
        elif isinstance(d, Tensor):
            out.append(d._data.reshape(-1)[:1])
            found = True
        elif isinstance(d, (np.ndarray, np.generic)):
            out.append(np.asarray(d).reshape(-1)[:1])
            found = True
        elif isinstance(d, builtins.bool):
            out.append(np.ones(1, np.bool_))
        elif isinstance(d, builtins.int):
            out.append(np.ones(1, np.int64))
        elif isinstance(d, builtins.float):
            out.append(np.ones(1, _dtype.get_default_dtype().numpy))
        elif isinstance(d, builtins.complex):
            out.append(np.ones(1, _dtype.default_complex().numpy))
    return found


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


@_tensor_options(layout=False)
def tensor(data, dtype=None, device=None, requires_grad=False):
    """A new tensor holding a copy of ``data`` (nested lists, numbers, arrays or tensors).

    Python floats become the default float dtype, ints int64, bools bool. Raises EmberValueError
    for ragged nested lists, EmberOverflowError for ints outside int64 and EmberTypeError for
    unsupported element types.
    """
    _check_device(device)
    if isinstance(data, Tensor):   # (stacklevel: past _tensor_options and the public wrapper)
        import warnings
        warnings.warn("To copy construct from a tensor, it is recommended to use "
                      "sourceTensor.detach().clone() or sourceTensor.detach().clone()."
                      "requires_grad_(True), rather than torch.tensor(sourceTensor).",
                      UserWarning, stacklevel=4)
    if isinstance(data, np.ndarray):
        arr = np.array(data, copy=True)
    else:
        try:
            arr = np.array(_infer(data))
        except _Ragged:
            raise _ragged_error(data) from None
        except EmberValueError:
            raise
        except (ValueError, TypeError, OverflowError) as e:
            if "inhomogeneous" in str(e):
                raise _ragged_error(data) from None
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
        leaves = []
        if typed and dtype is None and isinstance(data, (list, tuple)) and \
                _leaf_arrays(data, leaves):  # typed leaves in a list: torch's promotion of them all
            from ember.kernels.dtypes import result_type
            arr = arr.astype(result_type(*leaves), copy=False)
    if (arr.dtype.kind == "O" and not isinstance(data, np.ndarray)) or (
            arr.dtype.kind in "US" and isinstance(data, (list, tuple))):
        _unsupported_leaf(data, arr)
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


def _unsupported_leaf(data, arr):
    """torch's error for nested lists holding something that is not a number: ValueError for
    strings, RuntimeError naming the type otherwise (None, a dict, ...)."""
    if arr.dtype.kind in "US":
        raise EmberValueError(f"tensor: can't convert a {type(data).__name__} of str to a tensor "
                              f"(too many dimensions 'str')")

    def odd(d):
        if isinstance(d, (list, tuple)):
            for item in d:
                found = odd(item)
                if found is not None:
                    return found
            return None
        ok = (builtins.bool, builtins.int, builtins.float, builtins.complex, np.generic,
              np.ndarray, Tensor)
        return None if isinstance(d, ok) else type(d).__name__
    name = odd(data) if isinstance(data, (list, tuple)) else type(data).__name__
    if name is not None:
        raise EmberRuntimeError(f"tensor: Could not infer dtype of {name}")


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


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=None):
    """torch.asarray: ``obj`` as a tensor, sharing memory with a tensor, an ndarray, a DLPack
    capsule or a buffer (read as ``dtype``, else the default dtype) when no copy is needed and
    ``copy`` is not True (``obj`` itself for a tensor); ``copy=False`` where a copy is needed
    raises EmberValueError. A non-contiguous ndarray is copied (ember tensors are contiguous)."""
    _check_device(device)
    target = None if dtype is None else _dtype.to_numpy_dtype(dtype)
    if isinstance(obj, Tensor):
        out = _alias_or_copy(obj._data, target, copy, "tensor")
        out = obj if out is obj._data else Tensor._make(out)
    else:
        arr = _array_of(obj, target)
        if arr is None:
            if copy is False:
                raise EmberValueError("asarray: can't alias arbitrary sequence into a tensor.")
            out = tensor(obj, dtype=dtype)
        else:
            _dtype.from_numpy_dtype(arr.dtype)
            out = Tensor._make(np.ascontiguousarray(_alias_or_copy(arr, target, copy,
                                                                   "ndarray")))
    if requires_grad:
        if out._data.dtype.kind not in "fcV":
            raise EmberRuntimeError(f"asarray: Only Tensors of floating point and complex dtype "
                                    f"can require gradients, got {out.dtype}")
        out.requires_grad_(True)
    return out


def _array_of(obj, target):
    """The ndarray ``obj`` shares (an ndarray, a NumPy scalar, a DLPack exporter, a buffer read
    as ``target`` or the default dtype), or None for sequences and Python scalars."""
    if isinstance(obj, (np.ndarray, np.generic)):
        return np.asarray(obj)
    if hasattr(obj, "__dlpack__"):
        return np.from_dlpack(obj)
    try:
        view = memoryview(obj)
    except TypeError:
        return None
    return np.frombuffer(view, target if target is not None else _np(None))


def _alias_or_copy(arr, target, copy, what):
    if target is not None and arr.dtype != target:
        if copy is False:
            raise EmberValueError(f"asarray: can't alias {what} with dtype {arr.dtype} into "
                                  f"dtype {target}.")
        return arr.astype(target)
    return arr.copy() if copy else arr


@_tensor_options(pin_memory=False)
def _range(start, end, step=1, *, dtype=None, device=None, requires_grad=False):
    """torch.range (deprecated in torch, with its warning): start, start + step, ... up to and
    including ``end``, in the default float dtype unless ``dtype`` is given."""
    import math
    import warnings
    warnings.warn("torch.range is deprecated and will be removed in a future release because its "
                  "behavior is inconsistent with Python's range builtin. Instead, use "
                  "torch.arange, which produces values in [start, end).", UserWarning,
                  stacklevel=3)
    _check_device(device)
    start, end, step = (v.item() if isinstance(v, Tensor) else v for v in (start, end, step))
    if not (math.isfinite(start) and math.isfinite(end)):
        raise EmberRuntimeError(f"range: unsupported range: {start} -> {end}")
    if step == 0:
        raise EmberRuntimeError("range: step must be nonzero")
    if (step > 0 and end < start) or (step < 0 and end > start):
        raise EmberRuntimeError(f"range: upper bound and lower bound inconsistent with step sign "
                                f"(start {start}, end {end}, step {step})")
    n = builtins.int(math.floor((end - start) / step)) + 1
    arr = (start + np.arange(n, dtype=np.float64) * step).astype(_np(dtype))
    return _finish(Tensor._make(arr), requires_grad)


_WARNED_READONLY = []


def frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False):
    """torch.frombuffer: a 1-d tensor sharing memory with an object of the buffer protocol,
    ``count`` elements (all that fit when -1) of ``dtype`` from byte ``offset``."""
    view = memoryview(buffer)
    n = view.nbytes
    np_dtype = _dtype.to_numpy_dtype(dtype)
    size = np_dtype.itemsize
    if n <= 0 or count == 0:
        raise EmberValueError(f"frombuffer: both buffer length ({n}) and count ({count}) must "
                              f"not be 0")
    if not 0 <= offset < n:
        raise EmberValueError(f"frombuffer: offset ({offset} bytes) must be non-negative and no "
                              f"greater than buffer length ({n} bytes) minus 1")
    if count < 0:
        if (n - offset) % size:
            raise EmberValueError(f"frombuffer: buffer length ({n - offset} bytes) after offset "
                                  f"({offset} bytes) must be a multiple of element size "
                                  f"({size})")
        count = (n - offset) // size
    elif offset + count * size > n:
        raise EmberValueError(f"frombuffer: requested buffer length ({count} * {size} bytes) "
                              f"after offset ({offset} bytes) must not be greater than actual "
                              f"buffer length ({n} bytes)")
    if view.readonly and not _WARNED_READONLY:
        import warnings
        _WARNED_READONLY.append(True)
        warnings.warn("The given buffer is not writable: the tensor is read-only (writing to it "
                      "raises); copy the buffer or make it writable before converting it to a "
                      "tensor.", UserWarning, stacklevel=3)
    arr = np.frombuffer(view.cast("B") if view.ndim != 1 or view.format != "B" else view,
                        np_dtype, count, offset)
    return _finish(Tensor._make(arr), requires_grad)


@_takes_out
@_tensor_options
def zeros(*size, dtype=None, device=None, requires_grad=False, **kw):
    """A tensor of zeros with the given shape: ``zeros(2, 3)``, ``zeros((2, 3))`` or
    ``zeros(size=(2, 3))``."""
    _check_device(device)
    shape = _random_size("zeros", size, _kw_size("zeros", kw))
    return _finish(G.zeros(shape, _np(dtype)), requires_grad)


@_takes_out
@_tensor_options
def ones(*size, dtype=None, device=None, requires_grad=False, **kw):
    """A tensor of ones with the given shape (as ``zeros``, ``size=`` included)."""
    _check_device(device)
    shape = _random_size("ones", size, _kw_size("ones", kw))
    return _finish(G.ones(shape, _np(dtype)), requires_grad)


@_takes_out
@_tensor_options
def empty(*size, dtype=None, device=None, requires_grad=False, memory_format=None, **kw):
    """An uninitialised tensor with the given shape (as ``zeros``, ``size=`` included)."""
    _check_device(device)
    shape = _random_size("empty", size, _kw_size("empty", kw))
    return _finish(G.empty(shape, _np(dtype)), requires_grad)


@_takes_out
@_tensor_options
def full(size, fill_value, dtype=None, device=None, requires_grad=False):
    """A tensor filled with ``fill_value`` (dtype inferred from it when not given)."""
    _check_device(device)
    if isinstance(fill_value, (str, bytes, list, tuple, dict, type(None))):
        raise EmberTypeError(f"full(): argument 'fill_value' must be Number, not "
                             f"{type(fill_value).__name__}")
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


@_tensor_options
def zeros_like(input, dtype=None, device=None, requires_grad=False, memory_format=None):
    """Zeros with ``input``'s shape (and dtype unless given)."""
    _check_device(device)
    return _like(G.zeros_like, input, dtype, requires_grad)


@_tensor_options
def ones_like(input, dtype=None, device=None, requires_grad=False, memory_format=None):
    """Ones with ``input``'s shape (and dtype unless given)."""
    _check_device(device)
    return _like(G.ones_like, input, dtype, requires_grad)


@_tensor_options
def empty_like(input, dtype=None, device=None, requires_grad=False, memory_format=None):
    """Uninitialised with ``input``'s shape (and dtype unless given)."""
    _check_device(device)
    return _like(G.empty_like, input, dtype, requires_grad)


@_tensor_options
def full_like(input, fill_value, dtype=None, device=None, requires_grad=False, memory_format=None):
    """``fill_value`` with ``input``'s shape (and dtype unless given)."""
    _check_device(device)
    return _like(G.full_like, input, dtype, requires_grad, fill_value)


@_takes_out
@_tensor_options
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
@_tensor_options
def linspace(start, end, steps, dtype=None, device=None, requires_grad=False):
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive."""
    _check_device(device)
    return _finish(G.linspace(start, end, steps, _np(dtype)), requires_grad)


@_takes_out
@_tensor_options
def eye(n, m=None, dtype=None, device=None, requires_grad=False):
    """A 2-D tensor with ones on the diagonal."""
    _check_device(device)
    return _finish(G.eye(n, m, _np(dtype)), requires_grad)


def _random_size(name, size, kw_size):
    """``size`` of a factory (zeros, ones, empty, rand, randn): varargs ints, one sequence,
    or ``size=`` (not both)."""
    if kw_size is not None:
        if size:
            raise EmberTypeError(f"{name}() got multiple values for argument 'size'")
        size = (kw_size,)
    return _size(size)


def _floating(dt, complex_ok=False):
    """``dt`` is a floating dtype (bfloat16 included), or complex when ``complex_ok``."""
    return dt.kind in ("fc" if complex_ok else "f") or (
        _dtype.BFLOAT16[0] is not None and dt == _dtype.BFLOAT16[0])


def _float_sample(name, dtype, kernel):
    """torch's check for rand/randn and their ``_like``: floating or complex dtypes only."""
    dt = _np(dtype) if not isinstance(dtype, np.dtype) else dtype
    if not _floating(dt, complex_ok=True):
        raise UnsupportedError(f'{name}: "{kernel}" not implemented for '
                               f"'{_scalar_name(dt)}'")


@_takes_out
@_tensor_options
def rand(*size, generator=None, dtype=None, device=None, requires_grad=False,
         **kw):
    """Uniform samples in [0, 1): ``rand(2, 3)``, ``rand((2, 3))`` or ``rand(size=(2, 3))``.

    Raises EmberTypeError for a bad size, UnsupportedError for a non-floating dtype (as torch)."""
    _check_device(device)
    shape = _random_size("rand", size, _kw_size("rand", kw))
    _float_sample("rand", dtype, "check_uniform_bounds")
    return _finish(G.rand(shape, resolve(generator), _np(dtype)), requires_grad)


@_takes_out
@_tensor_options
def randn(*size, generator=None, dtype=None, device=None, requires_grad=False, **kw):
    """Standard normal samples: ``randn(2, 3)``, ``randn((2, 3))`` or ``randn(size=(2, 3))``.

    Raises EmberTypeError for a bad size, UnsupportedError for a non-floating dtype (as torch)."""
    _check_device(device)
    shape = _random_size("randn", size, _kw_size("randn", kw))
    _float_sample("randn", dtype, "normal_kernel_cpu")
    return _finish(G.randn(shape, resolve(generator), _np(dtype)), requires_grad)


def _kw_size(name, kw):
    size = kw.pop("size", None)
    if kw:
        raise EmberTypeError(f"{name}() got an unexpected keyword argument "
                             f"'{next(iter(kw))}'")
    return size


def _int_arg(name, arg, value, pos):
    """``value`` as a Python int (torch: int-like only; bool and float are refused); an int
    subclass (the JIT's traced sizes) passes through unchanged."""
    if isinstance(value, (builtins.bool, np.bool_)) or not (
            isinstance(value, (builtins.int, np.integer)) or
            isinstance(value, Tensor) and value.numel() == 1 and value._data.dtype.kind in "iu"):
        raise EmberTypeError(f"{name}(): argument '{arg}' (position {pos}) must be int, not "
                             f"{type(value).__name__}")
    return value if isinstance(value, builtins.int) else builtins.int(value)


def _check_random_bounds(name, low, high, dt):
    """torch's random_(from, to) checks: from < to, both storable in ``dt``."""
    if low >= high:
        raise EmberRuntimeError(f"{name}: random_ expects 'from' to be less than 'to', but got "
                                f"from={low} >= to={high}")
    if dt.kind in "iub":
        lo, hi = (0, 1) if dt.kind == "b" else (np.iinfo(dt).min, np.iinfo(dt).max)
        tname = _C_NAMES[dt.str[1:]]
        if not lo <= low <= hi:
            raise EmberRuntimeError(f"{name}: from is out of bounds for {tname}")
        if not lo <= high - 1 <= hi:
            raise EmberRuntimeError(f"{name}: to - 1 is out of bounds for {tname}")


_C_NAMES = {"b1": "bool", "u1": "unsigned char", "i1": "signed char", "i2": "short", "i4": "int",
            "i8": "long", "u2": "unsigned short", "u4": "unsigned int", "u8": "unsigned long"}
_SCALAR_NAMES = {"b1": "Bool", "u1": "Byte", "i1": "Char", "i2": "Short", "i4": "Int", "i8": "Long",
                 "u2": "UInt16", "u4": "UInt32", "u8": "UInt64"}


def _scalar_name(dt):
    """torch's ScalarType name of numpy dtype ``dt`` in kernel errors ('Long', 'Int', ...)."""
    return _SCALAR_NAMES.get(np.dtype(dt).str[1:], str(_dtype.from_numpy_dtype(dt)))


@_takes_out
@_tensor_options
def randint(*args, generator=None, dtype=None, device=None, requires_grad=False, **kw):
    """Integers uniform in [low, high), torch's two overloads: ``randint(high, size)`` and
    ``randint(low=0, high, size)``, positional or by keyword (int64 unless ``dtype``).

    Raises EmberTypeError for a missing or non-int bound or a size that is not a sequence of
    ints, EmberRuntimeError for ``low >= high`` or bounds the dtype cannot hold."""
    _check_device(device)
    for k in kw:
        if k not in ("low", "high", "size"):
            raise EmberTypeError(f"randint() got an unexpected keyword argument '{k}'")
    names = ("high", "size") if "low" not in kw and len(args) <= 2 and not (
        len(args) == 2 and "size" in kw) else ("low", "high", "size")
    if len(args) > len(names):
        raise EmberTypeError(f"randint() takes at most 3 positional arguments "
                             f"({len(args)} given)")
    bound = dict(zip(names, args))
    for k, v in kw.items():
        if k in bound:
            raise EmberTypeError(f"randint() got multiple values for argument '{k}'")
        bound[k] = v
    missing = [n for n in names if n not in bound]
    if missing:
        raise EmberTypeError(f"randint() missing required argument "
                             f"{', '.join(repr(m) for m in missing)}")
    off = 0 if names[0] == "low" else -1
    low = _int_arg("randint", "low", bound["low"], 1) if "low" in bound else 0
    high = _int_arg("randint", "high", bound["high"], 2 + off)
    size = bound["size"]
    if not isinstance(size, (tuple, list)):
        raise EmberTypeError(f"randint(): argument 'size' (position {3 + off}) must be tuple of "
                             f"ints, not {type(size).__name__}")
    dt = _np(dtype, _dtype.int64)
    _check_random_bounds("randint", low, high, dt)
    return _finish(G.randint(low, high, _size((size,)), resolve(generator), dt), requires_grad)


@_tensor_options
def randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False):
    """A random permutation of 0..n-1 (int64 unless ``dtype``).

    Raises EmberTypeError for a non-int ``n``, EmberRuntimeError for a negative ``n`` or one
    the dtype cannot hold."""
    _check_device(device)
    n = _int_arg("randperm", "n", n, 1)
    if n < 0:
        raise EmberRuntimeError(f"randperm: Trying to create tensor with negative dimension {n}: "
                                f"[{n}]")
    dt = _np(dtype, _dtype.int64)
    if n > 0 and dt.kind in "iu" and n - 1 > np.iinfo(dt).max:
        raise EmberRuntimeError(f"randperm: value cannot be converted to type {dt.name}_t "
                                f"without overflow (n={n})")
    return _finish(G.randperm(n, resolve(generator), dt), requires_grad)


class _ZeroGradNormal(Function):
    """torch's ``normal(Tensor mean, Tensor std)``: the sample's gradient with respect to
    ``mean`` and ``std`` is zero (a fresh draw, not a reparametrised one)."""

    @staticmethod
    def forward(ctx, sample, mean, std):
        ctx.shapes = [getattr(a, "shape", None) for a in (mean, std)]
        ctx.dtypes = [getattr(a, "dtype", None) for a in (mean, std)]
        return sample

    @staticmethod
    def backward(ctx, grad):
        return (None,) + tuple(None if s is None else zeros(s, dtype=d)
                               for s, d in zip(ctx.shapes, ctx.dtypes))


@_takes_out
@_tensor_options
def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None,
           requires_grad=False):
    """Normal samples: ``normal(mean_tensor, std)``, ``normal(mean, std_tensor)``,
    ``normal(mean_tensor, std_tensor)`` (shape follows the tensors; zero gradient to them, as
    torch) or ``normal(mean, std, size)`` with floats.

    Raises EmberRuntimeError for a negative std, EmberTypeError for a ``size`` given with
    tensor arguments or missing with float ones."""
    _check_device(device)
    gen = resolve(generator)
    if isinstance(mean, Tensor) or isinstance(std, Tensor):
        if size is not None:
            raise EmberTypeError("normal(): 'size' is only taken with float mean and std, got "
                                 "a Tensor mean or std")
        ref = mean if isinstance(mean, Tensor) else std
        if isinstance(std, Tensor):
            if bool(np.any(std._data < 0)):
                raise EmberRuntimeError("normal expects all elements of std >= 0.0")
        elif std < 0:
            raise EmberRuntimeError(f"normal expects std >= 0.0, but found std {std}")
        shape = np.broadcast_shapes(np.shape(getattr(mean, "_data", mean)),
                                    np.shape(getattr(std, "_data", std)))
        from ember.autograd.grad_mode import no_grad
        with no_grad():
            out = G.add(G.mul(G.randn(shape, gen, ref._data.dtype), std), mean)
        return _ZeroGradNormal.apply(out, mean, std)
    if size is None:
        raise EmberTypeError("normal() missing required argument 'size' (with float mean and "
                             "std)")
    return _finish(G.normal(mean, std, _size((size,)), gen, _np(dtype)), requires_grad)


@_tensor_options
def rand_like(input, dtype=None, generator=None, requires_grad=False, device=None, **kw):
    """Uniform [0, 1) samples with ``input``'s shape and dtype (a floating dtype, as torch)."""
    _check_device(device)
    ref = input if dtype is None else input.to(dtype)
    _float_sample("rand_like", ref._data.dtype, "check_uniform_bounds")
    t = G.uniform_like(ref, 0.0, 1.0, resolve(generator))
    return _finish(t, requires_grad)


@_tensor_options
def randn_like(input, dtype=None, generator=None, requires_grad=False, device=None, **kw):
    """Standard normal samples with ``input``'s shape and dtype (a floating dtype, as torch)."""
    _check_device(device)
    ref = input if dtype is None else input.to(dtype)
    _float_sample("randn_like", ref._data.dtype, "normal_kernel_cpu")
    t = G.normal_like(ref, 0.0, 1.0, resolve(generator))
    return _finish(t, requires_grad)


def bernoulli(input, p=None, *, generator=None):
    """0/1 samples with probabilities ``input`` (or the float ``p`` everywhere), in
    ``input``'s dtype.

    Raises EmberRuntimeError for a probability outside [0, 1], UnsupportedError for integer
    probabilities (as torch)."""
    if p is not None:
        if not 0.0 <= p <= 1.0:
            raise EmberRuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={p}")
        return G.lt(G.uniform_like(G.to(input, np.dtype(np.float64)), 0.0, 1.0,
                                   resolve(generator)), float(p)).to(input.dtype)
    if not _floating(input._data.dtype):
        raise UnsupportedError(f'bernoulli: "bernoulli_tensor_cpu_p_" not implemented for '
                               f"'{_scalar_name(input._data.dtype)}'")
    if not bool(np.all((input._data >= 0) & (input._data <= 1))):
        raise EmberRuntimeError("bernoulli: Expected p_in >= 0 && p_in <= 1 to be true, but got "
                                "false.")
    return G.bernoulli(input, resolve(generator))


def poisson(input, generator=None):
    """Poisson samples, each with the rate at that position of ``input`` (float); the result has
    ``input``'s shape and dtype. Its gradient is zero, as torch's.

    Raises UnsupportedError for a non-floating ``input``, EmberRuntimeError for a negative or
    NaN rate (as torch), EmberValueError for a rate too large to draw from (torch returns
    garbage there)."""
    d = input._data
    if not _floating(d.dtype):
        raise UnsupportedError(f'"poisson_cpu" not implemented for \'{_scalar_name(d.dtype)}\'')
    rates = d.astype(np.float64)
    if not bool(np.all(rates >= 0)):
        raise EmberRuntimeError("invalid Poisson rate, expected rate to be non-negative")
    if d.size and float(rates.max()) > _POISSON_MAX_RATE:
        raise EmberValueError(f"rate {float(rates.max())} is too large to sample (at most "
                              f"{_POISSON_MAX_RATE:g})")
    return G.poisson(input, resolve(generator))


_POISSON_MAX_RATE = 1e18   # NumPy's Generator.poisson refuses larger rates


def binomial(count, prob, generator=None):
    """Binomial samples: successes in ``count`` trials of probability ``prob`` (float tensors of
    one dtype, broadcast together), in that dtype. Not differentiable (a backward through it
    raises, as torch's).

    Raises EmberValueError for non-floating dtypes (as torch), for a negative or non-integral
    count or a probability outside [0, 1] (torch returns arbitrary values there),
    EmberRuntimeError for two dtypes or shapes that do not broadcast (as torch)."""
    c, p = count._data, prob._data
    for what, d in (("count", c), ("prob", p)):
        if not _floating(d.dtype):
            raise EmberValueError(f"only floating-point dtypes are supported for {what}, got "
                                  f"{_scalar_name(d.dtype)}")
    if c.dtype != p.dtype:
        raise EmberRuntimeError(f"count ({c.dtype}) and prob ({p.dtype}) must have one dtype")
    try:
        np.broadcast_shapes(c.shape, p.shape)
    except ValueError:
        raise EmberRuntimeError(f"count of shape {list(c.shape)} and prob of shape "
                                f"{list(p.shape)} cannot be broadcast together") from None
    n = c.astype(np.float64)
    if not bool(np.all((n >= 0) & (n == np.floor(n)) & (n < 2 ** 62))):
        raise EmberValueError("count must hold non-negative whole numbers")
    if not bool(np.all((p >= 0) & (p <= 1))):
        raise EmberValueError("prob must be in [0, 1]")
    return G.binomial(count, prob, resolve(generator))


def multinomial(input, num_samples, replacement=False, *, generator=None):
    """Indices sampled from the rows of ``input`` (unnormalised probabilities, 1-d or 2-d).

    Raises EmberRuntimeError as torch: non-floating input, other ranks, ``num_samples <= 0``,
    more samples than categories without replacement, negative/inf/nan entries, a zero row."""
    d = input._data
    if not _floating(d.dtype):
        raise EmberRuntimeError(f"multinomial only supports floating-point dtypes for input, "
                                f"got: {_scalar_name(d.dtype)}")
    if d.ndim not in (1, 2):
        raise EmberRuntimeError(f"multinomial: prob_dist must be 1 or 2 dim, got shape "
                                f"{list(d.shape)}")
    num_samples = _int_arg("multinomial", "num_samples", num_samples, 2)
    if num_samples <= 0:
        raise EmberRuntimeError("multinomial: cannot sample n_sample <= 0 samples")
    if not replacement and num_samples > d.shape[-1]:
        raise EmberRuntimeError("multinomial: cannot sample n_sample > prob_dist.size(-1) "
                                "samples without replacement")
    f = d.astype(np.float64)
    if not bool(np.all(np.isfinite(f) & (f >= 0))):
        raise EmberRuntimeError("multinomial: probability tensor contains either `inf`, `nan` "
                                "or element < 0")
    if bool(np.any(f.sum(axis=-1) <= 0)):
        raise EmberRuntimeError("multinomial: invalid multinomial distribution (sum of "
                                "probabilities <= 0)")
    return G.multinomial(input, num_samples, replacement, resolve(generator))


def _zero_(self):
    return G.copy_(self, G.zeros_like(self))


def _fill_(self, value):
    return G.copy_(self, value if isinstance(value, Tensor) else G.full_like(self, value))


def _double(op, name, position, value):
    """A ``float`` argument as torch's parser takes it: a number, or a 0-dim tensor that does
    not require grad (its value; torchvision's RandomResizedCrop passes ``log_ratio[0]``)."""
    if isinstance(value, Tensor):
        if value.dim() == 0 and not value.requires_grad:
            return value.item()
        raise EmberTypeError(f"{op}(): argument '{name}' (position {position}) must be float, "
                             f"not Tensor (of shape {list(value.shape)}"
                             f"{', requiring grad' if value.requires_grad else ''})")
    return value


def _uniform_(self, a=0.0, b=1.0, generator=None):
    a, b = _double("uniform_", "from", 1, a), _double("uniform_", "to", 2, b)
    return G.copy_(self, G.uniform_like(self, a, b, resolve(generator)))


def _normal_(self, mean=0.0, std=1.0, generator=None):
    mean, std = _double("normal_", "mean", 1, mean), _double("normal_", "std", 2, std)
    return G.copy_(self, G.normal_like(self, mean, std, resolve(generator)))


def _bernoulli_(self, p=0.5, generator=None):
    probs = G.full_like(self, p) if not isinstance(p, Tensor) else p
    return G.copy_(self, G.bernoulli(probs, resolve(generator)))


def _random_(self, *args, generator=None, **kwargs):
    """``Tensor.random_``: integers uniform in ``[from, to)`` written in place, torch's
    overloads ``random_()``, ``random_(to)``, ``random_(from, to)`` (``to=None``: the dtype's
    top, for floats ``2 ** mantissa digits`` inclusive so that every value is exact; int64's
    top is 2 ** 63 - 2)."""
    names = ("from", "to")
    if len(args) + len(kwargs) > 2 or set(kwargs) - set(names):
        raise EmberTypeError("random_: takes random_(), random_(to) or random_(from, to)")
    lo, hi = 0, None
    if len(args) == 1 and not kwargs:
        hi = args[0]
    else:
        bound = dict(zip(names, args))
        bound.update(kwargs)
        lo, hi = bound.get("from", 0), bound.get("to")
    dt = self._data.dtype
    if hi is None:
        if dt.kind == "f" or self.dtype == _dtype.bfloat16_dtype():
            digits = {2: 11, 4: 24, 8: 53}[dt.itemsize] \
                if self.dtype != _dtype.bfloat16_dtype() else 8
            hi = (1 << digits) + 1
        elif dt == np.bool_:
            hi = 2
        else:
            hi = builtins.min(builtins.int(np.iinfo(dt).max) + 1, (1 << 63) - 1)
    lo, hi = _int_arg("random_", "from", lo, 1), _int_arg("random_", "to", hi, 2)
    ref = self if dt != np.bool_ else G.to(self, np.dtype(np.int64))
    _check_random_bounds("random_", lo, hi, ref._data.dtype)
    return G.copy_(self, G.randint_like(ref, lo, hi, resolve(generator)))


def _new(fill):
    def method(self, *size, dtype=None, device=None, requires_grad=False):
        _check_device(device)
        dt = self.dtype if dtype is None else dtype
        if fill == "zeros":
            return zeros(*size, dtype=dt, requires_grad=requires_grad)
        if fill == "ones":
            return ones(*size, dtype=dt, requires_grad=requires_grad)
        return empty(*size, dtype=dt, requires_grad=requires_grad)
    method.__name__ = f"new_{fill}"
    return _tensor_options(method)


def _new_legacy(self, *args, device=None):
    """``Tensor.new(...)``, torch's legacy constructor: no argument -> an empty tensor of this
    dtype; sizes (ints, or one ``Size``) -> an uninitialised tensor of that shape; data (a
    list, a tuple, an array) -> a tensor of it in this dtype, as torch reads them."""
    _check_device(device)
    dt = self.dtype
    if not args:
        return empty(0, dtype=dt)
    if len(args) == 1 and isinstance(args[0], Size):
        return empty(*args[0], dtype=dt)
    if builtins.all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) for n in args):
        return empty(*args, dtype=dt)
    if len(args) == 1:
        return tensor(args[0], dtype=dt)
    raise EmberTypeError(f"new(): expected sizes (ints) or one sequence of data, got "
                         f"{', '.join(type(a).__name__ for a in args)}")


@_tensor_options
def _new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False):
    _check_device(device)
    return full(size, fill_value, dtype=self.dtype if dtype is None else dtype,
                         requires_grad=requires_grad)


@_tensor_options(layout=False)
def _new_tensor(self, data, dtype=None, device=None, requires_grad=False):
    _check_device(device)
    return tensor(data, dtype=self.dtype if dtype is None else dtype,
                           requires_grad=requires_grad)


def _multinomial_method(self, num_samples, replacement=False, *, generator=None):
    return G.multinomial(self, num_samples, replacement, resolve(generator))


def _ints(seq, what, op):
    if isinstance(seq, (int, np.integer)):
        seq = (seq,)
    if not isinstance(seq, (tuple, list)) or not builtins.all(
            isinstance(s, (int, np.integer)) for s in seq):
        raise EmberTypeError(f"{op}: {what} must be a sequence of ints, got {seq!r}")
    return tuple(builtins.int(s) for s in seq)


def _scalar(v):
    if isinstance(v, Tensor):
        if v.numel() != 1:
            raise EmberRuntimeError(f"logspace: expected a 0-d tensor bound, got shape "
                                    f"{tuple(v.shape)}")
        return v.item()
    return v


@_tensor_options
def logspace(start, end, steps, base=10.0, *, dtype=None, device=None, requires_grad=False,
             out=None):
    """``steps`` values ``base ** x`` for ``x`` evenly spaced from ``start`` to ``end``."""
    return _finish(G.logspace(_scalar(start), _scalar(end), steps, float(base), _np(dtype)),
                   requires_grad)


@_tensor_options
def empty_strided(size, stride, *, dtype=None, device=None, requires_grad=False):
    """An uninitialised tensor of ``size`` (ember's arrays keep their own strides)."""
    size = _ints(size, "size", "empty_strided")
    stride = _ints(stride, "stride", "empty_strided")
    if len(size) != len(stride):
        raise EmberRuntimeError(f"empty_strided: mismatch in length of strides and shape: "
                                f"{len(stride)} strides for shape {size}")
    return _finish(G.empty(size, _np(dtype)), requires_grad)


@_tensor_options
def empty_permuted(size, physical_layout, *, dtype=None, device=None, requires_grad=False):
    """An uninitialised tensor of ``size``; ``physical_layout`` must permute its dims."""
    size = _ints(size, "size", "empty_permuted")
    perm = _ints(physical_layout, "physical_layout", "empty_permuted")
    if sorted(perm) != list(range(len(size))):
        raise EmberRuntimeError(f"empty_permuted: physical_layout {list(perm)} is not a "
                                f"permutation of the {len(size)} dims of size {size}")
    return _finish(G.empty(size, _np(dtype)), requires_grad)


@_tensor_options
def scalar_tensor(s, *, dtype=None, device=None, requires_grad=False):
    """A 0-d tensor holding ``s`` (default dtype unless given)."""
    if isinstance(s, Tensor):
        s = s.item()
    return _finish(G.full((), s, _np(dtype)), requires_grad)


@_tensor_options
def randint_like(input, low=0, high=None, *, dtype=None, device=None, requires_grad=False,
                 memory_format=None, generator=None):
    """Integers uniform in [low, high) with ``input``'s shape (and dtype unless given)."""
    if high is None:
        low, high = 0, low
    low, high = _int_arg("randint_like", "low", low, 2), _int_arg("randint_like", "high", high, 3)
    ref = input if dtype is None else G.to(input, _dtype.to_numpy_dtype(dtype))
    _check_random_bounds("randint_like", low, high, ref._data.dtype)
    return _finish(G.randint_like(ref, low, high, resolve(generator)), requires_grad)


def _fill(kernel, *params):
    def method(self, *args, generator=None, **kwargs):
        values = list(params)
        names = [p[0] for p in params]
        if len(args) > len(values):
            raise EmberTypeError(f"{kernel}: takes at most {len(values)} arguments, got "
                                 f"{len(args)}")
        for i, a in enumerate(args):
            values[i] = (names[i], a)
        for k, v in kwargs.items():
            if k not in names:
                raise EmberTypeError(f"{kernel}: got an unexpected keyword argument {k!r}")
            values[names.index(k)] = (k, v)
        if self._data.dtype.kind != "f" and kernel != "geometric_":
            raise EmberRuntimeError(f"{kernel}: expects a floating point tensor, got "
                                    f"{self._data.dtype}")
        draw = getattr(G, kernel[:-1] + "_like")
        return G.copy_(self, draw(self, *(float(v) for _, v in values), resolve(generator)))
    method.__name__ = kernel
    method.__doc__ = (f"Fill in place with samples (torch's ``Tensor.{kernel}``; parameters "
                      f"{', '.join(f'{n}={d}' for n, d in params)}).")
    return method


_NO_DEFAULT = None


@_tensor_options
def _new_empty_strided(self, size, stride, *, dtype=None, device=None, requires_grad=False):
    return empty_strided(size, stride, dtype=self.dtype if dtype is None else dtype,
                         requires_grad=requires_grad)


def zero_(input):
    """Fill ``input`` with zeros in place and return it (``torch.zero_``)."""
    return input.zero_()


# these raise ember's errors naming them (ember.errors.public)
for _n in ("tensor", "as_tensor", "from_numpy", "from_dlpack", "zeros", "ones", "empty",
           "full", "zeros_like", "ones_like", "empty_like", "full_like", "arange",
           "linspace", "eye", "rand", "randn", "randint", "randperm", "normal",
           "rand_like", "randn_like", "bernoulli", "multinomial", "poisson", "binomial"):
    globals()[_n] = _public(globals()[_n])
del _n
