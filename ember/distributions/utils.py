"""Helpers shared by the distributions (torch.distributions.utils)."""
import math
from numbers import Number

import numpy as np

import ember
from ember.tensor import Tensor

euler_constant = 0.57721566490153286060


def broadcast_all(*values):
    """Numbers and Tensors broadcast to one shape; numbers become Tensors of the tensors'
    dtype (the default dtype when there are none)."""
    if not all(isinstance(v, (Tensor, Number)) for v in values):
        raise ValueError("Input arguments must all be instances of numbers.Number or "
                         "ember.Tensor.")
    tensors = [v for v in values if isinstance(v, Tensor)]
    if not tensors:
        dtype = ember.get_default_dtype()
        return tuple(ember.tensor(float(v), dtype=dtype) for v in values)
    dtype = tensors[0].dtype
    vals = [v if isinstance(v, Tensor) else ember.tensor(float(v), dtype=dtype) for v in values]
    return tuple(ember.broadcast_tensors(*vals))


def broadcast_params(*values):
    """``broadcast_all(*values)`` and the batch shape of a distribution with those parameters:
    ``()`` when every value is a number, else the broadcast shape."""
    tensors = broadcast_all(*values)
    batch = () if all(isinstance(v, Number) for v in values) else tensors[0].shape
    return tensors, batch


def finfo(t):
    return np.finfo(ember.empty(0, dtype=t.dtype).numpy().dtype)


def clamp_probs(probs):
    eps = float(finfo(probs).eps)
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs, is_binary=False):
    ps = clamp_probs(probs)
    return ps.log() - ps.neg().log1p() if is_binary else ps.log()


def logits_to_probs(logits, is_binary=False):
    return logits.sigmoid() if is_binary else logits.softmax(-1)


def sum_rightmost(value, dim):
    """Sum out the ``dim`` rightmost dimensions."""
    if dim == 0:
        return value
    return value.reshape(tuple(value.shape[:value.dim() - dim]) + (-1,)).sum(-1)


class lazy_property:
    """Computed on first access and then stored on the instance (torch's lazy_property)."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return self
        from ember.autograd.grad_mode import enable_grad
        with enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


LOG_2PI = math.log(2 * math.pi)
