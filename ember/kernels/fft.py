"""Discrete Fourier transforms over several dims, as torch's three ATen kernels:
``fft_c2c`` (complex to complex, either direction), ``fft_r2c`` (real to complex, one-sided or
full) and ``fft_c2r`` (one-sided complex to real, inverse direction).

``normalization`` is torch's enum: 0 no scaling, 1 by ``1/sqrt(n)``, 2 by ``1/n`` (n the product
of the transformed sizes). scipy.fft computes them when it is installed (it keeps single
precision); numpy.fft otherwise, cast back to complex64/float32 for single-precision input.
"""
import numpy as np

from ember.kernels.errors import KernelError

# torch's normalization enum -> numpy/scipy ``norm`` argument, for a forward and an inverse call
_FWD = ("backward", "ortho", "forward")
_INV = ("forward", "ortho", "backward")
_C = {np.dtype(np.float32): np.dtype(np.complex64), np.dtype(np.float64): np.dtype(np.complex128),
      np.dtype(np.complex64): np.dtype(np.complex64),
      np.dtype(np.complex128): np.dtype(np.complex128)}
_R = {np.dtype(np.complex64): np.dtype(np.float32), np.dtype(np.complex128): np.dtype(np.float64)}
_impl = None


def _lib():
    global _impl
    if _impl is None:
        try:
            import scipy.fft as lib
        except ImportError:
            lib = np.fft
        _impl = lib
    return _impl


def _dims(a, dim, what):
    dims = tuple(int(d) for d in dim)
    nd = a.ndim
    for d in dims:
        if not -nd <= d < max(nd, 1) or nd == 0:
            raise KernelError(f"{what}: dimension {d} out of range for a {nd}-d tensor")
    dims = tuple(d % nd for d in dims)
    if len(set(dims)) != len(dims):
        raise KernelError(f"{what}: dims must be unique, got {list(dim)}")
    for d in dims:
        if a.shape[d] == 0:
            raise KernelError(f"{what}: invalid number of data points (0) specified")
    return dims


def _norm(normalization, table):
    if normalization not in (0, 1, 2):
        raise KernelError(f"normalization must be 0, 1 or 2, got {normalization!r}")
    return table[normalization]


def fft_c2c(a, dim, normalization, forward):
    """The n-d DFT of a complex array over ``dim`` (``forward``: exp(-2 pi i ...), else the
    inverse direction), scaled by ``normalization``."""
    if a.dtype.kind != "c":
        raise KernelError(f"fft_c2c expects a complex input, got {a.dtype}")
    dims = _dims(a, dim, "fft_c2c")
    if not dims:
        return a.copy()
    lib = _lib()
    fn = lib.fftn if forward else lib.ifftn
    out = fn(a, axes=dims, norm=_norm(normalization, _FWD if forward else _INV))
    return out.astype(a.dtype, copy=False)


def fft_r2c(a, dim, normalization, onesided):
    """The forward n-d DFT of a real array over ``dim``; ``onesided`` keeps the non-negative
    frequencies of the last transformed dim only (``n // 2 + 1`` of them)."""
    if a.dtype.kind != "f" or a.dtype == np.float16:
        raise KernelError(f"fft_r2c expects a float32 or float64 input, got {a.dtype}")
    dims = _dims(a, dim, "fft_r2c")
    lib = _lib()
    norm = _norm(normalization, _FWD)
    if not dims:
        return a.astype(_C[a.dtype])
    out = lib.rfftn(a, axes=dims, norm=norm) if onesided else lib.fftn(a, axes=dims, norm=norm)
    return out.astype(_C[a.dtype], copy=False)


def fft_c2r(a, dim, normalization, last_dim_size):
    """The inverse n-d DFT over ``dim`` of a one-sided complex array (Hermitian symmetry in the
    last dim of ``dim``), giving a real array whose last transformed dim has ``last_dim_size``."""
    if a.dtype.kind != "c":
        raise KernelError(f"fft_c2r expects a complex input, got {a.dtype}")
    dims = _dims(a, dim, "fft_c2r")
    if not dims:
        raise KernelError("fft_c2r: at least one dimension must be transformed")
    if last_dim_size < 1:
        raise KernelError(f"Invalid number of data points ({last_dim_size}) specified")
    s = [a.shape[d] for d in dims[:-1]] + [int(last_dim_size)]
    out = _lib().irfftn(a, s=s, axes=dims, norm=_norm(normalization, _INV))
    return out.astype(_R[a.dtype], copy=False)


def resize_dim(a, dim, n):
    """``a`` zero-padded or trimmed at the end of ``dim`` to size ``n`` (the ``n``/``s``
    arguments of torch.fft)."""
    size = a.shape[dim]
    if n == size:
        return a
    if n < size:
        idx = [slice(None)] * a.ndim
        idx[dim] = slice(0, n)
        return a[tuple(idx)].copy()
    pad = [(0, 0)] * a.ndim
    pad[dim] = (0, n - size)
    return np.pad(a, pad)
