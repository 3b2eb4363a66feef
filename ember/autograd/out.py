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
from ember.kernels.dtypes import can_cast, cpp_name, scalar_name

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
EXACT = frozenset(("matmul", "mm", "bmm", "addmm", "baddbmm", "argmax", "argmin", "mv", "addmv",
                   "norm", "gather"))

# functions whose ``out`` must have the result's dtype exactly, with torch's own words for each
# ({out} and {result}: the ScalarType names, "Long", "Float")
_FOUND = "Found dtype {out} but expected {result}"
SAME_DTYPE = dict.fromkeys(("abs", "neg", "negative", "sign", "floor", "ceil", "round", "trunc",
                            "frac", "clamp", "clip", "clamp_min", "clamp_max", "bitwise_not"),
                           _FOUND) | {
    "dot": "result dtype {out} does not match input dtype {result}",
    "amax": "Expected the dtype for input and out to match, but got {result} for input's dtype "
            "and {out} for out's dtype.",
    "amin": "Expected the dtype for input and out to match, but got {result} for input's dtype "
            "and {out} for out's dtype.",
    "where": "Expected out type to be {result} but got {out}",
    "nan_to_num": "nan_to_num: dtype of out: {out} should be same as input: {result}",
    "index_select": "index_select(): self and result must have the same scalar type",
    "masked_select": "masked_select(): self and result must have the same scalar type",
    "take": "take(): self and out expected to have the same dtype, but got self.dtype = "
            "{result} and out.dtype = {out}",
    "nonzero": "nonzero: Expected out tensor to have scalar type {result} but got scalar "
               "type{out}",
    "float_power": "the output given to float_power has dtype {out} but the operation's result "
                   "requires dtype {result}",
}
# functions whose result not castable into ``out`` is torch's TypeError (the concatenations)
_CAT = frozenset(("cat", "stack", "hstack", "vstack"))
# reductions and scans computing in ``out``'s dtype (torch's ``dtype=``, cast first)
_IN_OUT_DTYPE = frozenset(("sum", "prod", "mean", "cumsum", "cumprod"))


def _dtype_error(name, src, dst):
    """torch's error for a result of NumPy dtype ``src`` refused by an ``out`` of ``dst``, or
    None where torch casts it."""
    names = {"out": scalar_name(dst), "result": scalar_name(src)}
    of = f" (result: {src}, out: {dst})"
    if name in SAME_DTYPE:
        words = SAME_DTYPE[name].format(**names)
        return EmberRuntimeError((words if words.startswith(name) else f"{name}(): {words}") + of)
    if name == "logsumexp" and dst.kind not in "fc":
        return EmberRuntimeError(f"logsumexp(): Expected floating point type for result tensor, "
                                 f"but got: {names['out']}{of}")
    if can_cast(src, dst):
        return None
    if name in _CAT:
        return EmberTypeError(f"{name}(): input types can't be cast to the desired output type "
                              f"{names['out']}{of}")
    return EmberRuntimeError(f"{name}(): result type {names['result']} can't be cast to the "
                             f"desired output type {names['out']}{of}")


def _out_as_dtype(name, args, kwargs, out):
    """``kwargs`` for a reduction or scan given ``out``: torch computes it in ``out``'s dtype
    (the input cast first, ``sum(x, 0, out=long)`` sums the truncated values), refuses a
    ``dtype=`` other than ``out``'s, and has no ``out=`` for sum/prod over every element."""
    from ember.tensor import Tensor
    if not isinstance(out, Tensor):
        return kwargs
    if name in ("sum", "prod") and len(args) < 2 and kwargs.get("dim") is None:
        raise EmberTypeError(f"{name}() received an invalid combination of arguments - got "
                             f"(Tensor, out=Tensor), but expected one of: (Tensor input, *, "
                             f"dtype) without out=, or (Tensor input, int dim, bool keepdim, *, "
                             f"dtype, Tensor out)")
    dst = out._data.dtype
    given = kwargs.get("dtype")
    if given is not None:
        from ember import _dtype
        want = np.dtype(_dtype.to_numpy_dtype(given))
        if want != dst:
            raise EmberRuntimeError(f"{name}(): Expected out tensor to have dtype "
                                    f"{cpp_name(want)}, but got {cpp_name(dst)} instead")
        return kwargs
    if name == "mean" and dst.kind not in "fc":
        x = args[0] if args else kwargs.get("input")
        src = getattr(getattr(x, "_data", None), "dtype", dst)
        words = "input types" if len(args) < 2 and kwargs.get("dim") is None else \
            f"result type {scalar_name(src)}"
        raise EmberRuntimeError(f"mean(): {words} can't be cast to the desired output type "
                                f"{scalar_name(dst)} (input: {src}, out: {dst})")
    if dst.kind == "b" and name in ("cumsum", "cumprod"):
        from ember.errors import UnsupportedError
        raise UnsupportedError(f'{name}(): "{name}_out_cpu" not implemented for \'Bool\'')
    return kwargs | {"dtype": out.dtype}


def write(name, result, out, *, exact=False, warn=True):
    """Write ``result`` (a Tensor, or a tuple of them for ``out`` a tuple) into ``out`` with
    torch's casting and resizing rules; return ``out``."""
    from ember.tensor import Tensor
    if isinstance(result, (tuple, list)):
        if not isinstance(out, (tuple, list)):
            raise EmberTypeError(f"{name}(): argument 'out' must be tuple of Tensors, not "
                                 f"{type(out).__name__}")
        if len(out) != len(result):
            raise EmberTypeError(f"{name}(): out= must be a tuple of {len(result)} tensors, got "
                                 f"{len(out)}")
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
        refused = _dtype_error(name, src.dtype, dst.dtype)
        if refused is not None:
            raise refused
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
        if name in _IN_OUT_DTYPE:
            kwargs = _out_as_dtype(name, args, kwargs, out)
        elif name in ("median", "nanmedian") and len(args) < 2 and "dim" not in kwargs:
            raise EmberTypeError(f'{name}() missing 1 required positional arguments: "dim" '
                                 f'(out= is for the values and indices over a dim)')
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
