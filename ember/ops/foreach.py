"""torch's ``_foreach_*`` functions (EMA updates, fused-optimizer code, gradient norms): an op
applied to each tensor of a list, its second operand a scalar, a list of scalars, a list of
tensors or one tensor. ``ember._foreach_<op>`` returns a tuple of the results; ``ember._foreach_<op>_``
updates each tensor in place and returns the list it was given, as torch's. Each is the
Tensor method of that name applied tensor by tensor (loaded on first use, ``ember.__getattr__``).
"""
from ember.errors import EmberRuntimeError, EmberTypeError

UNARY = ("abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "erfc", "exp", "expm1",
         "floor", "frac", "lgamma", "log", "log10", "log1p", "log2", "neg", "reciprocal", "round",
         "rsqrt", "sigmoid", "sign", "sin", "sinh", "sqrt", "tan", "tanh", "trunc")
BINARY = ("add", "sub", "mul", "div", "maximum", "minimum", "clamp_min", "clamp_max", "pow")
TERNARY = ("addcmul", "addcdiv", "lerp")


def _tensors(name, tensors):
    from ember.tensor import Tensor
    tensors = list(tensors) if isinstance(tensors, (list, tuple)) else tensors
    if not isinstance(tensors, list) or not all(isinstance(t, Tensor) for t in tensors):
        raise EmberTypeError(f"{name}: expected a list of tensors, got "
                             f"{type(tensors).__name__}")
    if not tensors:
        raise EmberRuntimeError(f"{name}: Tensor list must have at least one tensor.")
    return tensors


def _per_tensor(name, other, n):
    """``other`` as one operand per tensor: a list (of tensors or scalars) of length ``n``,
    else the same operand for all."""
    if isinstance(other, (list, tuple)):
        if len(other) != n:
            raise EmberRuntimeError(f"{name}: Tensor lists must have the same number of "
                                    f"tensors, got {n} and {len(other)}")
        return list(other)
    return [other] * n


def _unary(op, inplace):
    name = f"_foreach_{op}{'_' if inplace else ''}"

    def fn(self):
        tensors = _tensors(name, self)
        out = tuple(getattr(t, op + ("_" if inplace else ""))() for t in tensors)
        return self if inplace else out
    fn.__name__ = name
    fn.__doc__ = f"``{op}`` of each tensor of the list" + (" in place." if inplace else ".")
    return fn


def _apply(t, op, inplace, *args, **kw):
    """``t.op(*args)``, or ``t.op_(*args)`` in place (a copy of the result into ``t`` where the
    Tensor has no in-place method: maximum, minimum)."""
    if not inplace:
        return getattr(t, op)(*args, **kw)
    method = getattr(t, op + "_", None)
    return method(*args, **kw) if method is not None else t.copy_(getattr(t, op)(*args, **kw))


def _binary(op, inplace):
    name = f"_foreach_{op}{'_' if inplace else ''}"

    def fn(self, other, *, alpha=None):
        tensors = _tensors(name, self)
        kw = {} if alpha is None else {"alpha": alpha}
        out = tuple(_apply(t, op, inplace, o, **kw)
                    for t, o in zip(tensors, _per_tensor(name, other, len(tensors))))
        return self if inplace else out
    fn.__name__ = name
    fn.__doc__ = (f"``{op}`` of each tensor of the list with a scalar, a list of scalars, a "
                  f"list of tensors or one tensor" + (" in place." if inplace else "."))
    return fn


def _ternary(op, inplace):
    name = f"_foreach_{op}{'_' if inplace else ''}"

    def fn(self, tensor1, tensor2=None, value=1, *, weight=None):
        tensors = _tensors(name, self)
        n = len(tensors)
        firsts = _per_tensor(name, _tensors(name, tensor1), n)
        method = op + ("_" if inplace else "")
        if op == "lerp":     # lerp(self, tensors1, weight): a scalar, scalars or tensors
            w = tensor2 if weight is None else weight
            out = tuple(getattr(t, method)(a, wi)
                        for t, a, wi in zip(tensors, firsts, _per_tensor(name, w, n)))
        else:                # addcmul/addcdiv(self, tensor1, tensor2, value)
            seconds = _per_tensor(name, _tensors(name, tensor2), n)
            out = tuple(getattr(t, method)(a, b, value=v) for t, a, b, v in
                        zip(tensors, firsts, seconds, _per_tensor(name, value, n)))
        return self if inplace else out
    fn.__name__ = name
    fn.__doc__ = f"``{op}`` of each tensor of the list" + (" in place." if inplace else ".")
    return fn


def _foreach_zero_(self):
    """Fill every tensor of the list with zeros."""
    for t in _tensors("_foreach_zero_", self):
        t.zero_()
    return self


def _foreach_copy_(self, src, non_blocking=False):
    """Copy each tensor of ``src`` into the tensor of the list at its position."""
    tensors = _tensors("_foreach_copy_", self)
    for t, s in zip(tensors, _per_tensor("_foreach_copy_", _tensors("_foreach_copy_", src),
                                         len(tensors))):
        t.copy_(s)
    return self


def _foreach_norm(self, ord=2, dtype=None):
    """The vector ``ord``-norm of each tensor of the list (0-d tensors)."""
    from ember.autograd._generated.functions import linalg_vector_norm
    return tuple(linalg_vector_norm(t, ord, dtype=dtype) for t in _tensors("_foreach_norm", self))


def _foreach_max(self):
    """The largest element of each tensor of the list (0-d tensors)."""
    return tuple(t.max() for t in _tensors("_foreach_max", self))


FUNCTIONS = {"_foreach_zero_": _foreach_zero_, "_foreach_copy_": _foreach_copy_,
             "_foreach_norm": _foreach_norm, "_foreach_max": _foreach_max}
for _ops, _make in ((UNARY, _unary), (BINARY, _binary), (TERNARY, _ternary)):
    for _op in _ops:
        for _inplace in (False, True):
            _f = _make(_op, _inplace)
            FUNCTIONS[_f.__name__] = _f
del _ops, _make, _op, _inplace, _f
