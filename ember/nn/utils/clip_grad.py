"""Gradient clipping, in place on ``.grad`` and outside autograd."""
import math

import numpy as np

from ember.tensor import Tensor
from ember.errors import EmberRuntimeError


def _grads(parameters):
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The ``norm_type``-norm of all ``tensors`` together, as a 0-d tensor."""
    if isinstance(tensors, Tensor):
        tensors = [tensors]
    tensors = list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return Tensor._make(np.array(0.0, np.float32))
    dt = tensors[0]._data.dtype
    if dt.kind == "c":  # complex gradients: the norm of their magnitudes, a real number
        dt = np.dtype(np.float32 if dt == np.complex64 else np.float64)
    if math.isinf(norm_type):
        total = max(float(np.abs(t._data).max()) if t._data.size else 0.0 for t in tensors)
    else:
        total = sum(float(np.sum(np.abs(t._data).astype(np.float64) ** norm_type))
                    for t in tensors) ** (1.0 / norm_type)
    if error_if_nonfinite and not math.isfinite(total):
        raise EmberRuntimeError(f"The total norm of order {norm_type} for gradients from "
                                "`parameters` is non-finite, so it cannot be clipped. To disable "
                                "this error and scale the gradients by the non-finite norm "
                                "anyway, set `error_if_nonfinite=False`")
    return Tensor._make(np.array(total, dt))


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                    foreach=None):
    """Scale all gradients so that their joint norm is at most ``max_norm``; returns the norm
    before clipping. RuntimeError for a non-finite norm when ``error_if_nonfinite``."""
    grads = _grads(parameters)
    total = get_total_norm(grads, norm_type, error_if_nonfinite)
    if not grads:
        return total
    coef = float(max_norm) / (float(total._data) + 1e-6)
    if coef < 1.0:
        for g in grads:
            g._data *= g._data.dtype.type(coef)
            g._bump()
    return total


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Deprecated alias of clip_grad_norm_."""
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient element to [-clip_value, clip_value]."""
    clip_value = float(clip_value)
    for g in _grads(parameters):
        if g._data.dtype.kind == "c":
            raise EmberRuntimeError("clip_grad_value_: clamp is not supported for complex "
                                    "gradients (as torch)")
        np.clip(g._data, -clip_value, clip_value, out=g._data)
        g._bump()
