"""Tensor types and conversions: ``Tensor.to`` / ``float()`` / ``type()`` / ``cpu()``, dtype
queries (``is_tensor``, ``result_type``, ``promote_types``, ``can_cast``), and torch's legacy
tensor types: ``FloatTensor``, ``DoubleTensor``, ``HalfTensor``,
``LongTensor``, ``IntTensor``, ``ShortTensor``, ``CharTensor``, ``ByteTensor``, ``BoolTensor``.

Each is a constructor as in torch (``FloatTensor(2, 3)`` an uninitialised tensor of that shape,
``FloatTensor([1, 2])`` one from data, ``FloatTensor()`` an empty one) and works with
``isinstance`` (a tensor of that dtype). ``Tensor.type()`` names them in torch's spelling
(``"torch.FloatTensor"``: programs compare it with such literals; also ``BFloat16Tensor``,
``ComplexFloatTensor``, ``ComplexDoubleTensor``) and ``Tensor.type("torch.FloatTensor")`` / ``type(ember.FloatTensor)`` casts to them.
"""
import importlib

import numpy as np

from ember import _dtype
from ember.autograd._generated import functions as G
from ember.errors import public as _public
from ember.tensor import Tensor, new_tensor

_TYPES = (("FloatTensor", _dtype.float32), ("DoubleTensor", _dtype.float64),
          ("HalfTensor", _dtype.float16), ("LongTensor", _dtype.int64),
          ("IntTensor", _dtype.int32), ("ShortTensor", _dtype.int16),
          ("CharTensor", _dtype.int8), ("ByteTensor", _dtype.uint8),
          ("BoolTensor", _dtype.bool_))
NAME_OF = {d: n for n, d in _TYPES}
# type names of dtypes without a legacy constructor here (torch's spelling), by dtype name
_OTHER_NAMES = {"bfloat16": "BFloat16Tensor", "complex64": "ComplexFloatTensor",
                "complex128": "ComplexDoubleTensor"}


class _LegacyMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.dtype == cls.dtype

    def __call__(cls, *args, device=None):
        return new_tensor(args, cls.dtype, f"ember.{cls.__name__}", device)

    def __repr__(cls):
        return f"<class 'ember.{cls.__name__}'>"


def _make_type(name, dt):
    return _LegacyMeta(name, (), {"dtype": dt, "__module__": "ember",
                                  "__doc__": f"Legacy constructor of {dt} tensors (as "
                                             f"torch.{name})."})


LEGACY = {name: _make_type(name, dt) for name, dt in _TYPES}


def dtype_of_type_name(name):
    """The dtype a ``Tensor.type`` argument names ("torch.FloatTensor", "ember.LongTensor",
    "FloatTensor", a legacy class), or None when it names none."""
    if isinstance(name, _LegacyMeta):
        return name.dtype
    if isinstance(name, str):
        short = name.rpartition(".")[2]
        if name not in (short, "torch." + short, "ember." + short):
            return None
        for n, dt in _TYPES:
            if n == short:
                return dt
        for dtype_name, n in _OTHER_NAMES.items():
            if n == short:
                return _dtype.bfloat16_dtype() if dtype_name == "bfloat16" else \
                    getattr(_dtype, dtype_name)
    return None


def type_name(dtype):
    """The legacy type name of ``dtype`` in torch's spelling (``"torch.FloatTensor"``): code
    compares ``x.type()`` with such literals."""
    name = NAME_OF.get(dtype) or _OTHER_NAMES.get(dtype.name)
    if name is None:
        from ember.errors import EmberTypeError
        raise EmberTypeError(f"type(): {dtype} has no legacy tensor type name")
    return "torch." + name


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
    """No argument: the legacy type name in torch's spelling ("torch.FloatTensor", as user code
    compares it); a dtype, a legacy type or its name ("torch.LongTensor"): this tensor cast to
    it."""
    if dtype is None:
        return type_name(self.dtype)
    named = dtype_of_type_name(dtype)
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


def _is_conj(self):
    return False


def _to_sparse(self, sparse_dim=None, **kwargs):
    """The sparse COO form of this tensor (ember.sparse.to_sparse; loads ember.sparse)."""
    return importlib.import_module("ember.sparse").to_sparse(self, sparse_dim, **kwargs)


def _cpu(self):
    return self


def _get_device(self):
    """Tensor.get_device: -1, the index torch gives a CPU tensor."""
    return -1


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


# these raise ember's errors naming them (ember.errors.public)
for _n in ("numel", "is_tensor", "is_floating_point", "result_type", "promote_types",
           "can_cast"):
    globals()[_n] = _public(globals()[_n])
del _n
