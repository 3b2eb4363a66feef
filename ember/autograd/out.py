"""``out=``: torch's semantics for the functions that write their result into given tensors.

One mechanism for every such function: ``install`` gives the public functions named in ``OPS``
an ``out=`` keyword (``ember.add(a, b, out=c)``), the factories (``zeros``, ``arange``, ...)
call ``write`` themselves. As in torch:

- the result is computed as without ``out`` and written into ``out``, whose dtype it may be
  cast to under ``torch.can_cast`` (float into an integer ``out`` is refused); a multi-output
  op (``max(x, dim)``, ``sort``) takes a tuple and needs each dtype exactly;
- an ``out`` of another shape is resized (a new buffer; a UserWarning when it had elements);
- with grad mode on, an input or ``out`` that requires grad is refused (no autograd through
  ``out=``);
- ``out`` is returned (a tuple of the same named type for multi-output ops), its version bumped.

Functions without ``out=`` in torch take none here either (Python's TypeError)."""
import warnings

import numpy as np

from ember.autograd.state import STATE
from ember.errors import EmberRuntimeError, EmberTypeError
from ember.kernels.dtypes import can_cast, cpp_name

# public functions of the ``ember`` namespace that take ``out=`` as in torch
OPS = (
    "add", "sub", "subtract", "mul", "multiply", "div", "divide", "true_divide", "floor_divide",
    "remainder", "fmod", "pow", "float_power", "atan2", "hypot", "ldexp", "xlogy", "copysign",
    "maximum", "minimum", "fmax", "fmin", "lerp",
    "matmul", "mm", "bmm", "mv", "dot", "outer", "addmm", "addmv", "baddbmm",
    "cat", "stack", "hstack", "vstack",
    "sum", "mean", "prod", "max", "min", "amax", "amin", "argmax", "argmin", "cumsum", "cumprod",
    "logsumexp", "norm",
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "square",
    "sin", "cos", "tan", "tanh", "sigmoid", "asin", "acos", "atan", "sinh", "cosh", "sinc",
    "abs", "neg", "negative", "sign", "floor", "ceil", "round", "trunc", "frac", "reciprocal",
    "erf", "erfc", "nan_to_num",
    "clamp", "clip", "clamp_min", "clamp_max", "where",
    "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
    "logical_not", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
    "index_select", "gather", "masked_select", "take", "nonzero",
    "sort", "topk", "kthvalue", "median", "nanmedian", "mode", "cummax", "cummin", "aminmax",
)


def _tensor_args(args, kwargs):
    from ember.tensor import Tensor
    for a in (*args, *kwargs.values()):
        if isinstance(a, Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            yield from (t for t in a if isinstance(t, Tensor))


def check_grad(name, args, kwargs, out):
    """Refuse ``out=`` where autograd would have to record the op, as torch does."""
    if not STATE.grad_enabled:
        return
    outs = out if isinstance(out, (tuple, list)) else (out,)
    if any(getattr(t, "_requires_grad", False) for t in (*_tensor_args(args, kwargs), *outs)):
        raise EmberRuntimeError(f"{name}(): functions with out=... arguments don't support "
                                "automatic differentiation, but one of the arguments requires "
                                "grad.")

# functions whose ``out`` must have the result's dtype exactly (torch refuses a castable one:
# "Expected out tensor to have dtype float, but got double instead")
EXACT = frozenset(("matmul", "mm", "bmm", "addmm", "baddbmm", "argmax", "argmin"))


def write(name, result, out, *, exact=False, warn=True):
    """Write ``result`` (a Tensor, or a tuple of them for ``out`` a tuple) into ``out`` with
    torch's casting and resizing rules; return ``out``."""
    from ember.tensor import Tensor
    if isinstance(result, (tuple, list)):
        if not isinstance(out, (tuple, list)) or len(out) != len(result):
            raise EmberTypeError(f"{name}(): out= must be a tuple of {len(result)} tensors, got "
                                 f"{type(out).__name__}")
        outs = [write(name, r, o, exact=True, warn=warn) for r, o in zip(result, out)]
        return type(result)(*outs) if hasattr(result, "_fields") else type(result)(outs)
    if not isinstance(out, Tensor):
        raise EmberTypeError(f"{name}(): argument 'out' must be Tensor, not "
                             f"{type(out).__name__}")
    src, dst = result._data, out._data
    if src.dtype != dst.dtype:
        if exact:
            raise EmberRuntimeError(f"{name}(): Expected out tensor to have dtype "
                                    f"{cpp_name(src.dtype)}, but got {cpp_name(dst.dtype)} "
                                    f"instead")
        if not can_cast(src.dtype, dst.dtype):
            raise EmberRuntimeError(f"{name}(): result type {src.dtype} can't be cast to the "
                                    f"desired output type {dst.dtype}")
    tracer = STATE.tracer
    if src.shape == dst.shape:
        if tracer is not None:
            out.copy_(result)           # recorded as the in-place write it is
            return out
        if not dst.flags.writeable:
            raise EmberRuntimeError(f"{name}(): out= is read-only memory (an expanded or "
                                    "read-only tensor); clone() it first")
        np.copyto(dst, src, casting="unsafe")
    else:
        if tracer is not None:
            raise EmberRuntimeError(f"{name}(): an out= of shape {list(dst.shape)} would be "
                                    f"resized to {list(src.shape)}, which a trace cannot record; "
                                    "pass an out of the result's shape")
        if warn and dst.size:
            warnings.warn(f"{name}(): an output with one or more elements was resized since it "
                          f"had shape {list(dst.shape)}, which does not match the required "
                          f"output shape {list(src.shape)} (as torch, deprecated: resize it to "
                          "zero elements first)", UserWarning, stacklevel=3)
        out._data = np.array(src, dtype=dst.dtype, order="C")
    out._bump()
    return out


def with_out(name, fn):
    """``fn`` taking ``out=``: without it, ``fn`` itself is called."""
    def op(*args, out=None, **kwargs):
        if out is None:
            return fn(*args, **kwargs)
        check_grad(name, args, kwargs, out)
        return write(name, fn(*args, **kwargs), out, exact=name in EXACT)
    op.__name__ = op.__qualname__ = getattr(fn, "__name__", name)
    op.__doc__ = fn.__doc__
    op.__wrapped__ = fn
    op.__module__ = fn.__module__   # a spec op's errors stay named by dispatch (no extra wrapper)
    if hasattr(fn, "__wrapped_public__"):     # already naming its errors: not wrapped again
        op.__wrapped_public__ = fn.__wrapped_public__
    return op


def install(namespace):
    """Give the functions of ``namespace`` named in ``OPS`` their ``out=``."""
    for name in OPS:
        fn = namespace.get(name)
        if fn is not None:
            namespace[name] = with_out(name, fn)
