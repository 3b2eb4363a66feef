"""Type promotion with torch's rules, for ndarrays and Python scalars."""
import numpy as np

from ember import _dtype
from ember.kernels.errors import KernelError

_CAT = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3, "V": 2}  # "V": ml_dtypes' bfloat16


def default_float():
    """The NumPy dtype of the default floating type (float32 unless changed)."""
    return _dtype._default.numpy


def _scalar_cat(x):
    if isinstance(x, (bool, np.bool_)):
        return 0
    if isinstance(x, (int, np.integer)):
        return 1
    if isinstance(x, (complex, np.complexfloating)):
        return 3
    return 2


_C64, _C128 = np.dtype(np.complex64), np.dtype(np.complex128)


def _to_complex(dt):
    """torch's toComplexType: the complex dtype whose parts are ``dt`` (float16 -> complex64,
    as ember has no complex32)."""
    return _C128 if dt.itemsize == 8 else _C64


def _combine(dtypes):
    top = max(_CAT[d.kind] for d in dtypes)
    same = [d for d in dtypes if _CAT[d.kind] >= top - (top == 3)]  # complex: floats count too
    return same[0] if len(same) == 1 else np.result_type(*same)


def _over(higher, lower):
    """torch's combine_categories: a lower-priority dtype changes the result only when its
    category is higher; a complex one over a float keeps the float's precision."""
    ch, cl = _CAT[higher.kind], _CAT[lower.kind]
    if cl <= ch:
        return higher
    return _to_complex(higher) if cl == 3 and ch == 2 else lower


def result_type(*xs):
    """torch.result_type over ndarrays and Python scalars (dimensioned > 0-d > scalar)."""
    dims = [x.dtype for x in xs if x.__class__ is np.ndarray and x.ndim > 0]
    zero = [x.dtype for x in xs if x.__class__ is np.ndarray and x.ndim == 0]
    scal = [_scalar_cat(x) for x in xs if x.__class__ is not np.ndarray and x is not None]
    return promote_categories(dims, zero, scal)


def promote_categories(dims, zero, scal=()):
    """torch's promotion of the dtypes of dimensioned operands ``dims``, of 0-d ones ``zero``
    and of Python scalars by category ``scal`` (0 bool, 1 int, 2 float, 3 complex); None for
    no operand."""
    best = None
    for group in (dims, zero):
        if not group:
            continue
        dt = group[0] if len(group) == 1 else _combine(group)
        best = dt if best is None else _over(best, dt)
    if scal:
        c = max(scal)
        sdt = (np.dtype(np.bool_), np.dtype(np.int64), default_float(),
               _to_complex(default_float()))[c]
        best = sdt if best is None else _over(best, sdt)
    return best


_nd = np.ndarray
_INT_LIMITS = {np.dtype(t): (int(np.iinfo(t).min), int(np.iinfo(t).max))
               for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                         np.uint64)}


def wrap_int(x, dt):
    """Python int ``x`` as an operand of integer dtype ``dt``, wrapped modulo 2**bits when out
    of range, as torch casts a scalar operand (int8 tensor + 300 adds 44, uint8 - 1 wraps)."""
    lo, hi = _INT_LIMITS[dt]
    return x if lo <= x <= hi else np.array(x).astype(dt)[()]


def storable_range(dt):
    """The (low, high) Python numbers torch's checked conversion stores into integer dtype
    ``dt``: [min, max], and [-max, max] for unsigned types (negatives wrap: -1 stores 255),
    uint64 from int64's minimum."""
    lo, hi = _INT_LIMITS[dt]
    if dt.kind == "u":
        lo = max(-hi, -2 ** 63)
    return lo, hi


def fill_value(x, dt, name="value"):
    """Python number ``x`` stored into a tensor of dtype ``dt`` (fill_, full, setitem,
    masked_fill, where, clamp's bounds, ...) with torch's checked conversion: an integer dtype
    takes [min, max] ([-max, max] for uint8, a negative wrapping: -1 stores 255); KernelError
    otherwise (NaN included). A complex number into a real or integer dtype is a KernelError
    too, whatever its imaginary part (torch does not drop it)."""
    if x.__class__ is complex and dt.kind != "c":
        raise KernelError(f"{name} {x!r} cannot be converted to type {dt} without overflow")
    if x.__class__ is not int and x.__class__ is not float or dt.kind not in "iu":
        return x
    lo, hi = storable_range(dt)
    if not lo <= x <= hi:
        raise KernelError(f"{name} {x!r} cannot be converted to type {dt} without overflow")
    return np.array(int(x)).astype(dt)[()]


def can_cast(src, dst):
    """torch.can_cast on NumPy dtypes: whether an op's result of dtype ``src`` may be written
    into a tensor of dtype ``dst`` (not complex to real, floating to integral, or anything but
    bool to bool; integral to a narrower integral is allowed and wraps)."""
    cs, cd = _CAT[src.kind], _CAT[dst.kind]
    return cs <= cd or (cs == 1 and cd == 1)


def promote(a, b):
    """Cast two operands (arrays or scalars) to their common torch result type."""
    ca, cb = a.__class__, b.__class__
    if ca is _nd:
        if cb is _nd:
            if a.dtype == b.dtype:
                return a, b
        elif cb is float or cb is int:
            if a.dtype.kind in "fc":
                return a, b  # NumPy treats Python scalars weakly, like torch
            if cb is int and a.dtype.kind in "iu":
                return a, wrap_int(b, a.dtype)
    elif cb is _nd and (ca is float or ca is int):
        if b.dtype.kind in "fc":
            return a, b
        if ca is int and b.dtype.kind in "iu":
            return wrap_int(a, b.dtype), b
    dt = result_type(a, b)
    if dt.kind in "iu":
        if a.__class__ is int:
            a = wrap_int(a, dt)
        if b.__class__ is int:
            b = wrap_int(b, dt)
    if a.__class__ is np.ndarray and a.dtype != dt:
        a = a.astype(dt)
    if b.__class__ is np.ndarray and b.dtype != dt:
        b = b.astype(dt)
    elif b.__class__ is not np.ndarray and b is not None and dt.kind in "fc" and isinstance(
            b, (int, float, complex)):
        b = dt.type(b)
    if a.__class__ is not np.ndarray and a is not None and dt.kind in "fc" and isinstance(
            a, (int, float, complex)):
        a = dt.type(a)
    return a, b


def float_operands(a, b):
    """Two operands of a floating-only binary op (atan2, xlogy, ...) as arrays of their compute
    type, and the result dtype: torch's result type, the default float when that is integral;
    float16 computes in float32."""
    out = result_type(a, b)
    if out.kind not in "fcV":   # "V": bfloat16
        out = default_float()
    work = np.dtype(np.float32) if out.kind == "V" or out == np.float16 else out
    return np.asarray(a, dtype=work), np.asarray(b, dtype=work), out


def to_float(a):
    """Integer and bool arrays become the default float dtype; floats pass through."""
    if a.__class__ is not np.ndarray:
        a = np.asarray(a)
    return a if a.dtype.kind in "fc" else a.astype(default_float())


# torch's two spellings of a dtype in its error messages: the ScalarType name ("Float", in
# "expected scalar type Float but found Double") and the C++ type ("float", in "expected m1 and
# m2 to have the same dtype, but got: float != double"), by NumPy dtype name
_SCALAR_NAMES = {"float32": ("Float", "float"), "float64": ("Double", "double"),
                 "float16": ("Half", "c10::Half"), "bfloat16": ("BFloat16", "c10::BFloat16"),
                 "int64": ("Long", "long int"), "int32": ("Int", "int"),
                 "int16": ("Short", "short int"), "int8": ("Char", "signed char"),
                 "uint8": ("Byte", "unsigned char"), "bool": ("Bool", "bool"),
                 "complex64": ("ComplexFloat", "c10::complex<float>"),
                 "complex128": ("ComplexDouble", "c10::complex<double>"),
                 "uint16": ("UInt16", "short unsigned int"), "uint32": ("UInt32", "unsigned int"),
                 "uint64": ("UInt64", "long unsigned int")}


def scalar_name(dtype):
    """torch's ScalarType name of NumPy dtype ``dtype`` ("Float", "Long", "BFloat16")."""
    return _SCALAR_NAMES.get(dtype.name, (dtype.name, dtype.name))[0]


def cpp_name(dtype):
    """torch's C++ type name of NumPy dtype ``dtype`` ("float", "long int", "c10::Half")."""
    return _SCALAR_NAMES.get(dtype.name, (dtype.name, dtype.name))[1]
