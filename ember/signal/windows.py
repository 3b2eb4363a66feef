"""``ember.signal.windows``: torch.signal.windows' window functions, with torch's signatures.

Each window is computed from ember ops (``linspace``, ``cos``, ``exp``, ``i0``), so it is traced
like any factory; ``sym=False`` gives the periodic window used in spectral analysis."""
import math

import ember
from ember.errors import EmberTypeError, EmberValueError, public

__all__ = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine",
           "general_hamming", "hamming", "hann", "kaiser", "nuttall"]


def _checks(name, M, dtype, layout):
    if dtype is None:
        dtype = ember.get_default_dtype()
    if layout is not None and layout is not ember.strided:
        raise EmberValueError(f"signal.windows.{name} is implemented for strided tensors only, "
                              f"got layout {layout}")
    if dtype not in (ember.float32, ember.float64):
        raise EmberValueError(f"signal.windows.{name} expects float32 or float64 dtypes, "
                              f"got {dtype}")
    if not isinstance(M, int) or isinstance(M, bool):
        raise EmberTypeError(f"signal.windows.{name}: M must be an int, got {type(M).__name__}")
    if M < 0:
        raise EmberValueError(f"signal.windows.{name} requires non-negative window length, "
                              f"got M={M}")
    return dtype


def _finish(t, requires_grad):
    return t.requires_grad_(True) if requires_grad else t


def _line(first, step, M, dtype):
    return ember.linspace(first, first + (M - 1) * step, M, dtype=dtype)


def exponential(M, *, center=None, tau=1.0, sym=True, dtype=None, layout=None, device=None,
                requires_grad=False):
    """The exponential (Poisson) window ``exp(-|n - center| / tau)``."""
    dtype = _checks("exponential", M, dtype, layout)
    if tau <= 0:
        raise EmberValueError(f"signal.windows.exponential: tau must be positive, got {tau}")
    if sym and center is not None:
        raise EmberValueError("signal.windows.exponential: center must be None for symmetric "
                              "windows")
    if M == 0:
        return _finish(ember.empty(0, dtype=dtype), requires_grad)
    if center is None:
        center = (M if not sym and M > 1 else M - 1) / 2.0
    k = _line(-center / tau, 1 / tau, M, dtype)
    return _finish(ember.exp(-ember.abs(k)), requires_grad)


def cosine(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The cosine (sine) window ``sin(pi (n + 0.5) / M)``."""
    dtype = _checks("cosine", M, dtype, layout)
    if M == 0:
        return _finish(ember.empty(0, dtype=dtype), requires_grad)
    c = math.pi / (M + 1 if not sym and M > 1 else M)
    return _finish(ember.sin(_line(0.5 * c, c, M, dtype)), requires_grad)


def gaussian(M, *, std=1.0, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The Gaussian window ``exp(-((n - (M - 1) / 2) / std)^2 / 2)``."""
    dtype = _checks("gaussian", M, dtype, layout)
    if std <= 0:
        raise EmberValueError(f"signal.windows.gaussian: std must be positive, got {std}")
    if M == 0:
        return _finish(ember.empty(0, dtype=dtype), requires_grad)
    start = -(M if not sym and M > 1 else M - 1) / 2.0
    c = 1 / (std * math.sqrt(2))
    k = _line(start * c, c, M, dtype)
    return _finish(ember.exp(-(k * k)), requires_grad)


def kaiser(M, *, beta=12.0, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The Kaiser window ``I0(beta sqrt(1 - (2n / N - 1)^2)) / I0(beta)``."""
    dtype = _checks("kaiser", M, dtype, layout)
    if beta < 0:
        raise EmberValueError(f"signal.windows.kaiser: beta must be non-negative, got {beta}")
    if M == 0:
        return _finish(ember.empty(0, dtype=dtype), requires_grad)
    if M == 1:
        return _finish(ember.ones(1, dtype=dtype), requires_grad)
    b = ember.tensor(float(beta), dtype=dtype)
    c = 2.0 * float(beta) / (M if not sym else M - 1)
    end = ember.minimum(b, -b + (M - 1) * c)
    k = ember.linspace(-float(beta), float(end), M, dtype=dtype)
    return _finish(ember.i0(ember.sqrt(b * b - k * k)) / ember.i0(b), requires_grad)


def general_cosine(M, *, a, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The generalised cosine window ``sum_i (-1)^i a_i cos(2 pi i n / N)``."""
    dtype = _checks("general_cosine", M, dtype, layout)
    if M == 0:
        return _finish(ember.empty(0, dtype=dtype), requires_grad)
    if M == 1:
        return _finish(ember.ones(1, dtype=dtype), requires_grad)
    if not isinstance(a, (list, tuple)):
        raise EmberTypeError("signal.windows.general_cosine: coefficients a must be a list or "
                             "tuple")
    if not a:
        raise EmberValueError("signal.windows.general_cosine: coefficients cannot be empty")
    c = 2 * math.pi / (M if not sym else M - 1)
    k = _line(0.0, c, M, dtype)
    coef = ember.tensor([(-1) ** i * w for i, w in enumerate(a)], dtype=dtype).unsqueeze(-1)
    i = ember.arange(len(a), dtype=dtype).unsqueeze(-1)
    return _finish((coef * ember.cos(i * k)).sum(0), requires_grad)


def general_hamming(M, *, alpha=0.54, sym=True, dtype=None, layout=None, device=None,
                    requires_grad=False):
    """The generalised Hamming window ``alpha - (1 - alpha) cos(2 pi n / N)``."""
    return general_cosine(M, a=[alpha, 1.0 - alpha], sym=sym, dtype=dtype, layout=layout,
                          requires_grad=requires_grad)


def hamming(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The Hamming window (general_hamming with alpha=0.54)."""
    return general_hamming(M, alpha=0.54, sym=sym, dtype=dtype, layout=layout,
                           requires_grad=requires_grad)


def hann(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The Hann window (general_hamming with alpha=0.5)."""
    return general_hamming(M, alpha=0.5, sym=sym, dtype=dtype, layout=layout,
                           requires_grad=requires_grad)


def blackman(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The Blackman window (general_cosine with a=[0.42, 0.5, 0.08])."""
    return general_cosine(M, a=[0.42, 0.5, 0.08], sym=sym, dtype=dtype, layout=layout,
                          requires_grad=requires_grad)


def nuttall(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The minimum 4-term Blackman-Harris window of Nuttall."""
    return general_cosine(M, a=[0.3635819, 0.4891775, 0.1365995, 0.0106411], sym=sym,
                          dtype=dtype, layout=layout, requires_grad=requires_grad)


def bartlett(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The Bartlett (triangular) window ``1 - |2n / N - 1|``."""
    dtype = _checks("bartlett", M, dtype, layout)
    if M == 0:
        return _finish(ember.empty(0, dtype=dtype), requires_grad)
    if M == 1:
        return _finish(ember.ones(1, dtype=dtype), requires_grad)
    k = _line(-1.0, 2 / (M if not sym else M - 1), M, dtype)
    return _finish(1 - ember.abs(k), requires_grad)


for _n in __all__:
    globals()[_n] = public(globals()[_n], f"signal.windows.{_n}", prefix="unnamed")
del _n
