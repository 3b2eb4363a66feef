"""The update math of the optimizers with two paths, written once: each function runs on NumPy
arrays, in place (``NUMPY``: the eager step), or on the pointwise engine's symbolic values
(``SYMBOLIC``: the expression ``ember.optim._fused`` compiles into one pass), where the
augmented assignments rebind instead (symbolic values have no in-place form). Both evaluate the
same operations in the same order. Returns the new values of the updated arguments."""
import numpy as np


class NUMPY:
    """Array operations of the eager step."""
    sqrt = staticmethod(np.sqrt)

    @staticmethod
    def maximum_(a, b):
        return np.maximum(a, b, out=a)

    @staticmethod
    def like(t, x):
        """``t`` in ``x``'s dtype (a NumPy float64 learning rate computes in float64)."""
        return t.astype(x.dtype, copy=False)


class SYMBOLIC:
    """The same operations on symbolic values (``ember.kernels.pointwise.expr.Sym``)."""

    @staticmethod
    def sqrt(s):
        return s.sqrt()

    @staticmethod
    def maximum_(a, b):
        return a.maximum(b)

    @staticmethod
    def like(t, x):
        return t   # the pass writes x's dtype


def adam_update(x, g, m, v, one_m_b1, b2, one_m_b2, bc2_sqrt, eps, step_size, ops=SYMBOLIC,
                v_max=None):
    """One Adam step after weight decay: ``step_size = lr / (1 - b1**t)``, ``bc2_sqrt =
    sqrt(1 - b2**t)``; ``v_max`` the running maximum of ``v`` for amsgrad (then the denominator
    reads it). Returns ``(x, m, v)``."""
    m += (g - m) * one_m_b1
    v *= b2
    v += one_m_b2 * g * g
    if v_max is not None:
        v_max = ops.maximum_(v_max, v)
    denom = ops.sqrt(v if v_max is None else v_max) / bc2_sqrt + eps
    x -= ops.like(step_size * m / denom, x)
    return x, m, v


def sgd_update(x, d, lr, ops=SYMBOLIC):
    """``x - lr * d``."""
    x -= ops.like(lr * d, x)
    return x


def sgd_momentum_update(x, g, buf, momentum, one_m_dampening, lr, ops=SYMBOLIC, nesterov=False,
                        first=False):
    """SGD with momentum: the buffer ``momentum * buf + (1 - dampening) * g`` (``first``: the
    buffer was just set to ``g``), then a step along it (``g + momentum * buf`` with
    ``nesterov``). Returns ``(x, buf)``."""
    if not first:
        buf *= momentum
        buf += one_m_dampening * g
    return sgd_update(x, g + momentum * buf if nesterov else buf, lr, ops), buf
