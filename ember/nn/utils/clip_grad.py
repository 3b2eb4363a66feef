"""Gradient clipping, in place on ``.grad`` and outside autograd.

The math is written once (``_total_norm``, ``_clip_coef``) over an ``ops`` object, as the
optimizers' updates (``ember.optim._updates``): ``_ArrayOps`` runs it on the gradients' NumPy
arrays (the eager path: one reduction per gradient, ``np.dot`` for the 2-norm, no temporaries),
``_TensorOps`` on ember tensors, which is how a function compiled with ``ember.compile`` traces
it into its captured training step (``ember.compiler.step.StepCapture.clip``: the clipped
gradients rebind ``.grad``). As torch, the total norm is the ``norm_type``-norm of the per-tensor
norms, and the gradients are multiplied by ``min(max_norm / (total + 1e-6), 1)`` (a NaN norm
gives NaN gradients).
"""
import math
from functools import reduce

import numpy as np

from ember.autograd.state import STATE
from ember.tensor import Tensor
from ember.errors import EmberRuntimeError

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "clip_grads_with_norm_",
           "get_total_norm"]


def _grads(parameters):
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def _params(parameters):
    return [parameters] if isinstance(parameters, Tensor) else list(parameters)


def _real_dtype(dt):
    if dt.kind == "c":  # complex gradients: the norm of their magnitudes, a real number
        return np.dtype(np.float32 if dt == np.complex64 else np.float64)
    return dt


class _ArrayOps:
    """The reductions on NumPy arrays, each one pass over a gradient; results are NumPy
    scalars of ``dt`` (the gradients' real dtype)."""

    def __init__(self, dt):
        self.dt = dt

    def sum_pow(self, g, p):
        """``sum(|g| ** p)``."""
        if p == 2:
            r = g.ravel()
            s = np.vdot(r, r).real if r.dtype.kind == "c" else np.dot(r, r)
        elif p == 1:
            s = np.abs(g).sum()
        else:
            with np.errstate(divide="ignore", over="ignore"):   # 0 ** -p is inf, as torch
                s = (np.abs(g) ** p).sum()
        return self.dt.type(s)

    def amax_abs(self, g):
        return self.dt.type(np.abs(g).max() if g.size else 0.0)

    def amin_abs(self, g):
        return self.dt.type(np.abs(g).min() if g.size else np.inf)

    def any_nonzero(self, g):
        return self.dt.type(np.count_nonzero(g) != 0)

    @staticmethod
    def add(a, b):
        return a + b

    maximum, minimum, sqrt = staticmethod(np.maximum), staticmethod(np.minimum), \
        staticmethod(np.sqrt)

    def clamp_max(self, a, b):
        return np.minimum(a, self.dt.type(b))

    def const(self, x):
        return self.dt.type(x)


class _TensorOps:
    """The same reductions on ember tensors (traced inside ``ember.compile``)."""

    def __init__(self, dt):
        self.dt = dt

    def _cast(self, t):
        from ember._dtype import from_numpy_dtype
        return t if t._data.dtype == self.dt else t.to(from_numpy_dtype(self.dt))

    def sum_pow(self, g, p):
        if g._data.dtype.kind == "c":
            g = g.abs()
        if p == 2:    # as _ArrayOps: one dot product, no g * g array
            r = g.reshape(-1)
            s = r.dot(r)
        else:
            s = g.abs().sum() if p == 1 else (g.abs() ** p).sum()
        return self._cast(s)

    def amax_abs(self, g):
        return self._cast(g.abs().amax())

    def amin_abs(self, g):
        return self._cast(g.abs().amin())

    def any_nonzero(self, g):
        return self._cast((g != 0).any())

    @staticmethod
    def add(a, b):
        return a + b

    @staticmethod
    def maximum(a, b):
        return a.maximum(b)

    @staticmethod
    def minimum(a, b):
        return a.minimum(b)

    @staticmethod
    def sqrt(a):
        return a.sqrt()

    @staticmethod
    def clamp_max(a, b):
        return a.clamp(max=b)

    @staticmethod
    def const(x):
        return x


def _total_norm(grads, p, ops):
    """The ``p``-norm of the per-tensor ``p``-norms of ``grads`` (torch's definition: for
    ``p = 0`` the number of gradients with a nonzero element; for finite ``p != 0`` equal to the
    ``p``-norm of all elements together, computed as ``(sum |g|**p) ** (1/p)``)."""
    if math.isinf(p):
        return reduce(ops.maximum if p > 0 else ops.minimum,
                      [ops.amax_abs(g) if p > 0 else ops.amin_abs(g) for g in grads])
    if p == 0:
        return reduce(ops.add, [ops.any_nonzero(g) for g in grads])
    s = reduce(ops.add, [ops.sum_pow(g, p) for g in grads])
    return s if p == 1 else ops.sqrt(s) if p == 2 else s ** ops.const(1.0 / p)


def _clip_coef(total, max_norm, ops):
    """``min(max_norm / (total + 1e-6), 1)`` in the norm's dtype (NaN stays NaN)."""
    return ops.clamp_max(ops.const(max_norm) / (total + ops.const(1e-6)), 1.0)


def _nonfinite(norm_type):
    return EmberRuntimeError(
        f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so "
        "it cannot be clipped. To disable this error and scale the gradients by the non-finite "
        "norm anyway, set `error_if_nonfinite=False`")


def _capture(what, parameters, refuse=None):
    """Inside a function being compiled with ``ember.compile``: True when its captured training
    step takes the clip (the gradients are traced tensors: the clip runs on them with
    ``_TensorOps`` and rebinds ``.grad``); else a graph break is recorded where the trace cannot
    stand for it (or ``refuse``: why it cannot be traced) and the eager path runs. False
    outside a compile."""
    tracer = STATE.tracer
    if tracer is None or not hasattr(tracer, "graph_break"):
        return False
    cap = getattr(tracer, "step_capture", None)
    why = refuse or (cap.clip(tracer, what, parameters) if cap is not None else what)
    if why is None:
        return True
    tracer.graph_break(why)
    return False


def _rebind(parameters, fn):
    """Traced: each gradient ``g`` replaced by ``fn(g)`` (out of place, outside autograd)."""
    from ember.autograd.grad_mode import no_grad
    with no_grad():
        for p in parameters:
            if p.grad is not None:
                p.grad = fn(p.grad)


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The ``norm_type``-norm of all ``tensors`` together, as a 0-d tensor of their dtype
    (0.0 float32 for none). RuntimeError for a non-finite norm when ``error_if_nonfinite``."""
    tensors = _params(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return Tensor._make(np.array(0.0, np.float32))
    dt = _real_dtype(tensors[0]._data.dtype)
    total = _total_norm([t._data for t in tensors], norm_type, _ArrayOps(dt))
    if error_if_nonfinite and not np.isfinite(total):
        raise _nonfinite(norm_type)
    return Tensor._make(np.array(total, dt))


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Multiply every gradient by ``min(max_norm / (total_norm + 1e-6), 1)`` in place."""
    grads = _grads(parameters)
    if not grads:
        return
    t = total_norm._data if isinstance(total_norm, Tensor) else np.asarray(total_norm)
    ops = _ArrayOps(t.dtype if t.dtype.kind == "f" else np.dtype(np.float32))
    coef = _clip_coef(ops.dt.type(t), float(max_norm), ops)
    if coef != 1:   # (x * 1 is x; NaN multiplies, as torch)
        with np.errstate(invalid="ignore"):   # inf * 0 is NaN, as torch
            for g in grads:
                g._data *= g._data.dtype.type(coef) if g._data.dtype.kind != "c" else coef
                g._bump()


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                    foreach=None):
    """Scale all gradients so that their joint norm is at most ``max_norm``; returns the norm
    before clipping. RuntimeError for a non-finite norm when ``error_if_nonfinite``."""
    parameters = _params(parameters)
    norm_type, max_norm = float(norm_type), float(max_norm)
    if _capture("clip_grad_norm_", parameters, error_if_nonfinite and (
            "clip_grad_norm_(error_if_nonfinite=True) (raising on the norm's value is "
            "data-dependent control flow)")):
        grads = _grads(parameters)
        if not grads:
            return Tensor._make(np.array(0.0, np.float32))
        from ember.autograd.grad_mode import no_grad
        with no_grad():
            ops = _TensorOps(_real_dtype(grads[0]._data.dtype))
            total = _total_norm(grads, norm_type, ops)
            coef = _clip_coef(total, max_norm, ops)
        _rebind(parameters, lambda g: g * coef)
        return total
    total = get_total_norm(_grads(parameters), norm_type, error_if_nonfinite)
    clip_grads_with_norm_(parameters, max_norm, total)
    return total


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Deprecated alias of clip_grad_norm_."""
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient element to [-clip_value, clip_value] (NaN stays NaN)."""
    parameters = _params(parameters)
    clip_value = float(clip_value)
    for g in _grads(parameters):
        if g._data.dtype.kind == "c":
            raise EmberRuntimeError("clip_grad_value_: clamp is not supported for complex "
                                    "gradients (as torch)")
    if _capture("clip_grad_value_", parameters):
        _rebind(parameters, lambda g: g.clamp(-clip_value, clip_value))
        return
    for g in _grads(parameters):
        np.clip(g._data, -clip_value, clip_value, out=g._data)
        g._bump()
