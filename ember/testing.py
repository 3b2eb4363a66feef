"""``torch.testing`` for ember: ``assert_close`` and ``make_tensor``.

``assert_close(actual, expected)`` compares tensors, NumPy arrays, Python numbers and
(nested) sequences and mappings of them as torch's does: the same attributes first (shape,
dtype unless ``check_dtype=False``, strides when ``check_stride``), then the values elementwise,
``|actual - expected| <= atol + rtol * |expected|`` with tolerances by dtype when neither is
given (float16 1e-3 / 1e-5, bfloat16 1.6e-2 / 1e-5, float32 and complex64 1.3e-6 / 1e-5,
float64 and complex128 1e-7 / 1e-7, integers and bool exact). It raises ``AssertionError``
saying what differs: the mismatched count and the greatest absolute and relative differences
with their indices, as torch's message does.
"""
import collections.abc
import math

import numpy as np

from ember import _dtype
from ember.errors import EmberTypeError, EmberValueError
from ember.tensor import Tensor

__all__ = ["assert_close", "assert_allclose", "make_tensor"]

# (rtol, atol) by NumPy dtype when neither is given; 0, 0 for other dtypes (exact)
_TOLERANCES = {np.dtype(np.float16): (1e-3, 1e-5), np.dtype(np.float32): (1.3e-6, 1e-5),
               np.dtype(np.float64): (1e-7, 1e-7), np.dtype(np.complex64): (1.3e-6, 1e-5),
               np.dtype(np.complex128): (1e-7, 1e-7)}
_BFLOAT16 = (1.6e-2, 1e-5)


def _tolerances(t):
    if isinstance(t, Tensor) and t.dtype == _dtype.bfloat16_dtype():
        return _BFLOAT16
    return _TOLERANCES.get(_array(t).dtype, (0.0, 0.0))


def _array(x):
    if isinstance(x, Tensor):
        return x.detach().numpy() if x.dtype != _dtype.bfloat16_dtype() else \
            x.detach().float().numpy()
    return np.asarray(x)


def _fail(msg, where, extra):
    text = msg if msg is not None else extra
    if where:
        text = f"{text}\n\nThe failure occurred for item {where}"
    raise AssertionError(text)


def _as_scalar_array(x):
    """A number as a 0-d array: NumPy scalars keep their dtype, Python numbers take torch's
    (int64, float64, complex128)."""
    if isinstance(x, np.generic):
        return np.asarray(x)
    kind = np.int64 if isinstance(x, int) else np.float64 if isinstance(x, float) else \
        np.complex128
    return np.asarray(x, kind)


def _compare_tensors(actual, expected, rtol, atol, equal_nan, check_dtype, check_stride, msg,
                     where, scalars=False):
    a, e = _array(actual), _array(expected)
    if a.shape != e.shape:
        _fail(msg, where, f"The values for attribute 'shape' do not match: "
                          f"{_shape_of(actual, a)} != {_shape_of(expected, e)}.")
    if check_dtype and _dtype_of(actual, a) != _dtype_of(expected, e):
        _fail(msg, where, f"The values for attribute 'dtype' do not match: "
                          f"{_dtype_of(actual, a)} != {_dtype_of(expected, e)}.")
    if check_stride and isinstance(actual, Tensor) and isinstance(expected, Tensor) and \
            actual.stride() != expected.stride():
        _fail(msg, where, f"The values for attribute 'stride()' do not match: "
                          f"{actual.stride()} != {expected.stride()}.")
    if rtol is None:
        r1, a1 = _tolerances(actual)
        r2, a2 = _tolerances(expected)
        rtol, atol = max(r1, r2), max(a1, a2)
    if a.dtype != e.dtype:   # compared in their common dtype, as torch promotes them
        common = np.result_type(a, e)
        a, e = a.astype(common), e.astype(common)
    if a.dtype == np.bool_:
        a, e = a.astype(np.int64), e.astype(np.int64)
    if a.size == 0:
        return
    integral = a.dtype.kind in "iu"
    if integral:
        a, e = a.astype(np.float64), e.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(a - e)
        ok = (a == e) | (diff <= atol + rtol * np.abs(e))
        if equal_nan:
            ok |= np.isnan(a) & np.isnan(e)
    if ok.all():
        return
    bad = int((~ok).sum())
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(e != 0, diff / np.abs(e), np.where(diff == 0, 0.0, np.inf))
    ia = np.unravel_index(int(np.argmax(diff)), a.shape)
    ir = np.unravel_index(int(np.argmax(rel)), a.shape)
    exact = rtol == 0 and atol == 0
    allowed = ("", "") if exact else (f" (up to {atol} allowed)", f" (up to {rtol} allowed)")
    if scalars:
        _fail(msg, where, f"Scalars are not {'equal' if exact else 'close'}!\n\nExpected "
                          f"{expected} but got {actual}.\nAbsolute difference: "
                          f"{_num(diff[ia], integral)}{allowed[0]}\nRelative difference: "
                          f"{_num(rel[ir])}{allowed[1]}")
    _fail(msg, where,
          f"Tensor-likes are not {'equal' if exact else 'close'}!\n\nMismatched elements: "
          f"{bad} / {a.size} ({100.0 * bad / a.size:.1f}%)\n"
          f"Greatest absolute difference: {_num(diff[ia], integral)} at index "
          f"{tuple(map(int, ia))}{allowed[0]}\n"
          f"Greatest relative difference: {_num(rel[ir])} at index {tuple(map(int, ir))}"
          f"{allowed[1]}")


def _num(x, integral=False):
    x = float(x)
    if integral and math.isfinite(x):
        return str(int(x))
    return repr(x) if math.isfinite(x) else str(x)


def _dtype_of(t, a):
    return t.dtype if isinstance(t, Tensor) else a.dtype


def _shape_of(t, a):
    return t.shape if isinstance(t, Tensor) else a.shape


def assert_close(actual, expected, *, allow_subclasses=True, rtol=None, atol=None,
                 equal_nan=False, check_device=True, check_dtype=True, check_layout=True,
                 check_stride=False, msg=None):
    """Assert that ``actual`` and ``expected`` are close (see the module). ``rtol`` and
    ``atol`` are given both or neither; ``msg`` replaces the message. Raises AssertionError
    when they differ, EmberValueError for only one tolerance given."""
    if (rtol is None) != (atol is None):
        raise EmberValueError(f"assert_close: both 'rtol' and 'atol' must be either specified or "
                              f"omitted, but got no {'rtol' if rtol is None else 'atol'}.")
    _compare(actual, expected, rtol, atol, equal_nan, check_dtype, check_stride, msg, "",
             allow_subclasses)


def _is_number(x):
    return isinstance(x, (bool, int, float, complex, np.generic))


def _compare(actual, expected, rtol, atol, equal_nan, check_dtype, check_stride, msg, where,
             allow_subclasses):
    pair = (type(actual).__name__, type(expected).__name__)
    if isinstance(actual, Tensor) and isinstance(expected, Tensor) or \
            isinstance(actual, np.ndarray) and isinstance(expected, np.ndarray):
        if not allow_subclasses and type(actual) is not type(expected):
            _fail(msg, where, f"Except for Python scalars, input and expected must be of the "
                              f"same type, but got {pair[0]} and {pair[1]}.")
        _compare_tensors(actual, expected, rtol, atol, equal_nan, check_dtype, check_stride,
                         msg, where)
        return
    if _is_number(actual) and _is_number(expected):
        if isinstance(actual, (bool, np.bool_)) and isinstance(expected, (bool, np.bool_)):
            if bool(actual) != bool(expected):
                _fail(msg, where, f"Booleans mismatch: {actual} is not {expected}")
            return
        if check_dtype and type(actual) is not type(expected):
            _fail(msg, where, f"The (d)types do not match: {type(actual)} != {type(expected)}.")
        _compare_tensors(_as_scalar_array(actual), _as_scalar_array(expected), rtol, atol,
                         equal_nan, check_dtype, check_stride, msg, where, scalars=True)
        return
    if isinstance(actual, collections.abc.Mapping) and \
            isinstance(expected, collections.abc.Mapping):
        ka, ke = set(actual), set(expected)
        if ka != ke:
            _fail(msg, where, f"The keys of the mappings do not match:\n"
                              f"Missing keys in the actual mapping: {sorted(map(str, ke - ka))}\n"
                              f"Additional keys in the actual mapping: "
                              f"{sorted(map(str, ka - ke))}")
        for k in expected:
            _compare(actual[k], expected[k], rtol, atol, equal_nan, check_dtype, check_stride,
                     msg, f"{where}[{k!r}]", allow_subclasses)
        return
    if isinstance(actual, collections.abc.Sequence) and not isinstance(actual, str) and \
            isinstance(expected, collections.abc.Sequence) and not isinstance(expected, str):
        if len(actual) != len(expected):
            _fail(msg, where, f"The length of the sequences mismatch: {len(actual)} != "
                              f"{len(expected)}")
        for i, (x, y) in enumerate(zip(actual, expected)):
            _compare(x, y, rtol, atol, equal_nan, check_dtype, check_stride, msg,
                     f"{where}[{i}]", allow_subclasses)
        return
    if actual is None and expected is None:
        return
    raise EmberTypeError(f"No comparison pair was able to handle inputs of type "
                         f"{type(actual)} and {type(expected)}.")


# assert_allclose's own defaults (rtol, atol); other dtypes exact
_ALLCLOSE_TOLERANCES = {np.dtype(np.float16): (1e-3, 1e-3), np.dtype(np.float32): (1e-4, 1e-5),
                        np.dtype(np.float64): (1e-5, 1e-8)}


def assert_allclose(actual, expected, rtol=None, atol=None, equal_nan=True, msg=""):
    """torch's deprecated ``assert_allclose`` (a FutureWarning): ``assert_close`` without the
    dtype check, NaNs equal by default, its own default tolerances (float16 1e-3 / 1e-3,
    float32 1e-4 / 1e-5, float64 1e-5 / 1e-8), numbers and sequences made tensors."""
    import warnings
    warnings.warn("ember.testing.assert_allclose() is deprecated (as torch's since 1.12); use "
                  "ember.testing.assert_close()", FutureWarning, stacklevel=2)
    if not isinstance(actual, Tensor):
        actual = Tensor._make(np.asarray(actual))
    if not isinstance(expected, Tensor):
        expected = Tensor._make(np.asarray(expected, _array(actual).dtype))
    if rtol is None and atol is None:
        pairs = [_ALLCLOSE_TOLERANCES.get(_array(t).dtype, (0.0, 0.0)) for t in (actual, expected)]
        rtol, atol = max(p[0] for p in pairs), max(p[1] for p in pairs)
    assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan,
                 check_dtype=False, msg=msg or None)


def make_tensor(*shape, dtype, device=None, low=None, high=None, requires_grad=False,
                noncontiguous=False, exclude_zero=False, memory_format=None):
    """A tensor of ``shape`` and ``dtype`` filled with random values from ``[low, high)``
    (torch's defaults: -9 .. 9 for signed types and floats, 0 .. 10 for uint8, booleans for
    bool), drawn from ember's default generator; ``exclude_zero`` replaces zeros by the
    smallest positive step; ``noncontiguous`` gives a strided view of a larger tensor."""
    import ember
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    shape = tuple(int(s) for s in shape)
    npd = _dtype.to_numpy_dtype(dtype)
    if low is not None and high is not None and low > high:
        raise EmberValueError(f"make_tensor: low ({low}) must not be larger than high ({high})")
    n = int(np.prod(shape)) if shape else 1
    if npd == np.bool_:
        vals = ember.randint(0, 2, (n,)).numpy().astype(np.bool_)
    elif npd.kind in "iu":
        lo = (0 if npd.kind == "u" else -9) if low is None else math.ceil(low)
        hi = (10 if npd.kind == "u" else 10) if high is None else math.ceil(high)
        vals = ember.randint(lo, max(hi, lo + 1), (n,)).numpy().astype(npd)
    elif npd.kind in "fc":
        lo = -9.0 if low is None else float(low)
        hi = 9.0 if high is None else float(high)
        real = npd if npd.kind == "f" else np.dtype(npd.char.lower())
        draw = (ember.rand(n, dtype=ember.float64).numpy() * (hi - lo) + lo)
        vals = draw.astype(real) if npd.kind == "f" else \
            (draw + 1j * (ember.rand(n, dtype=ember.float64).numpy() * (hi - lo) + lo))
        vals = vals.astype(npd)
    else:
        raise EmberTypeError(f"make_tensor: the dtype {dtype} is not supported")
    if exclude_zero and npd != np.bool_:
        step = 1 if npd.kind in "iu" else np.finfo(np.dtype(npd.char.lower()) if
                                                    npd.kind == "c" else npd).tiny
        vals = np.where(vals == 0, np.asarray(step, vals.dtype), vals)
    vals = vals.reshape(shape)
    if noncontiguous and vals.size > 1:
        wide = np.repeat(vals[..., None], 2, axis=-1).reshape(shape[:-1] + (shape[-1] * 2,))
        t = ember.tensor(wide, dtype=dtype)[..., ::2]
    else:
        t = ember.tensor(vals, dtype=dtype)
    if requires_grad:
        t.requires_grad_(True)
    return t
