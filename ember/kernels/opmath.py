"""Reduced-precision floats (float16, bfloat16) computed as torch's CPU kernels compute them:
the operands read as float32 (torch's "opmath" type), every intermediate and accumulation in
float32, the result rounded once to the operands' dtype. NumPy would otherwise keep float16
intermediates: a sum of squares overflows at 65504, a running sum stops growing at 2048, and
each step of a multi-step formula (gelu, layer_norm) rounds again.

Multi-step kernels take ``@in_float32``; single NumPy ufuncs need nothing (NumPy computes a
float16 ufunc in float32 and rounds once). bfloat16 reaches kernels already as float32 through
the dispatcher (``ember/autograd/bfloat16.py``), but a kernel called directly (a first-order
backward) may see it, so both are handled here."""
import functools
import inspect

import numpy as np

_nd = np.ndarray
F32 = np.dtype(np.float32)


def is_reduced(dt):
    """float16 or bfloat16 (ml_dtypes' bfloat16 is a 2-byte "V" dtype)."""
    return dt.itemsize == 2 and (dt.kind == "f" or dt.kind == "V")


def in_float32(kernel):
    """Run ``kernel`` on float32 copies of its float16/bfloat16 array arguments and round its
    float32 results back to that dtype; other calls pass through untouched (one dtype look-up
    per array argument). No rounding back when another floating array argument with dimensions
    is float32/float64 (torch's promotion gives that dtype) or when the kernel's ``dtype=``
    argument is given (the kernel then casts and computes in that dtype)."""
    params = list(inspect.signature(kernel).parameters)
    dtype_at = params.index("dtype") if "dtype" in params else None

    @functools.wraps(kernel)
    def run(*args, **kwargs):
        low = None
        for a in args:
            if a.__class__ is _nd:
                dt = a.dtype
                if dt.itemsize == 2 and (dt.kind == "f" or dt.kind == "V"):
                    low = dt
                    break
        if low is None:
            return kernel(*args, **kwargs)
        if dtype_at is not None and (kwargs.get("dtype") is not None or (
                len(args) > dtype_at and args[dtype_at] is not None)):
            return kernel(*args, **kwargs)
        back = True
        up = []
        for a in args:
            if a.__class__ is _nd:
                dt = a.dtype
                if dt == low:
                    a = a.astype(F32)
                elif dt.kind in "fc" and a.ndim:
                    back = False
            up.append(a)
        out = kernel(*up, **kwargs)
        return round_to(out, low) if back else out
    return run


def round_to(out, dt):
    """float32 arrays of a kernel's result (an array, a NumPy scalar or a tuple/list of them)
    rounded to ``dt``; everything else unchanged."""
    if out.__class__ is _nd:
        return out.astype(dt) if out.dtype == F32 else out
    if isinstance(out, np.generic):
        return np.asarray(out).astype(dt) if out.dtype == F32 else out
    if isinstance(out, (tuple, list)):
        return type(out)(round_to(o, dt) for o in out)
    return out
