"""Kernels of the special functions (``ember.special``) and the pointwise math ops torch has around
them (lgamma, digamma, xlogy, hypot, copysign, frexp, ...). Integer and bool inputs are computed
in the default float dtype, float16 in float32 (rounded back), as torch does on the CPU.

Functions NumPy lacks come from ``scipy.special`` (in ember's ``fast`` extra), imported on first
use; without scipy they raise an error saying so."""
import math

import numpy as np

from ember._optional import message
from ember.kernels.dtypes import float_operands as _floats
from ember.kernels.dtypes import promote, result_type, to_float
from ember.kernels.elementwise import check_integer_divisor, integer_only
from ember.kernels.errors import KernelError
from ember.kernels.runtime.fpstate import quiet as _fp_quiet, restore as _fp_restore

_scipy = None


def _sp(fn):
    """``scipy.special.<fn>``, or a KernelError naming what to install."""
    global _scipy
    if _scipy is None:
        try:
            import scipy.special as sc
        except ImportError:
            raise KernelError(message("scipy", f"scipy.special.{fn}", "fast")) from None
        _scipy = sc
    return getattr(_scipy, fn)


def _math_lgamma(x):
    try:
        return math.lgamma(x)
    except ValueError:  # the poles
        return math.inf


def _math_or_scipy(mfn, sfn):
    """``scipy.special.<sfn>`` when scipy is installed, else ``math.<mfn>`` element by element."""
    try:
        return _sp(sfn)
    except KernelError:
        fn = _math_lgamma if mfn == "lgamma" else getattr(math, mfn)
        return np.vectorize(fn, otypes=[np.float64])


def _unary(compute):
    """A kernel computing ``compute(x)`` in x's float compute type, returned in x's float type."""
    def kernel(a):
        a = to_float(a)
        work = a.astype(np.float32) if a.dtype == np.float16 else a
        token = _fp_quiet()   # nan/inf results are the values, as in torch
        try:
            return np.asarray(compute(work)).astype(a.dtype, copy=False)
        finally:
            _fp_restore(token)
    return kernel


def _binary(compute):
    def kernel(a, b):
        a, b, out = _floats(a, b)
        token = _fp_quiet()
        try:
            return np.asarray(compute(a, b)).astype(out, copy=False)
        finally:
            _fp_restore(token)
    return kernel


def _require_float(*xs):
    """Refuse operands whose common dtype (torch's promotion) is not floating, as torch's
    floating-only kernels do: hypot(float16, int64) computes in float16, hypot(int32, int64)
    is refused."""
    dt = result_type(*xs)
    if dt.kind not in "fcV":   # "V": bfloat16, for the ops that run on it natively
        raise KernelError(f"not implemented for {dt} tensors (floating point only)")


def _scipy_unary(name):
    return _unary(lambda x: _sp(name)(x))


erfc = _unary(lambda x: _math_or_scipy("erfc", "erfc")(x))
erfinv = _scipy_unary("erfinv")
erfcx = _scipy_unary("erfcx")


def _lgamma(x):
    r = np.asarray(_math_or_scipy("lgamma", "gammaln")(x))
    return np.where(x == -np.inf, np.inf, r)  # torch: lgamma(-inf) = inf


lgamma = _unary(_lgamma)
i0 = _scipy_unary("i0")
i0e = _scipy_unary("i0e")
i1 = _scipy_unary("i1")
i1e = _scipy_unary("i1e")
ndtr = _scipy_unary("ndtr")
ndtri = _scipy_unary("ndtri")
log_ndtr = _scipy_unary("log_ndtr")
bessel_j0 = _scipy_unary("j0")
bessel_j1 = _scipy_unary("j1")
deg2rad = _unary(np.deg2rad)
rad2deg = _unary(np.rad2deg)


def _digamma(x):
    # torch: digamma(+-0) is -+inf, nan at the negative integers
    r = np.asarray(_sp("psi")(x))
    return np.where(x == 0, np.copysign(np.inf, -x),
                    np.where((x < 0) & (x == np.floor(x)), np.nan, r))


digamma = _unary(_digamma)


def _zeta(x, q):
    # torch (Cephes): zeta(x, +inf) is nan for x != 1
    return np.where((q == np.inf) & (x != 1), np.nan, np.asarray(_sp("zeta")(x, q)))


def _polygamma(n, x):
    if n == 0:
        return _digamma(x)
    # psi^(n)(x) = (-1)^(n+1) n! zeta(n+1, x)
    r = np.asarray((-1.0) ** (n + 1) * math.factorial(n) * _zeta(n + 1, x))
    if n == 1:  # torch's trigamma: 0 at +inf, nan at -inf
        r = np.where(x == np.inf, 0.0, np.where(x == -np.inf, np.nan, r))
    return r


def polygamma(a, n):
    if not isinstance(n, int) or n < 0:
        raise KernelError(f"n must be a non-negative integer, got {n!r}")
    return _unary(lambda x: _polygamma(n, x))(a)


sinc = _unary(np.sinc)


def _entr(x):
    r = -x * np.log(np.where(x > 0, x, 1))   # (errors ignored by _unary)
    return np.where(x > 0, r, np.where(x == 0, 0, np.where(np.isnan(x), x, -np.inf)))


entr = _unary(_entr)


def logit(a, eps=None):
    def compute(x):
        if eps is not None:
            x = np.clip(x, eps, 1 - eps)
        return np.log(x / (1 - x))   # (errors ignored by _unary)
    return _unary(compute)(a)


def _row_math(name):
    """The math of pointwise-engine row ``name`` (``pointwise/ops.py``, its one definition) on
    promoted float operands; the engine is imported on the first call."""
    row = []

    def compute(x, y):
        if not row:
            from ember.kernels.pointwise.ops import OPS, NumpyMath
            row.extend((OPS[name].math, NumpyMath.of))
        return row[0](row[1](x.dtype if x.dtype is y.dtype else np.result_type(x, y)), (), x, y)
    compute.__name__ = name
    return compute


xlogy = _binary(_row_math("xlogy"))
xlog1py = _binary(_row_math("special_xlog1py"))
zeta = _binary(_zeta)
copysign = _binary(np.copysign)


def _float_binary(fn):
    inner = _binary(fn)

    def kernel(a, b):
        _require_float(a, b)
        return inner(a, b)
    return kernel


hypot = _float_binary(np.hypot)
logaddexp = _float_binary(np.logaddexp)
logaddexp2 = _float_binary(np.logaddexp2)


def nextafter(a, b):
    _require_float(a, b)
    a, b = promote(a, b)
    return np.asarray(np.nextafter(a, b))


def fmod(a, b):
    a, b = promote(a, b)
    if np.asarray(a).dtype.kind in "iub":
        check_integer_divisor("fmod", a, b)
        return np.asarray(np.fmod(a, b))
    token = _fp_quiet()   # x fmod 0.0 is nan, as torch
    try:
        return np.asarray(np.fmod(a, b))
    finally:
        _fp_restore(token)


def heaviside(a, values):
    if not isinstance(values, np.ndarray) or a.dtype != values.dtype:
        got = values.dtype if isinstance(values, np.ndarray) else type(values).__name__
        raise KernelError(f"input and values must have the same dtype (got {a.dtype} and {got}); "
                          "heaviside is not implemented for tensors with different dtypes")
    return np.asarray(np.where(a == 0, values, (a > 0).astype(a.dtype)))


def signbit(a):
    if a.dtype.kind == "b":
        return np.zeros(a.shape, dtype=bool)
    return np.asarray(np.signbit(a))


def frexp(a):
    _require_float(a)
    m, e = np.frexp(a)
    return np.asarray(m), np.asarray(e).astype(np.int32)


def positive(a):
    if a.dtype == np.bool_:
        raise KernelError("the `+` operator on a bool tensor is not supported")
    return a.view()


bessel_y0 = _scipy_unary("y0")
bessel_y1 = _scipy_unary("y1")
modified_bessel_i0 = _scipy_unary("i0")
modified_bessel_i1 = _scipy_unary("i1")
modified_bessel_k0 = _scipy_unary("k0")
modified_bessel_k1 = _scipy_unary("k1")
scaled_modified_bessel_k0 = _scipy_unary("k0e")
scaled_modified_bessel_k1 = _scipy_unary("k1e")
airy_ai = _unary(lambda x: _sp("airy")(x)[0])


def _spherical_j0(x):
    r = np.sin(x) / np.where(x == 0, 1, x)
    return np.where(x == 0, 1.0, np.where(np.isinf(x), 0.0, r))


spherical_bessel_j0 = _unary(_spherical_j0)


def _igamma(upper):
    """torch's rules before the series (Cephes igam/igamc): nan for a < 0 or x < 0; a == 0 is
    the limit for x > 0; x == 0, a = inf and x = inf decide even where the other is nan."""
    def compute(a, x):
        r = np.asarray(_sp("gammaincc" if upper else "gammainc")(a, x))
        lo, hi = (1.0, 0.0) if upper else (0.0, 1.0)
        r = np.where(np.isinf(x), hi, r)
        r = np.where(np.isinf(a), np.where(np.isinf(x), np.nan, lo), r)
        r = np.where(x == 0, lo, r)
        r = np.where(a == 0, np.where(x > 0, hi, np.nan), r)
        return np.where((x < 0) | (a < 0), np.nan, r)
    return compute


gammainc = _float_binary(_igamma(False))   # torch refuses an integral common dtype
gammaincc = _float_binary(_igamma(True))


# ---------------------------------------------------------------- orthogonal polynomials
# p(x, n) for integer degree n (n is truncated to an integer, as torch does; 0 for n < 0), by the
# three-term recurrence run to the largest degree present, each element keeping its own degree.

def _recurrence(x, n, p0, p1, step):
    """Values of a polynomial family: ``p0(x)``, ``p1(x)``, then ``p_{k+1} = step(k, x, p_k,
    p_{k-1})``, each element stopped at its own degree ``n``."""
    x, n = np.broadcast_arrays(x, n)
    deg = np.where(np.isnan(n), -1, n).astype(np.int64)
    prev, cur = p0(x), p1(x)
    out = np.where(deg == 0, prev, cur)
    top = int(deg.max()) if deg.size else 0
    for k in range(1, top):
        prev, cur = cur, step(k, x, cur, prev)
        out = np.where(deg == k + 1, cur, out)
    return np.where(deg < 0, 0.0, out), deg


def _ones(x):
    return np.ones_like(x)


def _cheb_t(x, n):
    out, deg = _recurrence(x, n, _ones, lambda x: x, lambda k, x, p, q: 2 * x * p - q)
    ax = np.abs(x)
    trig = np.cos(deg * np.arccos(np.clip(x, -1, 1)))   # (errors ignored by _binary)
    out = np.where((deg > 6) & (ax < 1), trig, out)
    edge = np.where((x > 0) | (deg % 2 == 0), 1.0, -1.0)
    return np.where((ax == 1) & (deg >= 0), edge, out)


def _cheb_u(x, n):
    out, deg = _recurrence(x, n, _ones, lambda x: 2 * x, lambda k, x, p, q: 2 * x * p - q)
    ax = np.abs(x)
    t = np.arccos(np.clip(x, -1, 1))
    s = np.sin(t)
    trig = np.sin((deg + 1) * t) / np.where(s != 0, s, 1)
    out = np.where((deg > 8) & (ax < 1) & (s != 0), trig, out)
    edge = np.where((x > 0) | (deg % 2 == 0), deg + 1.0, -(deg + 1.0))
    return np.where((ax == 1) & (deg >= 0), edge, out)


def _cheb_v(x, n):
    out, deg = _recurrence(x, n, _ones, lambda x: 2 * x - 1, lambda k, x, p, q: 2 * x * p - q)
    edge = np.where(x > 0, 1.0, np.where(deg % 2 == 0, 2.0 * deg + 1, -(2.0 * deg + 1)))
    return np.where((np.abs(x) == 1) & (deg >= 0), edge, out)


def _cheb_w(x, n):
    out, deg = _recurrence(x, n, _ones, lambda x: 2 * x + 1, lambda k, x, p, q: 2 * x * p - q)
    edge = np.where(x > 0, 2.0 * deg + 1, np.where(deg % 2 == 0, 1.0, -1.0))
    return np.where((np.abs(x) == 1) & (deg >= 0), edge, out)


def _hermite_h(x, n):
    return _recurrence(x, n, _ones, lambda x: 2 * x, lambda k, x, p, q: 2 * x * p - 2 * k * q)[0]


def _hermite_he(x, n):
    return _recurrence(x, n, _ones, lambda x: x, lambda k, x, p, q: x * p - k * q)[0]


def _laguerre_l(x, n):
    out, deg = _recurrence(x, n, _ones, lambda x: 1 - x,
                           lambda k, x, p, q: ((2 * k + 1 - x) * p - k * q) / (k + 1))
    return np.where((x == 0) & (deg >= 0), 1.0, out)


def _legendre_p(x, n):
    out, deg = _recurrence(x, n, _ones, lambda x: x,
                           lambda k, x, p, q: ((2 * k + 1) * x * p - k * q) / (k + 1))
    edge = np.where((x > 0) | (deg % 2 == 0), 1.0, -1.0)
    return np.where((np.abs(x) == 1) & (deg >= 0), edge, out)


def _shifted(fn):
    return lambda x, n: fn(2 * x - 1, n)


chebyshev_polynomial_t = _binary(_cheb_t)
chebyshev_polynomial_u = _binary(_cheb_u)
chebyshev_polynomial_v = _binary(_cheb_v)
chebyshev_polynomial_w = _binary(_cheb_w)
shifted_chebyshev_polynomial_t = _binary(_shifted(_cheb_t))
shifted_chebyshev_polynomial_u = _binary(_shifted(_cheb_u))
shifted_chebyshev_polynomial_v = _binary(_shifted(_cheb_v))
shifted_chebyshev_polynomial_w = _binary(_shifted(_cheb_w))
hermite_polynomial_h = _binary(_hermite_h)
hermite_polynomial_he = _binary(_hermite_he)
laguerre_polynomial_l = _binary(_laguerre_l)
legendre_polynomial_p = _binary(_legendre_p)

# ---------------------------------------------------------------- more pointwise math
acosh = _unary(np.arccosh)
asinh = _unary(np.arcsinh)
atanh = _unary(np.arctanh)


def _fminmax(fn):
    def kernel(a, b):
        a, b = promote(a, b)
        return np.asarray(fn(a, b))
    return kernel


fmax = _fminmax(np.fmax)
fmin = _fminmax(np.fmin)


def _integer_binary(fn, cpu_name):
    def kernel(a, b):
        a, b = promote(a, b)
        dt = np.asarray(a).dtype
        if dt.kind not in "iu":
            integer_only(cpu_name, dt)
            raise KernelError(f"not implemented for {dt} tensors (integer tensors only)")
        return np.asarray(fn(a, b), dtype=dt)
    return kernel


gcd = _integer_binary(np.gcd, "gcd_cpu")
lcm = _integer_binary(np.lcm, "lcm_cpu")


def isposinf(a):
    return np.asarray(np.isposinf(a)) if a.dtype.kind == "f" else np.zeros(a.shape, dtype=bool)


def isneginf(a):
    return np.asarray(np.isneginf(a)) if a.dtype.kind == "f" else np.zeros(a.shape, dtype=bool)


def _shift(left):
    def kernel(a, b):
        dt = result_type(a, b)
        integer_only("lshift_cpu" if left else "rshift_cpu", dt, "iu")
        a, b = np.asarray(a, dtype=dt), np.asarray(b, dtype=dt)
        if a.dtype.kind not in "iu":
            raise KernelError(f"not implemented for {a.dtype} tensors (integer tensors only)")
        bits = a.dtype.itemsize * 8
        out_of_range = (b < 0) | (b >= bits)
        safe = np.where(out_of_range, 0, b).astype(a.dtype)
        if left:
            r = np.left_shift(a, safe)
            return np.asarray(np.where(out_of_range, 0, r), dtype=a.dtype)
        r = np.right_shift(a, safe)
        # torch: shifting right by the width or more (or by a negative amount) leaves the sign
        return np.asarray(np.where(out_of_range, np.where(a < 0, -1, 0), r), dtype=a.dtype)
    return kernel


bitwise_left_shift = _shift(True)
bitwise_right_shift = _shift(False)
