"""Torch's type promotion on NumPy dtypes.

Categories order bool < integer < floating. Within one category the larger type wins (uint8 with
int8 gives int16); across categories the higher category's dtype wins as it is (an int64 array with
a float16 array gives float16, not NumPy's float64). Operands come in three priorities, as in torch:
arrays with dimensions, 0-d arrays (and NumPy scalars), and Python scalars. A lower-priority operand
only changes the result when its category is higher, and a Python float then gives float32 (the
default dtype), a Python int int64.

Complex is a fourth category above floating, as in torch: float64 with complex64 gives
complex128, and a complex operand of lower priority over a floating one gives the complex dtype of
the floating one's precision. ``promote_types`` knows complex dtypes; the engine itself does not
compute on them (``check_dtype`` refuses them: complex arithmetic runs in ember's NumPy kernels,
never in compiled pointwise kernels).
"""
import numpy as np

SUPPORTED = tuple(np.dtype(n) for n in
                  ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"))
DEFAULT_FLOAT = np.dtype("float32")
DEFAULT_COMPLEX = np.dtype("complex64")

TENSOR, ZERO_DIM, SCALAR = 2, 1, 0


_CATEGORY = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}


def category(dtype):
    """0 for bool, 1 for integers, 2 for floating, 3 for complex dtypes."""
    return _CATEGORY[dtype.kind]


def check_dtype(dtype):
    """Return ``np.dtype(dtype)``; raises TypeError when ember's kernels do not support it."""
    dt = np.dtype(dtype)
    if dt not in SUPPORTED:
        raise TypeError(f"pointwise: unsupported dtype {dt}; supported: {', '.join(map(str, SUPPORTED))}")
    return dt


def promote_types(a, b):
    """Torch's ``promote_types`` for two supported dtypes (None acts as 'no operand')."""
    if a is None:
        return b
    if b is None:
        return a
    ca, cb = category(a), category(b)
    if ca != cb and ca + cb != 5:  # float with complex: NumPy's rule is torch's (f64, c64 -> c128)
        return a if ca > cb else b
    return np.promote_types(a, b)


def scalar_dtype(value):
    """The dtype a Python scalar (or Python scalar type) stands for: bool, int64 or float32."""
    kind = value if isinstance(value, type) else type(value)
    if issubclass(kind, (bool, np.bool_)):
        return np.dtype(bool)
    if issubclass(kind, (int, np.integer)):
        return np.dtype(np.int64)
    if issubclass(kind, (float, np.floating)):
        return DEFAULT_FLOAT
    if issubclass(kind, (complex, np.complexfloating)):
        return DEFAULT_COMPLEX
    raise TypeError(f"pointwise: expected a bool, int, float or complex scalar, got "
                    f"{kind.__name__}")


def _combine(higher, lower):
    if higher is None:
        return lower
    if lower is None or category(higher) == 3:
        return higher
    if category(lower) == 3:  # torch keeps a floating operand's precision (toComplexType)
        if category(higher) == 2:
            return np.dtype(np.complex128 if higher.itemsize == 8 else np.complex64)
        return lower
    if category(higher) == 2:
        return higher
    if higher.kind == "b" or category(lower) == 2:
        return promote_types(higher, lower)
    return higher


def promote_typed(typed):
    """Promote ``(dtype, priority)`` pairs, priority TENSOR, ZERO_DIM or SCALAR; None when empty."""
    best = {TENSOR: None, ZERO_DIM: None, SCALAR: None}
    for dtype, prio in typed:
        best[prio] = promote_types(best[prio], dtype)
    return _combine(best[TENSOR], _combine(best[ZERO_DIM], best[SCALAR]))


def typed_operand(x):
    """``(dtype, priority)`` of an operand: an ndarray, NumPy scalar, dtype-like, or Python scalar
    or Python scalar type. Raises TypeError for anything else or an unsupported dtype."""
    if isinstance(x, np.ndarray):
        return check_dtype(x.dtype), (TENSOR if x.ndim else ZERO_DIM)
    if isinstance(x, np.generic):
        return check_dtype(x.dtype), ZERO_DIM
    if isinstance(x, (bool, int, float)) or any(x is t for t in (bool, int, float)):
        return scalar_dtype(x), SCALAR
    return check_dtype(x), TENSOR


def result_dtype(*operands):
    """The dtype torch gives an arithmetic op on these operands (see the module docstring).

    Operands are ndarrays, NumPy scalars, dtype-likes (treated as arrays with dimensions), Python
    scalars or the types ``bool``, ``int``, ``float``. Raises TypeError for an unsupported dtype and
    ValueError when no operand is given.
    """
    if not operands:
        raise ValueError("result_dtype: expected at least one operand")
    return promote_typed(typed_operand(x) for x in operands)
