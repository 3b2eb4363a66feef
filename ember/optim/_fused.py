"""Fused optimizer updates (Adam, SGD with momentum) on the pointwise engine (``ember.kernels.pointwise``).

One compiled pass over parameter, gradient and state, in place and on all threads, instead of
NumPy's ~10 passes with temporaries. Used from ``MIN_SIZE`` elements when Numba is importable;
smaller tensors keep the NumPy path (the kernel call overhead would dominate). Measured on a
2-core machine (benchmarks/pointwise.py): Adam on 1e6 float32 elements 2.4 ms -> 0.54 ms, on 1e7
90 ms -> 12 ms; on 1e4 NumPy is faster (0.03 vs 0.08 ms), hence the threshold. Single eager ops
(add, tanh, ...) do not pay on such a machine (NumPy's SIMD loops match or beat the kernel), so
eager elementwise kernels do not use the engine.
"""
import numpy as np

from ember.optim._updates import adam_update, sgd_momentum_update

MIN_SIZE = 1 << 16

# the compiled passes' inputs: the update functions' arguments (their math: ember.optim._updates)
_ADAM_INPUTS = ("x", "g", "m", "v", "one_m_b1", "b2", "one_m_b2", "bc2_sqrt", "eps", "step_size")
_SGD_INPUTS = ("x", "g", "buf", "momentum", "one_m_dampening", "lr")


def usable(*arrays):
    """True when the fused update applies: large float arrays of one dtype, Numba installed
    (not imported here: see ``adam_``)."""
    from ember.kernels.runtime import compiler
    x = arrays[0]
    return (x.size >= MIN_SIZE and x.dtype.kind == "f" and x.dtype != np.float16
            and all(a.dtype == x.dtype and a.shape == x.shape for a in arrays)
            and compiler.available())


def adam_(x, g, m, v, b1, b2, bc2_sqrt, eps, step_size):
    """In place: m, v and x updated as ember's Adam step (no amsgrad). Tiered like every
    pointwise kernel (``EMBER_JIT_COMPILE``): until the kernel is built (or Numba imported) on
    the compile thread, the same expression runs on NumPy."""
    from ember.kernels.pointwise import compile_form
    k = compile_form(adam_update, _ADAM_INPUTS, (x, x, x, x) + (float,) * 6)
    k(x, g, m, v, 1.0 - b1, b2, 1.0 - b2, bc2_sqrt, eps, step_size, out=(x, m, v))


def sgd_momentum_(x, g, buf, momentum, dampening, lr):
    """In place: buf and x updated as ember's SGD step with momentum (not Nesterov), in one
    pass; tiered as ``adam_``."""
    from ember.kernels.pointwise import compile_form
    k = compile_form(sgd_momentum_update, _SGD_INPUTS, (x, x, x) + (float,) * 3)
    k(x, g, buf, momentum, 1.0 - dampening, lr, out=(x, buf))
