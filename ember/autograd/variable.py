"""``ember.autograd.Variable``: the legacy (pre-0.4) wrapper, which torch keeps as an alias.

Since torch 0.4 a Variable is just a Tensor: ``Variable(t, requires_grad=True)`` returns a new
tensor sharing ``t``'s data, detached from ``t``'s graph, with ``requires_grad`` set, and
``isinstance(x, Variable)`` is true for every tensor. Old tutorials still import it.
"""
import warnings

from ember import _dtype
from ember.errors import EmberRuntimeError, EmberTypeError, EmberValueError


class _VariableMeta(type):
    def __instancecheck__(cls, other):
        from ember.tensor import Tensor
        return isinstance(other, Tensor)


class Variable(metaclass=_VariableMeta):
    """``Variable(data=None, requires_grad=False, volatile=False)``, as torch's legacy
    constructor: a tensor that shares ``data``'s storage (``data.detach()``) with
    ``requires_grad`` set; with no ``data``, an empty float tensor of shape (0,). ``volatile``
    has no effect (a warning, as in torch; use ``no_grad``); ``volatile`` together with
    ``requires_grad`` is an error."""

    def __new__(cls, data=None, requires_grad=False, volatile=False, _grad_fn=None):
        from ember.tensor import Tensor
        if _grad_fn is not None:
            raise EmberRuntimeError("Variable: the _grad_fn argument to the legacy Variable "
                               "constructor is no longer supported")
        if volatile:
            warnings.warn("volatile was removed and now has no effect. Use `with "
                          "torch.no_grad():` instead.", UserWarning, stacklevel=2)
            if requires_grad:
                raise EmberValueError("Variable can't be volatile and require_grad at the same time!")
        if data is None:
            import numpy as np
            var = Tensor._make(np.empty(0, _dtype.to_numpy_dtype(_dtype.get_default_dtype())))
        elif isinstance(data, Tensor):
            var = data.detach()
        else:
            raise EmberTypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        if requires_grad:
            var.requires_grad_(True)
        return var
