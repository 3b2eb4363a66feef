"""Parameter initialisation, in place and without autograd, with torch's names, arguments and
distributions (``ember.nn.init.kaiming_uniform_`` etc.)."""
import math
import warnings

import numpy as np

from ember.autograd.grad_mode import no_grad
from ember.random import resolve
from ember.errors import EmberValueError, needs_public as _needs_public, public as _public


def _write(tensor, arr):
    with no_grad():
        np.copyto(tensor._data, arr, casting="unsafe")
        tensor._bump()
    return tensor


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for ``nonlinearity`` (torch's table). ValueError when unknown."""
    linear_fns = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                  "conv_transpose3d"]
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            negative_slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            negative_slope = param
        else:
            raise EmberValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + negative_slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise EmberValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    dim = tensor.dim()
    if dim < 2:
        raise EmberValueError("Fan in and fan out can not be computed for tensor with fewer than 2 "
                              "dimensions")
    shape = tensor.shape
    receptive = 1
    for s in shape[2:]:
        receptive *= s
    return shape[1] * receptive, shape[0] * receptive


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise EmberValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fill with U(a, b)."""
    g = resolve(generator)
    return _write(tensor, g.random(tuple(tensor.shape)) * (b - a) + a)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fill with N(mean, std^2)."""
    g = resolve(generator)
    return _write(tensor, g.standard_normal(tuple(tensor.shape)) * std + mean)


def _erfinv(y):
    """Inverse error function of a float64 array: the ``erfinv`` kernel (SciPy's) where SciPy is
    installed, else ``_erfinv_newton``."""
    from ember.kernels.errors import KernelError
    from ember.kernels.special import erfinv
    try:
        return erfinv(y)
    except KernelError:     # no SciPy
        return _erfinv_newton(y)


# Giles' single-precision approximation of erfinv(y) / y ("Approximating the erfinv function",
# GPU Computing Gems, 2011) as polynomials in w - 2.5 (w < 5) and sqrt(w) - 3 (w >= 5), with
# w = -log((1 - y)(1 + y)), highest power first
_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
            -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
         -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


def _erfinv_newton(y):
    """Inverse error function by Giles' approximation refined by two Newton steps on
    ``math.erf`` (element by element: ~0.3 s a million values, SciPy's 25 ms)."""
    y = np.clip(y, -1 + 1e-15, 1 - 1e-15)
    w = -np.log((1.0 - y) * (1.0 + y))
    x = np.where(w < 5.0, _poly(w - 2.5, _CENTRAL),
                 _poly(np.sqrt(np.maximum(w, 5.0)) - 3.0, _TAIL)) * y
    from math import pi
    for _ in range(2):
        err = _erf(x) - y
        x = x - err / (2.0 / np.sqrt(pi) * np.exp(-x * x))
    return x


def _poly(w, coeffs):
    p = np.zeros_like(w)
    for c in coeffs:
        p = p * w + c
    return p


_erf = np.vectorize(math.erf, otypes=[np.float64])
_BLOCK = 1 << 16   # elements per block of ``_erfinv_f32`` (its temporaries stay in cache)


def _horner_f32(w, coeffs):
    """The polynomial ``coeffs`` (highest power first) at float32 ``w``, in place on a new
    array."""
    p = w * np.float32(coeffs[0])
    for c in coeffs[1:-1]:
        p += np.float32(c)
        p *= w
    p += np.float32(coeffs[-1])
    return p


def _erfinv_f32(y):
    """Inverse error function of a float32 array in float32 arithmetic: Giles' approximation
    alone, in blocks (relative error within 3e-7 of SciPy's float64 ``erfinv`` for |y| <= 1 -
    2**-23: a few float32 ulps). The inverse CDF of ``trunc_normal_`` on float32 tensors, as
    torch's runs in the tensor's dtype: 3072x768 in ~10 ms against SciPy's float64 ~50."""
    out = np.empty_like(y)
    flat, res = y.reshape(-1), out.reshape(-1)
    one, c25, c3, c5 = (np.float32(v) for v in (1.0, 2.5, 3.0, 5.0))
    for lo in range(0, flat.size, _BLOCK):
        v = flat[lo:lo + _BLOCK]
        w = np.log((one - v) * (one + v))
        np.negative(w, out=w)
        x = _horner_f32(w - c25, _CENTRAL)
        far = np.flatnonzero(w >= c5)     # |y| > 0.9966: the tail's polynomial
        if far.size:
            x[far] = _horner_f32(np.sqrt(w[far]) - c3, _TAIL)
        np.multiply(x, v, out=res[lo:lo + _BLOCK])
    return out


def _trunc_normal(tensor, mean, std, a, b, generator):
    g = resolve(generator)

    def norm_cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The "
                      "distribution of values may be incorrect.", stacklevel=3)
    lo, hi = norm_cdf((a - mean) / std), norm_cdf((b - mean) / std)
    u = g.random(tuple(tensor.shape)) * (2 * hi - 2 * lo) + (2 * lo - 1)
    if tensor._data.dtype.kind == "f" and tensor._data.dtype.itemsize == 8:
        x = _erfinv(u) * (std * math.sqrt(2.0)) + mean
        return _write(tensor, np.clip(x, a, b))
    # float32 and narrower: in float32, as torch computes in the tensor's dtype
    x = _erfinv_f32(u.astype(np.float32))
    x *= np.float32(std * math.sqrt(2.0))
    x += np.float32(mean)
    return _write(tensor, np.clip(x, np.float32(a), np.float32(b), out=x))


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Fill with N(mean, std^2) truncated to [a, b] (inverse-CDF sampling, as torch)."""
    return _trunc_normal(tensor, mean, std, a, b, generator)


def constant_(tensor, val):
    """Fill with ``val``."""
    return _write(tensor, np.full(tuple(tensor.shape), val))


def ones_(tensor):
    return constant_(tensor, 1.0)


def zeros_(tensor):
    return constant_(tensor, 0.0)


def eye_(tensor):
    """Fill a 2-d tensor with the identity."""
    if tensor.dim() != 2:
        raise EmberValueError("Only tensors with 2 dimensions are supported")
    return _write(tensor, np.eye(*tensor.shape))


def dirac_(tensor, groups=1):
    """Fill a {3,4,5}-d conv weight with the Dirac delta (identity convolution)."""
    d = tensor.dim()
    if d not in (3, 4, 5):
        raise EmberValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    shape = tuple(tensor.shape)
    out_per = shape[0] // groups
    m = min(out_per, shape[1])
    arr = np.zeros(shape)
    for g in range(groups):
        for i in range(m):
            idx = (g * out_per + i, i) + tuple(s // 2 for s in shape[2:])
            arr[idx] = 1
    return _write(tensor, arr)


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    a = gain * math.sqrt(6.0 / float(fan_in + fan_out))
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def _kaiming_std(tensor, a, mode, nonlinearity):
    """He et al.'s ``gain / sqrt(fan)``; None for a zero-element tensor, after torch's warning
    (attributed to the kaiming_* caller's caller)."""
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return None
    fan = _calculate_correct_fan(tensor, mode)
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """U(-b, b) with b = gain * sqrt(3 / fan)."""
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    if std is None:
        return tensor
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """N(0, std^2) with std = gain / sqrt(fan)."""
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    if std is None:
        return tensor
    return normal_(tensor, 0.0, std, generator)


def orthogonal_(tensor, gain=1, generator=None):
    """A (semi-)orthogonal matrix from the QR of a Gaussian one, times ``gain``."""
    if tensor.dim() < 2:
        raise EmberValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = resolve(generator).standard_normal((rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _write(tensor, (q * gain).reshape(tuple(tensor.shape)))


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """A 2-d tensor with a fraction ``sparsity`` of each column zeroed, the rest N(0, std^2)."""
    if tensor.dim() != 2:
        raise EmberValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    g = resolve(generator)
    arr = g.standard_normal((rows, cols)) * std
    nz = int(math.ceil(sparsity * rows))
    for c in range(cols):
        arr[g.permutation(rows)[:nz], c] = 0
    return _write(tensor, arr)


# torch's deprecated, non-underscore aliases
uniform = uniform_
normal = normal_
constant = constant_
xavier_uniform = xavier_uniform_
xavier_normal = xavier_normal_
kaiming_uniform = kaiming_uniform_
kaiming_normal = kaiming_normal_
orthogonal = orthogonal_

# every public function raises ember's errors naming it (ember.errors.public)
for _n, _f in list(globals().items()):
    if not _n.startswith("_") and _needs_public(_f) and _f.__module__ == __name__:
        globals()[_n] = _public(_f, _n)
del _n, _f
