"""Kernels of the complex-number ops: parts, conjugate, argument, and the reinterpretations
between a complex array and a real one with a trailing dimension of 2 (torch's
``view_as_real``/``view_as_complex``). Real inputs follow torch: ``conj``/``real`` are the
identity (a view), ``imag`` is an error."""
import numpy as np

from ember.kernels.errors import KernelError

_PART = {np.dtype(np.complex64): np.dtype(np.float32),
         np.dtype(np.complex128): np.dtype(np.float64)}
_WHOLE = {v: k for k, v in _PART.items()}


def conj(a):
    """The complex conjugate (a copy; torch's is a lazy view); a real array itself (a view)."""
    return np.conjugate(a) if a.dtype.kind == "c" else a.view()


def conj_physical(a):
    """The complex conjugate, always a new array."""
    return np.conjugate(a) if a.dtype.kind == "c" else a.copy()


def resolve(a):
    """``resolve_conj``/``resolve_neg``: ember keeps no lazy conjugate or negation bit, so both
    are the identity (a view)."""
    return a.view()


def real(a):
    """The real part: a view of a complex array's real parts; a real array itself (a view)."""
    return a.real if a.dtype.kind == "c" else a.view()


def imag(a):
    """The imaginary part (a view); torch refuses real inputs."""
    if a.dtype.kind != "c":
        raise KernelError(f"imag is not implemented for tensors with non-complex dtypes "
                          f"(got {a.dtype})")
    return a.imag


def angle(a):
    """The argument in (-pi, pi]: float32 for complex64, float64 for complex128. Real inputs:
    pi for negatives, 0 otherwise, NaN kept; integers and bool give the default float dtype."""
    if a.dtype.kind == "c":
        return np.angle(a)
    out_dtype = a.dtype if a.dtype.kind == "f" else np.dtype(np.float32)
    out = np.where(a < 0, np.pi, 0.0).astype(out_dtype)
    if a.dtype.kind == "f":
        out = np.where(np.isnan(a), a, out)
    return out


def view_as_real(a):
    """A real view of shape ``(*a.shape, 2)`` holding the real and imaginary parts."""
    part = _PART.get(a.dtype)
    if part is None:
        raise KernelError(f"view_as_real is only supported for complex tensors, got {a.dtype}")
    re = a.real
    return np.lib.stride_tricks.as_strided(re, a.shape + (2,), a.strides + (part.itemsize,),
                                           writeable=a.flags.writeable)


def view_as_complex(a):
    """A complex view of a float32/float64 array whose last dimension is 2 with stride 1."""
    whole = _WHOLE.get(a.dtype)
    if whole is None:
        raise KernelError(f"view_as_complex is only supported for float and double tensors, but "
                          f"got a tensor of scalar type: {a.dtype}")
    if a.ndim == 0 or a.shape[-1] != 2:
        raise KernelError(f"Tensor must have a last dimension of size 2, got shape "
                          f"{list(a.shape)}")
    if a.strides[-1] != a.itemsize:
        raise KernelError("Tensor must have a last dimension with stride 1")
    for i, st in enumerate(a.strides[:-1]):
        if st % whole.itemsize:
            raise KernelError(f"Tensor must have a stride divisible by 2 for all but last "
                              f"dimension (dimension {i} has stride {st // a.itemsize})")
    if a.size == 0:
        return np.zeros(a.shape[:-1], whole)
    return a.view(whole)[..., 0]


def complex(real, imag):
    """``real + 1j * imag`` for two float arrays of the same dtype (broadcasting)."""
    if real.dtype != imag.dtype or real.dtype not in _WHOLE:
        raise KernelError(f"Expected both inputs to be Half, Float or Double tensors but got "
                          f"{real.dtype} and {imag.dtype}")
    out = np.empty(np.broadcast_shapes(real.shape, imag.shape), _WHOLE[real.dtype])
    out.real = real
    out.imag = imag
    return out


def polar(abs, angle):
    """``abs * (cos(angle) + 1j * sin(angle))`` for two float arrays of the same dtype."""
    if abs.dtype != angle.dtype or abs.dtype not in _WHOLE:
        raise KernelError(f"Expected both inputs to be Float or Double tensors but got "
                          f"{abs.dtype} and {angle.dtype}")
    out = np.empty(np.broadcast_shapes(abs.shape, angle.shape), _WHOLE[abs.dtype])
    out.real = abs * np.cos(angle)
    out.imag = abs * np.sin(angle)
    return out


def sgn(a):
    """``a / |a|`` (0 where ``a`` is 0) for complex arrays; the sign for real ones."""
    if a.dtype.kind != "c":
        return np.sign(a)
    m = np.abs(a)
    with np.errstate(all="ignore"):
        return np.where(m == 0, 0, a / np.where(m == 0, 1, m)).astype(a.dtype, copy=False)
