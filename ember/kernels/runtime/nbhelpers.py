"""Numba helpers imported by generated kernels (never by ``import ember``).

``sel`` is a branch-free select (keeps kernels small for Numba and vectorisable for LLVM).
``run_bounds`` is the item range of one run of a ``prange`` driver (the kernels' ``*_parallel``
functions cut their items into ``parts`` equal runs).
float16: Numba cannot compute in float16, so float16 arrays travel as uint16 bit patterns and
float16 values live in float32 registers, rounded to float16 precision (nearest even, as NumPy).
``exp_f32``, ``tanh_f32``, ``erf_f32`` and ``log1p_f32`` are straight-line float32 versions that
vectorise (Numba calls libm per element otherwise, 5 to 40 times slower than NumPy's SIMD loops).
They are compiled without ``fastmath``: ``kernels/elementwise.py`` has their NumPy twins (the same
IEEE steps in the same order, so the same bits), which a pointwise pass runs while its kernel
compiles.
"""
import numpy as np
from numba import njit, types
from numba.core.extending import intrinsic


@intrinsic
def sel(typingctx, cond, a, b):
    """``a if cond else b`` without a branch; ``a`` and ``b`` of one type, ``cond`` a bool."""
    if a != b or cond != types.boolean:
        return None

    def codegen(context, builder, signature, args):
        return builder.select(args[0], args[1], args[2])
    return a(cond, a, b), codegen


# LLVM's function attribute asking its vectorisers for 512-bit vectors (see ``wide_vectors``)
PREFER_512 = '"prefer-vector-width"="512"'


@intrinsic
def wide_vectors(typingctx):
    """Called first in a kernel: LLVM vectorises the calling function's loops over 512-bit
    registers where the CPU has them. Its tuning for AVX-512 Intel cores prefers 256-bit
    vectors, which halves the throughput of compute-bound loops: (524288,) float32 on one
    thread of the 2-core Xeon, ``exp_f32`` 326 -> 244 us, exact GELU's backward 930 -> 737, the
    same bits (no fastmath: the vector width changes no result). Without AVX-512 LLVM keeps the
    widest vectors the CPU has. (A string attribute: llvmlite's attribute set takes only LLVM's
    enum attributes by name, so it goes into the set itself; an llvmlite whose attributes are
    not a set keeps LLVM's default width.)"""
    def codegen(context, builder, signature, args):
        attributes = builder.function.attributes
        if isinstance(attributes, set):
            set.add(attributes, PREFER_512)
        return context.get_dummy_value()
    return types.void(), codegen


def _bitcast(src, dst, name):
    """An intrinsic reinterpreting a ``src`` value's bits as a ``dst`` value (the same width)."""
    def typer(typingctx, x):
        if x != src:
            return None

        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], context.get_value_type(dst))
        return dst(src), codegen
    typer.__name__ = typer.__qualname__ = name
    return intrinsic(typer)


_f32_bits = _bitcast(types.float32, types.uint32, "_f32_bits")
_bits_f32 = _bitcast(types.uint32, types.float32, "_bits_f32")
_f64_bits = _bitcast(types.float64, types.uint64, "_f64_bits")
_bits_f64 = _bitcast(types.uint64, types.float64, "_bits_f64")


@njit(error_model="numpy")
def h2f(h):
    """float16 bits (uint16) -> float32 value."""
    h = np.int64(h)
    sign = (h & 0x8000) << 16
    exp = (h >> 10) & 0x1F
    man = h & 0x3FF
    sub = np.float32(man) * np.float32(5.960464477539063e-08)
    sub = sel(sign != 0, -sub, sub)
    bits = sel(exp == 31, sign | 0x7F800000 | (man << 13), sign | ((exp + 112) << 23) | (man << 13))
    return sel(exp == 0, sub, _bits_f32(np.uint32(bits)))


@njit(error_model="numpy")
def f2h(f):
    """float32 value -> float16 bits (uint16), rounding to nearest even like NumPy."""
    x = np.int64(_f32_bits(np.float32(f)))
    sign = (x & 0x80000000) >> 16
    f_exp = x & 0x7F800000
    if f_exp >= 0x47800000:
        f_sig = x & 0x007FFFFF
        if f_exp == 0x7F800000 and f_sig != 0:
            nan = 0x7C00 + (f_sig >> 13)
            return np.uint16(sign + (nan if nan != 0x7C00 else 0x7C01))
        return np.uint16(sign + 0x7C00)
    if f_exp <= 0x38000000:
        if f_exp < 0x33000000:
            return np.uint16(sign)
        e = f_exp >> 23
        f_sig = (0x00800000 + (x & 0x007FFFFF)) >> (113 - e)
        if (f_sig & 0x3FFF) != 0x1000 or (x & 0x7FF) != 0:
            f_sig += 0x1000
        return np.uint16(sign + (f_sig >> 13))
    h_exp = (f_exp - 0x38000000) >> 13
    f_sig = x & 0x007FFFFF
    if (f_sig & 0x3FFF) != 0x1000:
        f_sig += 0x1000
    return np.uint16(sign + h_exp + (f_sig >> 13))


@njit(error_model="numpy")
def rf16(f):
    """Round a float32 value to float16 precision, keeping it in float32."""
    return h2f(f2h(f))


@njit(error_model="numpy", inline="always")
def expf_reduced(xc):
    """(p, n) with exp(xc) = p * 2^n for a float32 ``xc`` in range: n = round(xc / ln 2) and p
    the Cephes expf polynomial of the remainder (within 2 ulp); callers scale by 2^n."""
    n = np.floor(xc * np.float32(1.4426950408889634) + np.float32(0.5))
    r = xc - n * np.float32(0.693359375) - n * np.float32(-2.12194440e-4)
    p = np.float32(1.9875691500e-4)
    p = p * r + np.float32(1.3981999507e-3)
    p = p * r + np.float32(8.3334519073e-3)
    p = p * r + np.float32(4.1665795894e-2)
    p = p * r + np.float32(1.6666665459e-1)
    p = p * r + np.float32(5.0000001201e-1)
    return p * r * r + r + np.float32(1.0), n


@njit(error_model="numpy")
def exp_f32(x):
    """float32 exp in straight-line arithmetic (Cephes expf polynomial, within 2 ulp)."""
    xc = min(max(x, np.float32(-104.0)), np.float32(88.8))
    p, n = expf_reduced(xc)
    ni = np.int32(n)
    half = ni >> 1
    res = (p * _bits_f32(np.uint32((half + 127) << 23))) * _bits_f32(np.uint32((ni - half + 127) << 23))
    res = sel(x > np.float32(88.72283935546875), np.float32(np.inf), res)
    res = sel(x < np.float32(-103.97208), np.float32(0.0), res)
    return sel(x != x, x, res)


@njit(error_model="numpy")
def tanh_f32(x):
    """float32 tanh: Cephes tanhf polynomial below 0.625, 1 - 2 / (exp(2|x|) + 1) above."""
    ax = abs(x)
    z = x * x
    p = np.float32(-5.70498872745e-3)
    p = p * z + np.float32(2.06390887954e-2)
    p = p * z + np.float32(-5.37397155531e-2)
    p = p * z + np.float32(1.33314422036e-1)
    p = p * z + np.float32(-3.33332819422e-1)
    small = x * (np.float32(1.0) + z * p)
    big = np.float32(1.0) - np.float32(2.0) / (exp_f32(ax + ax) + np.float32(1.0))
    big = sel(x >= np.float32(0.0), big, -big)
    return sel(ax < np.float32(0.625), small, big)


ERF_CUT = 3.925   # erf_f32 is +-1 from here (erf(x) > 1 - 2^-25 above 3.9193: 1.0 in float32)


@njit(error_model="numpy")
def erf_f32(x):
    """float32 erf as x P(x^2) / Q(x^2) evaluated in float64, P of degree 6 and Q of degree 5
    fitted for ember (iteratively reweighted linearised least squares, minimax relative error
    1.8e-9 on |x| <= ERF_CUT); +-1 above. Within 0.54 ulp (98% of float32 inputs correctly
    rounded), odd, erf(+-inf) = +-1, NaN kept. No exp and one division: vectorises (0.28 ms on
    524288 elements, one thread, where the former series + erfcc on ``exp_f32`` took 1.65).
    No ``fastmath`` contraction (0.17 ms with fused multiply-adds): each step rounds as IEEE
    float64 does, so NumPy's same steps (``elementwise.erf_f32``) give its bits on any host."""
    xc = min(max(np.float64(x), -ERF_CUT), ERF_CUT)
    z = xc * xc
    p = -1.2829286573093122e-08
    p = p * z + 4.614718962032483e-06
    p = p * z + 0.0003769659448999624
    p = p * z + 0.0038394693529185545
    p = p * z + 0.05424943420079917
    p = p * z + 0.18514158004561782
    p = p * z + 1.1283791691625342
    q = 6.245069581182171e-05
    q = q * z + 0.001301973074301861
    q = q * z + 0.015432476644521286
    q = q * z + 0.1138804463186863
    q = q * z + 0.4974108600658329
    q = q * z + 1.0
    return sel(x != x, x, np.float32(xc * p / q))


@njit(error_model="numpy")
def floordiv_float(a, b):
    """torch's floor division of floats (c10 ``div_floor_floating``)."""
    if b == 0:
        return a / b
    mod = np.fmod(a, b)
    div = (a - mod) / b
    if mod != 0 and (b < 0) != (mod < 0):
        div -= 1
    if div == 0:
        return np.copysign(div - div, a / b)
    floordiv = np.floor(div)
    if div - floordiv > 0.5:
        floordiv += 1
    return floordiv


@njit(inline="always")
def run_bounds(n_items, parts, r):
    """[lo, hi) of run ``r`` when ``n_items`` are cut into ``parts`` runs of equal length (the
    last shorter, possibly empty: callers skip lo >= hi)."""
    per = (n_items + parts - 1) // parts
    lo = r * per
    return lo, min(n_items, lo + per)


LN2 = 0.6931471805599453
SQRT2 = 1.4142135623730951


@njit(error_model="numpy")
def log1p_f32(x):
    """float32 log1p in float64, rounded once: u = 1 + x (exact for a float32 x of at least
    2^-29), u = m 2^e with m in [sqrt(1/2), sqrt(2)), log(m) by the atanh series of s = (m - 1)
    / (m + 1) to s z^6 (|s| <= 0.172: truncation below 1e-12 relative); x itself below 2^-24
    (log1p rounds to it), -inf at -1, NaN below -1 and for NaN, inf at inf. Within 0.5 ulp but
    for float64's own rounding. No libm call, one division: vectorises (libm's scalar
    ``log1pf`` made softplus and BCE-with-logits 9-21x torch's time)."""
    u = 1.0 + np.float64(x)
    b = _f64_bits(u)
    e = np.int64(b >> np.uint64(52)) - 1023
    m = _bits_f64((b & np.uint64(0x000FFFFFFFFFFFFF)) | np.uint64(0x3FF0000000000000))
    big = m > SQRT2
    m = sel(big, m * 0.5, m)
    e = sel(big, e + 1, e)
    s = (m - 1.0) / (m + 1.0)
    z = s * s
    p = 0.15384615384615385
    p = p * z + 0.18181818181818182
    p = p * z + 0.2222222222222222
    p = p * z + 0.2857142857142857
    p = p * z + 0.4
    p = p * z + 0.6666666666666666
    r = np.float32(np.float64(e) * LN2 + (s + s + s * z * p))
    r = sel(abs(x) < np.float32(5.960464477539063e-08), x, r)
    r = sel(x == np.float32(-1.0), np.float32(-np.inf), r)
    r = sel(x < np.float32(-1.0), np.float32(np.nan), r)
    r = sel(x == np.float32(np.inf), x, r)
    return sel(x != x, x, r)
