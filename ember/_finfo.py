"""``ember.finfo`` / ``ember.iinfo``: the numerical properties of ember's dtypes, as torch's."""
import math

from ember import _dtype
from ember.errors import EmberTypeError

__all__ = ["finfo", "iinfo"]

# name -> (bits, mantissa bits, exponent bits) of the IEEE-style binary formats
_FLOAT_FORMATS = {"float16": (16, 10, 5), "bfloat16": (16, 7, 8), "float32": (32, 23, 8),
                  "float64": (64, 52, 11)}


def _check_dtype(who, value):
    if not isinstance(value, _dtype.dtype):
        raise EmberTypeError(f"{who}(): argument 'type' (position 1) must be ember.dtype, not "
                             f"{type(value).__name__}")


class finfo:
    """Machine limits of a floating point dtype (``ember.finfo(ember.float16).eps``), as
    ``torch.finfo``: ``bits``, ``eps``, ``max``, ``min``, ``tiny`` (= ``smallest_normal``),
    ``resolution`` and ``dtype`` (the dtype's name; a complex dtype describes its real parts).
    With no argument, the default dtype. Raises EmberTypeError for a dtype that is not floating
    point or complex, or an argument that is not a dtype."""

    __slots__ = ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype")

    def __init__(self, type=None):
        if type is None:
            type = _dtype.get_default_dtype()
        _check_dtype("finfo", type)
        real = type.to_real()
        if real.name not in _FLOAT_FORMATS:
            raise EmberTypeError(f"ember.finfo() requires a floating point input type, got "
                                 f"{type!r}; use ember.iinfo for integer types")
        bits, mant, expo = _FLOAT_FORMATS[real.name]
        bias = 2 ** (expo - 1) - 1
        set_ = object.__setattr__
        set_(self, "bits", bits)
        set_(self, "eps", 2.0 ** -mant)
        set_(self, "max", (2.0 - 2.0 ** -mant) * 2.0 ** bias)
        set_(self, "min", -self.max)
        set_(self, "tiny", 2.0 ** (1 - bias))
        set_(self, "smallest_normal", self.tiny)
        set_(self, "resolution", 10.0 ** -math.floor(-math.log10(self.eps)))
        set_(self, "dtype", real.name)

    def __setattr__(self, name, value):
        raise AttributeError(f"ember.finfo attribute {name!r} is read-only")

    def __eq__(self, other):
        return isinstance(other, finfo) and self.dtype == other.dtype

    def __hash__(self):
        return hash(("finfo", self.dtype))

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.smallest_normal:g}, "
                f"tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """Limits of an integer dtype (``ember.iinfo(ember.int8).max``), as ``torch.iinfo``:
    ``bits``, ``max``, ``min`` and ``dtype`` (the dtype's name). Raises EmberTypeError for bool,
    floating point and complex dtypes, or an argument that is not a dtype."""

    __slots__ = ("bits", "max", "min", "dtype")

    def __init__(self, type):
        _check_dtype("iinfo", type)
        if type is _dtype.bool_:
            raise EmberTypeError("ember.bool is not supported by ember.iinfo")
        if type.is_floating_point or type.is_complex or type.name not in _dtype._BY_NAME:
            raise EmberTypeError(f"ember.iinfo() requires an integer input type, got {type!r}; "
                                 "use ember.finfo for floating point types")
        bits = 8 * type.itemsize
        set_ = object.__setattr__
        set_(self, "bits", bits)
        set_(self, "min", -2 ** (bits - 1) if type.is_signed else 0)
        set_(self, "max", 2 ** (bits - 1) - 1 if type.is_signed else 2 ** bits - 1)
        set_(self, "dtype", type.name)

    def __setattr__(self, name, value):
        raise AttributeError(f"ember.iinfo attribute {name!r} is read-only")

    def __eq__(self, other):
        return isinstance(other, iinfo) and self.dtype == other.dtype

    def __hash__(self):
        return hash(("iinfo", self.dtype))

    def __repr__(self):
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"
