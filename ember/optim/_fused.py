"""Fused optimizer updates on the pointwise engine (``ember.kernels.pointwise``).

One compiled pass over parameter, gradient and state, in place and on all threads, instead of
NumPy's ~10 passes with temporaries. Used from ``MIN_SIZE`` elements when Numba is importable;
smaller tensors keep the NumPy path (the kernel call overhead would dominate). Measured on a
2-core machine (benchmarks/pointwise.py): Adam on 1e6 float32 elements 2.4 ms -> 0.54 ms, on 1e7
90 ms -> 12 ms; on 1e4 NumPy is faster (0.03 vs 0.08 ms), hence the threshold. Single eager ops
(add, tanh, ...) do not pay on such a machine (NumPy's SIMD loops match or beat the kernel), so
eager elementwise kernels do not use the engine.
"""
import numpy as np

MIN_SIZE = 1 << 16

# Adam, written as ember's NumPy update computes it (same operation order):
#   m += (g - m) * (1 - b1); v = v * b2 + (1 - b2) * g * g
#   x -= ((lr / bc1) * m) / (sqrt(v) / sqrt(bc2) + eps)
_ADAM = (("d", "sub", ("g", "m")), ("d1", "mul", ("d", "one_m_b1")), ("m2", "add", ("m", "d1")),
         ("v1", "mul", ("v", "b2")), ("gg", "mul", ("one_m_b2", "g")), ("gg2", "mul", ("gg", "g")),
         ("v2", "add", ("v1", "gg2")), ("s", "sqrt", ("v2",)), ("s1", "div", ("s", "bc2_sqrt")),
         ("den", "add", ("s1", "eps")), ("u", "mul", ("step_size", "m2")), ("r", "div", ("u", "den")),
         ("x2", "sub", ("x", "r")))
_kernels = {}


def usable(*arrays):
    """True when the fused update applies: large float arrays of one dtype, Numba importable."""
    from ember.kernels.pointwise import has_compiler
    x = arrays[0]
    return (x.size >= MIN_SIZE and x.dtype.kind == "f" and x.dtype != np.float16
            and all(a.dtype == x.dtype and a.shape == x.shape for a in arrays) and has_compiler())


def adam_(x, g, m, v, b1, b2, bc2_sqrt, eps, step_size):
    """In place: m, v and x updated as ember's Adam step (no amsgrad)."""
    from ember.kernels.pointwise import Expr, compile_pointwise
    k = _kernels.get(x.dtype)
    if k is None:
        expr = Expr(("x", "g", "m", "v", "one_m_b1", "b2", "one_m_b2", "bc2_sqrt", "eps", "step_size"),
                    _ADAM, ("x2", "m2", "v2"))
        k = _kernels[x.dtype] = compile_pointwise(expr, (x, x, x, x) + (float,) * 6)
    k(x, g, m, v, 1.0 - b1, b2, 1.0 - b2, bc2_sqrt, eps, step_size, out=(x, m, v), backend="numba")
