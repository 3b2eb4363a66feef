"""Kernels of the op_db breadth work: the complex-number accessors on ember's real
dtypes, where torch's ``conj``/``real``/``resolve_*`` are the identity and ``angle`` is 0 or pi."""
import numpy as np


def real_view(a):
    """The identity on a real array (a view): conj, resolve_conj, resolve_neg, real."""
    return a.view()


def real_copy(a):
    """The identity on a real array (a copy): conj_physical."""
    return a.copy()


def angle(a):
    """The argument of a real number: pi for negatives, 0 otherwise, NaN stays NaN; integer and
    bool inputs give the default float dtype, as torch."""
    out_dtype = a.dtype if a.dtype.kind == "f" else np.dtype(np.float32)
    out = np.where(a < 0, np.pi, 0.0).astype(out_dtype)
    if a.dtype.kind == "f":
        out = np.where(np.isnan(a), a, out)
    return out
