"""torch's alternative names of pointwise ops (``torch.arcsin`` is ``torch.asin``, ...): the same
spec op as a function, a Tensor method and, where the op has one, an in-place method; and the
front ends returning torch's named results (``frexp``)."""
import numpy as np

from ember import return_types as R
from ember.autograd import _generated as G
from ember.errors import EmberRuntimeError, public

ALIASES = {
    "absolute": "abs", "arccos": "acos", "arccosh": "acosh", "arcsin": "asin", "arcsinh": "asinh",
    "arctan": "atan", "arctan2": "atan2", "arctanh": "atanh", "divide": "div", "multiply": "mul",
    "negative": "neg", "subtract": "sub", "greater": "gt", "greater_equal": "ge", "less": "lt",
    "less_equal": "le", "not_equal": "ne",
}


def frexp(input):
    """``(mantissa, exponent)`` with ``input = mantissa * 2**exponent``, |mantissa| in [0.5, 1),
    as ``return_types.frexp``."""
    return R.frexp(*G.frexp(input))


def zero_(input):
    """Fill ``input`` with zeros in place and return it (``torch.zero_``)."""
    return input.zero_()


def _inplace(name, fn):
    """``x.name_(...)``: ``fn(x, ...)`` written into ``x`` (for composite ops)."""
    def method(self, *args, **kwargs):
        # on a clone when recording: ``fn`` may save its input, which the write would modify
        src = G.clone(self) if self.requires_grad else self
        out = fn(src, *args, **kwargs)
        if name == "float_power" and self.dtype != out.dtype:
            raise EmberRuntimeError(f"float_power_: the base given to float_power_ has dtype "
                                    f"{self.dtype} but the operation's result requires dtype "
                                    f"{out.dtype}")
        if not np.can_cast(out._data.dtype, self._data.dtype, "same_kind"):
            raise EmberRuntimeError(f"{name}_: result type {out.dtype} can't be cast to the "
                                    f"desired output type {self.dtype}")
        return G.copy_(self, out)
    method.__name__ = name + "_"
    return public(method, name + "_")


INPLACE_COMPOSITES = {
    "square": G.square, "fix": G.fix, "sgn": G.sgn, "true_divide": G.true_divide,
    "float_power": G.float_power, "ldexp": G.ldexp, "mvlgamma": G.mvlgamma,
    "polygamma": lambda self, n: G.polygamma(n, self),
}


def install(namespace, tensor_cls):
    """Add the aliases to ``namespace`` (ember's globals) and to ``tensor_cls`` where missing."""
    for alias, target in ALIASES.items():
        if alias not in namespace:
            namespace[alias] = public(getattr(G, target), alias)
        if not hasattr(tensor_cls, alias) and hasattr(tensor_cls, target):
            setattr(tensor_cls, alias, getattr(tensor_cls, target))
        if not hasattr(tensor_cls, alias + "_") and hasattr(tensor_cls, target + "_"):
            setattr(tensor_cls, alias + "_", getattr(tensor_cls, target + "_"))
    for name, fn in INPLACE_COMPOSITES.items():
        if not hasattr(tensor_cls, name + "_"):
            setattr(tensor_cls, name + "_", _inplace(name, fn))
    namespace["frexp"] = public(frexp)
    namespace["zero_"] = public(zero_)
    from ember.autograd.composites import native_batch_norm_outputs
    namespace["native_batch_norm"] = public(native_batch_norm_outputs, "native_batch_norm")
    tensor_cls.frexp = public(frexp, "frexp")
