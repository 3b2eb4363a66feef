"""torch's alternative names of pointwise ops (``torch.arcsin`` is ``torch.asin``, ...): the same
spec op as a function, a Tensor method and, where the op has one, an in-place method; and the
front ends returning torch's named results (``frexp``)."""
from ember import return_types as R
from ember.autograd import _generated as G
from ember.errors import public

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


def install(namespace, tensor_cls):
    """Add the aliases to ``namespace`` (ember's globals) and to ``tensor_cls`` where missing."""
    for alias, target in ALIASES.items():
        if alias not in namespace:
            namespace[alias] = public(getattr(G, target), alias)
        if not hasattr(tensor_cls, alias) and hasattr(tensor_cls, target):
            setattr(tensor_cls, alias, getattr(tensor_cls, target))
        if not hasattr(tensor_cls, alias + "_") and hasattr(tensor_cls, target + "_"):
            setattr(tensor_cls, alias + "_", getattr(tensor_cls, target + "_"))
    namespace["frexp"] = public(frexp)
    tensor_cls.frexp = public(frexp, "frexp")
