'''Pointwise apply engine: one compiled pass over strided, broadcast ndarrays for a whole chain of
elementwise ops.

Expressions
-----------
An ``Expr`` is a let-binding list over named inputs, the form the JIT's fusion pass emits::

    Expr(inputs=("x", "y"),
         steps=[("t0", "mul", ("x", "y")),        # (name, op, operands + constant parameters)
                ("out", "tanh", ("t0",))],
         outputs=("out",))

Operands are names bound earlier or Python bool/int/float constants (None for an omitted clamp
bound); constant parameters follow the operands (``("y", "leaky_relu", ("x", 0.2))``,
``("h", "cast", ("x", "float16"))``, ``("g", "gelu", ("x", "tanh"))``). Ops and their typing are
listed in ``ops`` (``OPS``): add sub mul div floor_divide remainder pow maximum minimum neg abs
sign reciprocal exp exp2 expm1 log log2 log1p sqrt rsqrt sin cos tan tanh erf sigmoid silu relu
leaky_relu(negative_slope) elu(alpha) selu gelu(approximate) softplus(beta, threshold)
hardtanh(min_val, max_val) clamp(x, lo, hi) where(c, a, b) lerp(a, b, w) floor ceil trunc round eq ne
lt le gt ge logical_and logical_or logical_xor logical_not isnan isinf isfinite cast(dtype).
Dtypes follow torch's promotion at every step (``result_dtype``), float16 is computed in float32
and rounded per op, integers wrap. Example, tanh-GELU forward and its backward::

    c, k = 0.7978845608028654, 0.044715
    gelu_fwd = Expr(("x",), [
        ("x2", "mul", ("x", "x")),
        ("inner", "mul", ("x", c)), ("poly", "mul", ("x2", k)), ("poly1", "add", ("poly", 1.0)),
        ("u", "mul", ("inner", "poly1")),                    # c * (x + k x^3)
        ("th", "tanh", ("u",)), ("one_th", "add", ("th", 1.0)),
        ("hx", "mul", ("x", 0.5)), ("y", "mul", ("hx", "one_th"))], ("y",))
    gelu_bwd = Expr(("x", "gy"), [                           # dy/dx = 0.5 (1 + th) + 0.5 x (1 - th^2) du/dx
        ("x2", "mul", ("x", "x")),
        ("poly", "mul", ("x2", k)), ("poly1", "add", ("poly", 1.0)),
        ("inner", "mul", ("x", c)), ("u", "mul", ("inner", "poly1")), ("th", "tanh", ("u",)),
        ("th2", "mul", ("th", "th")), ("sech2", "sub", (1.0, "th2")),
        ("dpoly", "mul", ("x2", 3 * k)), ("dpoly1", "add", ("dpoly", 1.0)), ("du", "mul", ("dpoly1", c)),
        ("hx", "mul", ("x", 0.5)), ("a", "mul", ("hx", "sech2")), ("b", "mul", ("a", "du")),
        ("one_th", "add", ("th", 1.0)), ("half", "mul", ("one_th", 0.5)),
        ("d", "add", ("half", "b")), ("gx", "mul", ("gy", "d"))], ("gx",))
    (gx,) = apply(gelu_bwd, x, gy)

The same expressions can be written with symbolic values (``expr.Builder``, ``expr.Sym``):
operators and one method per op emit the steps, so ``b = Builder(("x",)); (x,) = b.inputs;
e = b.expr((x * 2.0).tanh())`` binds ``t0 = mul(x, 2.0)``, ``t1 = tanh(t0)``. ember's op spec
is evaluated this way to translate spec ops (``ember.autograd._generated.pointwise.FORWARD``)
and to derive backward kernels (``autodiff.derive`` with the spec's formulas as rules).

Running
-------
``compile_pointwise(expr, in_types)`` types the expression for the input dtypes (an ndarray or
dtype per array input, ``float``/``int``/``bool`` for a Python-scalar input passed at call time,
e.g. Adam's learning rate) and returns a ``PointwiseKernel``; ``kernel(*operands, out=None)``
broadcasts the operands and returns the tuple of outputs, written into ``out`` when given (an
output may be an input, or overlap one: overlapping inputs are copied first). ``apply(expr,
*operands, out=None)`` does both. Dimensions are reordered to the operands' memory order and
collapsed (``collapse_dims``), so contiguous operands run as one flat loop; the loop nest runs in
parallel over the outer rows (``ember.kernels.runtime.threads.working_threads`` threads).

Compiled kernels are generated per (expression, dtypes, inner-stride layout), compiled by
Numba (imported on first use) and cached in memory and on disk (``diskcache``), so another process
loads them without compiling. Arrays under ``engine.MIN_COMPILED_SIZE`` elements, and every array
when Numba is missing (``has_compiler()``), go through NumPy op by op (``numpy_eval``, which says
what is lost).
'''
from .collapse import Collapsed, collapse_dims, iteration_order
from .engine import PointwiseKernel, apply, compile_form, compile_pointwise
from .expr import Builder, Expr, Sym, infer_types
from ember.kernels.runtime.compiler import has_compiler
from .ops import OPS
from .promotion import promote_types, result_dtype

__all__ = ["Builder", "Collapsed", "Expr", "OPS", "Sym", "PointwiseKernel", "apply", "collapse_dims", "compile_form", "compile_pointwise",
           "has_compiler", "infer_types", "iteration_order", "promote_types", "result_dtype"]
