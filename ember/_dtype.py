"""ember dtypes: thin named wrappers over NumPy dtypes (``ember.float32`` ...)."""
import builtins as _builtins

import numpy as np

from ember.errors import EmberTypeError


class dtype:
    """A tensor element type. ``ember.float32.numpy`` is the matching NumPy dtype."""

    __slots__ = ("name", "numpy", "is_floating_point", "is_complex", "is_signed", "itemsize",
                 "short")

    def __init__(self, name, np_dtype, short):
        self.name = name
        self.numpy = np.dtype(np_dtype)
        self.is_floating_point = self.numpy.kind == "f"
        self.is_complex = self.numpy.kind == "c"
        self.is_signed = self.numpy.kind in "fic"
        self.itemsize = self.numpy.itemsize
        self.short = short

    def __repr__(self):
        return f"ember.{self.name}"

    def __reduce__(self):
        return (_by_name, (self.name,))

    def to_complex(self):
        """The complex dtype with this dtype's parts (float32 -> complex64, float64 ->
        complex128; a complex dtype itself), as torch's ``dtype.to_complex``."""
        if self.is_complex:
            return self
        if self.name not in ("float32", "float64"):
            raise EmberTypeError(f"to_complex is not supported for ember.{self.name} (ember's "
                                 "complex dtypes are complex64 and complex128)")
        return complex64 if self.name == "float32" else complex128

    def to_real(self):
        """The real dtype of this dtype's parts (complex64 -> float32, complex128 -> float64;
        any other dtype itself), as torch's ``dtype.to_real``."""
        if not self.is_complex:
            return self
        return float32 if self.name == "complex64" else float64


float32 = dtype("float32", np.float32, "f32")
float64 = dtype("float64", np.float64, "f64")
float16 = dtype("float16", np.float16, "f16")
int64 = dtype("int64", np.int64, "i64")
int32 = dtype("int32", np.int32, "i32")
int16 = dtype("int16", np.int16, "i16")
int8 = dtype("int8", np.int8, "i8")
uint8 = dtype("uint8", np.uint8, "u8")
bool_ = dtype("bool", np.bool_, "b8")
complex64 = dtype("complex64", np.complex64, "c64")
complex128 = dtype("complex128", np.complex128, "c128")

float = float32  # noqa: A001  (torch aliases)
double = float64
half = float16
long = int64
int = int32  # noqa: A001
short = int16
bool = bool_  # noqa: A001
cfloat = complex64
cdouble = complex128

ALL = (float32, float64, float16, int64, int32, int16, int8, uint8, bool_, complex64, complex128)
_FROM_NUMPY = {d.numpy: d for d in ALL}
_BY_NAME = {d.name: d for d in ALL}
_BY_SHORT = {d.short: d for d in ALL}


_bfloat16 = None
# [NumPy's bfloat16 dtype] once ember.bfloat16 exists, else [None]; read by dispatch
# (ember.autograd.bfloat16), which turns on its compute rule when it is set
BFLOAT16 = [None]


def bfloat16_dtype():
    """``ember.bfloat16``, made on first use. Tensors hold ml_dtypes' bfloat16 values; ops
    compute them in float32 and round the result (ember.autograd.bfloat16)."""
    global _bfloat16
    if _bfloat16 is None:
        from ember._optional import require
        ml = require("ml_dtypes", feature="ember.bfloat16")
        d = dtype("bfloat16", ml.bfloat16, "bf16")
        d.is_floating_point = d.is_signed = True
        _FROM_NUMPY[d.numpy] = _BY_NAME[d.name] = _BY_SHORT[d.short] = d
        _bfloat16 = d
        BFLOAT16[0] = d.numpy
    return _bfloat16


def _by_name(name):
    return bfloat16_dtype() if name == "bfloat16" else _BY_NAME[name]


def from_numpy_dtype(np_dtype):
    """Return the ember dtype for a NumPy dtype; EmberTypeError names unsupported ones."""
    try:
        return _FROM_NUMPY[np_dtype]
    except KeyError:
        d = _FROM_NUMPY.get(np.dtype(np_dtype))
        if d is None and np.dtype(np_dtype).name == "bfloat16":
            return bfloat16_dtype()
        if d is None:
            raise EmberTypeError(f"ember does not support NumPy dtype {np.dtype(np_dtype)} "
                                 f"(supported: {', '.join(d.name for d in ALL)})") from None
        return d


def to_numpy_dtype(d):
    """Accept an ember dtype, a NumPy dtype, a Python type or a name; return a NumPy dtype."""
    if d.__class__ is dtype:
        return d.numpy
    if d is None:
        return None
    if isinstance(d, str):
        if d in ("bfloat16", "bf16"):
            return bfloat16_dtype().numpy
        if d in _BY_NAME:
            return _BY_NAME[d].numpy
        if d in _BY_SHORT:
            return _BY_SHORT[d].numpy
    if d is _builtins.float:
        return _default.numpy
    if d is _builtins.int:
        return int64.numpy
    if d is _builtins.bool:
        return bool_.numpy
    if d is _builtins.complex:
        return default_complex().numpy
    if isinstance(d, (np.dtype, type, str)):
        try:
            np_d = np.dtype(d)
        except TypeError:
            np_d = None
        if np_d is not None:
            return from_numpy_dtype(np_d).numpy
    raise EmberTypeError(f"not a dtype: {_short_repr(d)} (expected an ember dtype such as "
                         "ember.float32)")


def _short_repr(value):
    r = repr(value) if not hasattr(value, "_data") else f"a Tensor of shape {list(value.shape)}"
    return r if len(r) <= 60 else r[:57] + "..."


_default = float32


def get_default_dtype():
    """Return the dtype used for floating-point tensors created from Python floats."""
    return _default


def default_complex():
    """The complex dtype matching the default float dtype (complex64, or complex128 when the
    default is float64), as torch gives Python complex numbers."""
    return complex128 if _default is float64 else complex64


def set_default_dtype(d):
    """Set the default floating dtype (float32 or float64); EmberTypeError otherwise."""
    global _default
    if d not in (float32, float64):
        raise EmberTypeError(f"set_default_dtype: only float32 or float64 allowed, got {d!r}")
    _default = d


class _Tag:
    """A named singleton of the ``ember`` namespace: shown and pickled as ``ember.<name>``."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"ember.{self.name}"

    def __reduce__(self):
        return self.name


class memory_format(_Tag):
    """A memory-format tag, as ``torch.memory_format``. ember's tensors are always C-contiguous,
    so every format is accepted and gives the same (contiguous) layout and values."""

    __slots__ = ()


class layout(_Tag):
    """A tensor layout tag, as ``torch.layout``: ``ember.strided`` (dense) and
    ``ember.sparse_coo`` (ember.sparse); the compressed sparse layouts are unsupported."""

    __slots__ = ()


contiguous_format = memory_format("contiguous_format")
preserve_format = memory_format("preserve_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
strided = layout("strided")
sparse_coo = layout("sparse_coo")
# torch's compressed sparse layouts: named so that code passing them gets ember's
# UnsupportedError (ember's sparse tensors are COO only), not an AttributeError
sparse_csr = layout("sparse_csr")
sparse_csc = layout("sparse_csc")
sparse_bsr = layout("sparse_bsr")
sparse_bsc = layout("sparse_bsc")
