"""torch.fft's discrete Fourier transforms, with torch's names, arguments
(``n``/``s`` pad with zeros or trim, ``dim``, ``norm`` = "backward" | "ortho" | "forward"),
dtypes (integer inputs become the default float dtype; real inputs give complex64/complex128)
and gradients. Every transform is one of the three spec ops ``fft_c2c``, ``fft_r2c``,
``fft_c2r`` (ember/ops/spec/spectral.yaml), around which the padding, trimming and conjugation are ember ops,
so the transforms are differentiable, traced and exported as any other op."""
import builtins

import numpy as np

from ember import _dtype
from ember.autograd._generated import functions as _G
from ember.errors import EmberIndexError, EmberRuntimeError, EmberTypeError, EmberValueError
from ember.errors import public as _public

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2",
           "hfft2", "ihfft2", "fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn",
           "fftshift", "ifftshift", "fftfreq", "rfftfreq"]


def _norm(norm, forward):
    """torch's normalization enum (0 none, 1 1/sqrt(n), 2 1/n) of a transform direction."""
    if norm is None or norm == "backward":
        return 0 if forward else 2
    if norm == "forward":
        return 2 if forward else 0
    if norm == "ortho":
        return 1
    raise EmberValueError(f'Invalid normalization mode: "{norm}"')


def _check_tensor(x):
    if not hasattr(x, "_data"):
        raise EmberTypeError(f"argument 'input' must be a Tensor, not {type(x).__name__}")


def _floating(x, require_complex=False):
    """Promote ``x`` as torch's promote_tensor_fft: integers and bool to the default float
    dtype, float16 refused, and to complex when ``require_complex``."""
    _check_tensor(x)
    kind = x._data.dtype.kind
    if kind in "biu":
        x = _G.to(x, _dtype.get_default_dtype().numpy)
    elif x._data.dtype.itemsize == 2:
        raise EmberRuntimeError(f"Unsupported dtype {x._data.dtype} (ember's FFTs take float32, "
                                "float64, complex64 and complex128)")
    if require_complex and x._data.dtype.kind != "c":
        x = _G.to(x, _dtype.complex128.numpy if x._data.dtype.itemsize == 8 else
                  _dtype.complex64.numpy)
    return x


def _real_only(x, what):
    if x._data.dtype.kind == "c":
        raise EmberRuntimeError(f"{what} expects a real input tensor, but got {x._data.dtype}")


def _int(v, what):
    if isinstance(v, np.integer):
        return builtins.int(v)
    if isinstance(v, builtins.bool) or not isinstance(v, builtins.int):
        raise EmberTypeError(f"{what} must be an int, got {type(v).__name__} {v!r}")
    return v


def _wrap(d, nd):
    d = _int(d, "dim")
    if not -nd <= d < nd:
        raise EmberIndexError(f"Dimension out of range (expected to be in range of [{-nd}, "
                              f"{nd - 1}], but got {d})")
    return d % nd


def _resize(x, dims, sizes):
    """``x`` with each of ``dims`` zero-padded or trimmed (at the end) to its size."""
    nd = x._data.ndim
    pad = [0] * (2 * nd)
    for d, n in zip(dims, sizes):
        have = x._data.shape[d]
        if n < have:
            x = _G.narrow(x, d, 0, n)
        elif n > have:
            pad[2 * (nd - 1 - d) + 1] = n - have
    if builtins.any(pad):
        last = builtins.max(i for i, p in enumerate(pad) if p) + 1
        x = _G.pad(x, tuple(pad[:last + (last % 2)]), "constant", None)
    return x


def _one_dim(x, n, dim):
    nd = x._data.ndim
    if nd == 0:
        raise EmberIndexError("Dimension specified as -1 but tensor has no dimensions")
    d = _wrap(dim, nd)
    if n is not None:
        n = _int(n, "n")
        if n < 1:
            raise EmberRuntimeError(f"Invalid number of data points ({n}) specified")
    return d, n


def _shape_and_dims(x, s, dim, default_all):
    """torch's canonicalize_fft_shape_and_dim_args: (dims, sizes or None)."""
    nd = x._data.ndim
    if dim is not None:
        dim = (dim,) if isinstance(dim, builtins.int) else tuple(dim)
        dims = [_wrap(d, nd) for d in dim]
        if len(set(dims)) != len(dims):
            raise EmberRuntimeError(f"FFT dims must be unique, got {list(dim)}")
    if s is not None:
        s = tuple(_int(v, "s") for v in ((s,) if isinstance(s, builtins.int) else s))
        if dim is not None and len(s) != len(dims):
            raise EmberRuntimeError(f"When given, dim and shape arguments must have the same "
                                    f"length (got s={list(s)}, dim={list(dim)})")
        if len(s) > nd:
            raise EmberRuntimeError(f"Got shape with {len(s)} values but input tensor only has "
                                    f"{nd} dimensions.")
        if dim is None:
            dims = list(range(nd - len(s), nd))
        sizes = [x._data.shape[d] if n == -1 else n for d, n in zip(dims, s)]
        for n in sizes:
            if n < 1:
                raise EmberRuntimeError(f"Invalid number of data points ({n}) specified")
        return dims, sizes
    if dim is None:
        dims = list(range(nd)) if default_all else [_wrap(d, nd) for d in (-2, -1)]
    return dims, None


# ---------------------------------------------------------------- one dimension
def fft(input, n=None, dim=-1, norm=None):
    """The 1-d discrete Fourier transform of ``input`` along ``dim`` (torch.fft.fft)."""
    return _RAW['fftn'](input, None if n is None else (n,), (dim,), norm)


def ifft(input, n=None, dim=-1, norm=None):
    """The 1-d inverse discrete Fourier transform (torch.fft.ifft)."""
    return _RAW['ifftn'](input, None if n is None else (n,), (dim,), norm)


def rfft(input, n=None, dim=-1, norm=None):
    """The 1-d DFT of a real ``input``: the ``n // 2 + 1`` non-negative frequencies."""
    return _RAW['rfftn'](input, None if n is None else (n,), (dim,), norm)


def irfft(input, n=None, dim=-1, norm=None):
    """The inverse of ``rfft``: a real signal of length ``n`` (default ``2 * (m - 1)``)."""
    return _RAW['irfftn'](input, None if n is None else (n,), (dim,), norm)


def hfft(input, n=None, dim=-1, norm=None):
    """The 1-d DFT of a Hermitian-symmetric signal given by its first half: real output of
    length ``n`` (default ``2 * (m - 1)``)."""
    return _RAW['hfftn'](input, None if n is None else (n,), (dim,), norm)


def ihfft(input, n=None, dim=-1, norm=None):
    """The inverse of ``hfft``: the ``n // 2 + 1`` first bins of the inverse DFT of a real
    signal."""
    return _RAW['ihfftn'](input, None if n is None else (n,), (dim,), norm)


# ---------------------------------------------------------------- n dimensions
def fftn(input, s=None, dim=None, norm=None):
    """The n-d DFT over ``dim`` (all dims by default, or the last ``len(s)``)."""
    x = _floating(input)
    dims, sizes = _shape_and_dims(x, s, dim, True)
    if sizes is not None:
        x = _resize(x, dims, sizes)
    if x._data.dtype.kind == "c":
        return _G.fft_c2c(x, dims, _norm(norm, True), True)
    return _G.fft_r2c(x, dims, _norm(norm, True), False)


def ifftn(input, s=None, dim=None, norm=None):
    """The n-d inverse DFT over ``dim``."""
    x = _floating(input)
    dims, sizes = _shape_and_dims(x, s, dim, True)
    if sizes is not None:
        x = _resize(x, dims, sizes)
    if x._data.dtype.kind == "c":
        return _G.fft_c2c(x, dims, _norm(norm, False), False)
    return _G.conj(_G.fft_r2c(x, dims, _norm(norm, False), False))


def rfftn(input, s=None, dim=None, norm=None):
    """The n-d DFT of a real ``input``, one-sided in the last of ``dim``."""
    x = _floating(input)
    _real_only(x, "rfftn")
    dims, sizes = _shape_and_dims(x, s, dim, True)
    if not dims:
        raise EmberRuntimeError("rfftn must transform at least one axis")
    if sizes is not None:
        x = _resize(x, dims, sizes)
    return _G.fft_r2c(x, dims, _norm(norm, True), True)


def _c2r_args(x, s, dim, default_all, what):
    dims, sizes = _shape_and_dims(x, s, dim, default_all)
    if not dims:
        raise EmberRuntimeError(f"{what} must transform at least one axis")
    last = dims[-1]
    if sizes is None:
        sizes = [x._data.shape[d] for d in dims]
        sizes[-1] = 2 * (x._data.shape[last] - 1)
    n = sizes[-1]
    if n < 1:
        raise EmberRuntimeError(f"Invalid number of data points ({n}) specified")
    return dims, sizes[:-1] + [n // 2 + 1], n


def irfftn(input, s=None, dim=None, norm=None):
    """The inverse of ``rfftn``: a real output, whose last transformed dim has ``s[-1]``
    (default ``2 * (m - 1)``) points."""
    x = _floating(input, require_complex=True)
    dims, sizes, n = _c2r_args(x, s, dim, True, "irfftn")
    x = _resize(x, dims, sizes)
    return _G.fft_c2r(x, dims, _norm(norm, False), n)


def hfftn(input, s=None, dim=None, norm=None):
    """The n-d DFT of a Hermitian-symmetric signal given by its one-sided last dim."""
    x = _floating(input, require_complex=True)
    dims, sizes, n = _c2r_args(x, s, dim, True, "hfftn")
    x = _resize(x, dims, sizes)
    nm = _norm(norm, True)
    if len(dims) > 1:
        x = _G.fft_c2c(x, dims[:-1], nm, True)
    return _G.fft_c2r(_G.conj(x), dims[-1:], nm, n)


def ihfftn(input, s=None, dim=None, norm=None):
    """The inverse of ``hfftn``: one-sided in the last of ``dim``, of a real ``input``."""
    x = _floating(input)
    _real_only(x, "ihfftn")
    dims, sizes = _shape_and_dims(x, s, dim, True)
    if not dims:
        raise EmberRuntimeError("ihfftn must transform at least one axis")
    if sizes is not None:
        x = _resize(x, dims, sizes)
    nm = _norm(norm, False)
    y = _G.conj(_G.fft_r2c(x, dims[-1:], nm, True))
    if len(dims) > 1:
        y = _G.fft_c2c(y, dims[:-1], nm, False)
    return y


# ---------------------------------------------------------------- two dimensions
def fft2(input, s=None, dim=(-2, -1), norm=None):
    """The 2-d DFT (``fftn`` over the last two dims by default)."""
    return _RAW['fftn'](input, s, dim, norm)


def ifft2(input, s=None, dim=(-2, -1), norm=None):
    """The 2-d inverse DFT."""
    return _RAW['ifftn'](input, s, dim, norm)


def rfft2(input, s=None, dim=(-2, -1), norm=None):
    """The 2-d DFT of a real input, one-sided in the last dim."""
    return _RAW['rfftn'](input, s, dim, norm)


def irfft2(input, s=None, dim=(-2, -1), norm=None):
    """The inverse of ``rfft2``."""
    return _RAW['irfftn'](input, s, dim, norm)


def hfft2(input, s=None, dim=(-2, -1), norm=None):
    """The 2-d DFT of a Hermitian-symmetric signal."""
    return _RAW['hfftn'](input, s, dim, norm)


def ihfft2(input, s=None, dim=(-2, -1), norm=None):
    """The inverse of ``hfft2``."""
    return _RAW['ihfftn'](input, s, dim, norm)


# ---------------------------------------------------------------- helpers
def _shift(input, dim, inverse):
    _check_tensor(input)
    nd = input._data.ndim
    if dim is None:
        dims = list(range(nd))
    else:
        dims = [_wrap(d, nd) for d in ((dim,) if isinstance(dim, builtins.int) else dim)]
    if not dims:
        return _G.clone(input)
    shape = input._data.shape
    shifts = [(shape[d] + 1) // 2 if inverse else shape[d] // 2 for d in dims]
    return _G.roll(input, shifts, dims)


def fftshift(input, dim=None):
    """Move the zero frequency to the centre of ``dim`` (all dims by default)."""
    return _shift(input, dim, False)


def ifftshift(input, dim=None):
    """The inverse of ``fftshift``."""
    return _shift(input, dim, True)


def _freq_dtype(dtype):
    d = _dtype.get_default_dtype() if dtype is None else dtype
    npd = _dtype.to_numpy_dtype(d)
    if npd.kind != "f":
        raise EmberTypeError(f"fftfreq: dtype must be a floating point dtype, got {d!r}")
    return npd


def fftfreq(n, d=1.0, *, dtype=None, layout=None, device=None, requires_grad=False):
    """The sample frequencies of an ``n``-point DFT with sample spacing ``d``:
    ``[0, 1, ..., (n - 1) // 2, -(n // 2), ..., -1] / (d * n)``."""
    n = _int(n, "n")
    if n < 1:
        raise EmberRuntimeError(f"fftfreq: n must be positive, got {n}")
    npd = _freq_dtype(dtype)
    k = _G.arange(0, n, 1, npd)
    k = _G.where(_G.ge(k, (n + 1) // 2), _G.sub(k, float(n)), k)
    out = _G.mul(k, 1.0 / (n * float(d)))
    return out.requires_grad_(True) if requires_grad else out


def rfftfreq(n, d=1.0, *, dtype=None, layout=None, device=None, requires_grad=False):
    """The non-negative sample frequencies of an ``n``-point ``rfft``:
    ``[0, 1, ..., n // 2] / (d * n)``."""
    n = _int(n, "n")
    if n < 1:
        raise EmberRuntimeError(f"rfftfreq: n must be positive, got {n}")
    npd = _freq_dtype(dtype)
    out = _G.mul(_G.arange(0, n // 2 + 1, 1, npd), 1.0 / (n * float(d)))
    return out.requires_grad_(True) if requires_grad else out


_RAW = {_name: globals()[_name] for _name in __all__}  # called by the others: named once
for _name in __all__:
    globals()[_name] = _public(globals()[_name], f"fft.{_name}")
del _name
