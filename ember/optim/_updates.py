"""The update math of the optimizers, written once: each function runs on NumPy arrays, in
place (``NUMPY``: the eager step), on the pointwise engine's symbolic values (``SYMBOLIC``: the
expression ``ember.optim._fused`` compiles into one pass) or on traced tensors
(``ember.compiler.step``: a compiled training step), where the augmented assignments rebind
instead (those values have no in-place form). All evaluate the same operations in the same
order. Returns the new values of the updated arguments.

The functions after ``sgd_momentum_update`` are the ``update`` of an optimizer built on
``ember.optim.algorithms._Traceable``: ``(x, g, *state, **scalars, ops)`` returning
``(x, *state)``, a state slot None where the options leave it unused; the scalars are the
optimizer's ``_scalars`` (from the group) and ``_step_scalars`` (from the step count)."""
import numpy as np

from ember.kernels.elementwise import sign as _sign


class NUMPY:
    """Array operations of the eager step."""
    sqrt = staticmethod(np.sqrt)
    abs = staticmethod(np.abs)
    sign = staticmethod(_sign)   # torch's: sign(nan) is 0
    where = staticmethod(np.where)

    @staticmethod
    def clamp_(a, lo, hi):
        return np.clip(a, lo, hi, out=a)

    @staticmethod
    def assign_(dst, src):
        dst[...] = src
        return dst

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
    def abs(s):
        return s.abs()

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


def rmsprop_update(x, g, square_avg, grad_avg, momentum_buffer, *, alpha, one_m_alpha, eps,
                   lr, momentum, ops=SYMBOLIC):
    """RMSprop: the running average of squares (and of gradients when centered), then a step
    along ``g / avg`` (through the momentum buffer when there is one)."""
    square_avg *= alpha
    square_avg += one_m_alpha * g * g
    if grad_avg is not None:
        grad_avg += (g - grad_avg) * one_m_alpha
        avg = ops.sqrt(square_avg - grad_avg * grad_avg) + eps
    else:
        avg = ops.sqrt(square_avg) + eps
    if momentum_buffer is not None:
        momentum_buffer *= momentum
        momentum_buffer += g / avg
        x -= ops.like(lr * momentum_buffer, x)
    else:
        x -= ops.like(lr * g / avg, x)
    return x, square_avg, grad_avg, momentum_buffer


def adagrad_update(x, g, sum_, *, eps, clr, ops=SYMBOLIC):
    """Adagrad: ``clr = lr / (1 + (t - 1) * lr_decay)``."""
    sum_ += g * g
    x -= ops.like(clr * g / (ops.sqrt(sum_) + eps), x)
    return x, sum_


def adadelta_update(x, g, square_avg, acc_delta, *, rho, one_m_rho, eps, lr, ops=SYMBOLIC):
    """Adadelta: running averages of squared gradients and squared updates."""
    square_avg *= rho
    square_avg += one_m_rho * g * g
    delta = ops.sqrt(acc_delta + eps) / ops.sqrt(square_avg + eps) * g
    acc_delta *= rho
    acc_delta += one_m_rho * delta * delta
    x -= ops.like(lr * delta, x)
    return x, square_avg, acc_delta


def adamax_update(x, g, exp_avg, exp_inf, *, one_m_b1, b2, eps, clr, ops=SYMBOLIC):
    """Adamax: ``clr = lr / (1 - b1**t)``; the infinity norm ``max(b2 * u, |g| + eps)``."""
    exp_avg += (g - exp_avg) * one_m_b1
    exp_inf *= b2
    exp_inf = ops.maximum_(exp_inf, ops.abs(g) + eps)
    x -= ops.like(clr * exp_avg / exp_inf, x)
    return x, exp_avg, exp_inf


def nadam_update(x, g, exp_avg, exp_avg_sq, *, one_m_b1, b2, one_m_b2, eps, bc2, c_grad,
                 c_avg, ops=SYMBOLIC):
    """NAdam: ``bc2 = 1 - b2**t``; ``c_grad = -lr (1 - mu_t) / (1 - prod mu)``, ``c_avg =
    -lr mu_{t+1} / (1 - prod mu * mu_{t+1})`` (the momentum schedule, from the step count)."""
    exp_avg += (g - exp_avg) * one_m_b1
    exp_avg_sq *= b2
    exp_avg_sq += one_m_b2 * g * g
    denom = ops.sqrt(exp_avg_sq / bc2) + eps
    x += ops.like(c_grad * g / denom, x)
    x += ops.like(c_avg * exp_avg / denom, x)
    return x, exp_avg, exp_avg_sq


def radam_update(x, g, exp_avg, exp_avg_sq, *, one_m_b1, b2, one_m_b2, eps, step_size, adapt,
                 rectified, ops=SYMBOLIC):
    """RAdam: ``step_size = lr / (1 - b1**t)``; while the variance is tractable (``rectified``:
    ``rho_t > 5``, a function of the step count) the step is scaled by ``adapt / (sqrt(v) +
    eps)`` with ``adapt = sqrt(1 - b2**t) * rect``, else it is plain momentum SGD."""
    exp_avg += (g - exp_avg) * one_m_b1
    exp_avg_sq *= b2
    exp_avg_sq += one_m_b2 * g * g
    if rectified:
        x -= ops.like(exp_avg * step_size * (adapt / (ops.sqrt(exp_avg_sq) + eps)), x)
    else:
        x -= ops.like(exp_avg * step_size, x)
    return x, exp_avg, exp_avg_sq


def rprop_update(x, g, prev, step_size, *, etaminus, etaplus, step_min, step_max,
                 ops=SYMBOLIC):
    """Rprop: each element's step size grows by ``etaplus`` while its gradient keeps its sign
    and shrinks by ``etaminus`` when it flips (clamped to ``[step_min, step_max]``); a flipped
    gradient counts as 0 (no step, and the next step does not grow)."""
    s = ops.sign(g * prev)
    step_size *= ops.like(ops.where(s > 0, etaplus, ops.where(s < 0, etaminus, 1.0)), step_size)
    step_size = ops.clamp_(step_size, step_min, step_max)
    g = ops.where(s < 0, 0.0, g)
    x -= ops.like(ops.sign(g) * step_size, x)
    prev = ops.assign_(prev, g)
    return x, prev, step_size


def asgd_update(x, g, ax, *, decay, eta, mu, averaging, ops=SYMBOLIC):
    """ASGD: ``decay = 1 - lambd * eta``; the averaged iterate ``ax`` moves towards ``x`` by
    ``mu`` once ``averaging`` (``mu != 1``), else it is ``x``."""
    x *= decay
    x -= ops.like(eta * g, x)
    if averaging:
        ax += ops.like((x - ax) * mu, ax)
    else:
        ax = ops.assign_(ax, x)
    return x, ax
