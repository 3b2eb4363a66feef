"""SGD, Adam, AdamW, RMSprop, Adagrad: torch's update rules (single-tensor form) on NumPy.

State tensors live in ``optimizer.state[param]`` as ember Tensors (``step`` as a float); each
update writes the parameter's storage in place.
"""
import math

import numpy as np

from ember.optim import _fused
from ember.optim._updates import NUMPY, adam_update, sgd_momentum_update, sgd_update
from ember.optim.optimizer import Optimizer, required
from ember.tensor import Tensor
from ember.errors import EmberTypeError, EmberValueError


def _real(a):
    """A complex array as its real view (..., 2), as torch's optimizers update complex
    parameters (``torch.view_as_real``); a real array itself."""
    if a.dtype.kind != "c":
        return a
    part = np.dtype(np.float32 if a.dtype == np.complex64 else np.float64)
    return np.lib.stride_tricks.as_strided(a.real, a.shape + (2,), a.strides + (part.itemsize,))


def _zeros_like(p):
    return Tensor._make(np.zeros_like(_real(p._data)))


def _grad(p, maximize):
    g = _real(p.grad._data)
    return -g if maximize else g


def _with_grads(group):
    """(parameter, its gradient array (negated under ``maximize``), its data array) for each
    parameter of ``group`` that has a gradient."""
    for p in group["params"]:
        if p.grad is not None:
            yield p, _grad(p, group["maximize"]), _real(p._data)


def _check(name, value, low=0.0):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            and not hasattr(value, "_data"):
        raise EmberTypeError(f"Invalid {name}: expected a number, got {type(value).__name__}")
    if not value >= low:  # NaN too
        raise EmberValueError(f"Invalid {name}: {value}")


def _start(st, p, *buffers, scalars=()):
    """A parameter's state before its first update: ``step`` 0, the float32 ``scalars``
    (name, value pairs), then the zero ``buffers``, in the order torch's ``state_dict`` lists
    them."""
    st["step"] = 0.0
    for name, value in scalars:
        st[name] = _scalar32(value)
    for name in buffers:
        st[name] = _zeros_like(p)


def _decay(grad, x, lr, wd, decoupled=False):
    """Weight decay ``wd``: added to the gradient as ``wd * x`` (returned), or with
    ``decoupled`` (AdamW) applied to the parameter ``x`` in place as ``x *= 1 - lr * wd``."""
    if wd != 0:
        if decoupled:
            x *= 1 - lr * wd
        else:
            grad = grad + wd * x
    return grad


def _average_(avg, value, beta):
    """The running average ``avg += (value - avg) * (1 - beta)``, in place."""
    avg += (value - avg) * (1 - beta)


def _average_sq_(avg, value, beta):
    """The running average of squares ``avg = beta * avg + (1 - beta) * value**2``, in place."""
    avg *= beta
    avg += (1 - beta) * value * value


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum, dampening, Nesterov, weight decay."""

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False,
                 *, maximize=False, foreach=None, differentiable=False, fused=None):
        if lr is not required:
            _check("learning rate", lr)
        _check("momentum value", momentum)
        _check("weight_decay value", weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise EmberValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize, foreach=foreach,
                                      differentiable=differentiable, fused=fused))

    def step(self, closure=None):
        """One update of every parameter with a gradient; returns the closure's loss."""
        loss = self._closure(closure)
        for g in self.param_groups:
            lr, mom, damp = g["lr"], g["momentum"], g["dampening"]
            wd, nesterov = g["weight_decay"], g["nesterov"]
            for p, d, x in _with_grads(g):
                d = _decay(d, x, lr, wd)
                if mom == 0:
                    sgd_update(x, d, lr, NUMPY)
                else:
                    st = self.state[p]
                    buf = st.get("momentum_buffer")
                    first = buf is None
                    if first:
                        buf = st["momentum_buffer"] = Tensor._make(np.array(d, x.dtype, copy=True))
                    if not first and not nesterov and _fused.usable(x, d, buf._data):
                        _fused.sgd_momentum_(x, d, buf._data, mom, damp, lr)   # one pass
                    else:
                        sgd_momentum_update(x, d, buf._data, mom, 1 - damp, lr, NUMPY, nesterov,
                                            first)
                p._bump()
        return loss


class Adam(Optimizer):
    """Adam (amsgrad, maximize, weight decay; ``decoupled_weight_decay`` gives AdamW)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False):
        _check("learning rate", lr)
        _check("epsilon value", eps)
        _check_betas(betas)
        _check("weight_decay value", weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize, foreach=foreach, capturable=capturable,
                                      differentiable=differentiable, fused=fused,
                                      decoupled_weight_decay=decoupled_weight_decay))

    def step(self, closure=None):
        """One Adam update of every parameter with a gradient; returns the closure's loss."""
        loss = self._closure(closure)
        for g in self.param_groups:
            lr, (b1, b2), eps, wd = g["lr"], g["betas"], g["eps"], g["weight_decay"]
            for p, grad, x in _with_grads(g):
                st = self.state[p]
                if not st:
                    _start(st, p, "exp_avg", "exp_avg_sq",
                           *(("max_exp_avg_sq",) if g["amsgrad"] else ()))
                grad = _decay(grad, x, lr, wd, g["decoupled_weight_decay"])
                st["step"] += 1
                step = st["step"]
                m, v = st["exp_avg"]._data, st["exp_avg_sq"]._data
                bc2_sqrt, step_size = math.sqrt(1 - b2 ** step), lr / (1 - b1 ** step)
                if not g["amsgrad"] and _fused.usable(x, grad, m, v):  # one pass (ember.optim._fused)
                    _fused.adam_(x, grad, m, v, b1, b2, bc2_sqrt, eps, step_size)
                else:
                    adam_update(x, grad, m, v, 1 - b1, b2, 1 - b2, bc2_sqrt, eps, step_size, NUMPY,
                                st["max_exp_avg_sq"]._data if g["amsgrad"] else None)
                p._bump()
        return loss


class AdamW(Adam):
    """Adam with decoupled weight decay (default 1e-2)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable, differentiable=differentiable,
                         fused=fused, decoupled_weight_decay=True)


class RMSprop(Optimizer):
    """RMSprop with optional momentum and centering."""

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, capturable=False, foreach=None, maximize=False,
                 differentiable=False):
        _check("learning rate", lr)
        _check("epsilon value", eps)
        _check("momentum value", momentum)
        _check("weight_decay value", weight_decay)
        _check("alpha value", alpha)
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                      momentum=momentum, centered=centered, maximize=maximize,
                                      capturable=capturable, foreach=foreach,
                                      differentiable=differentiable))

    def step(self, closure=None):
        loss = self._closure(closure)
        for g in self.param_groups:
            lr, alpha, eps, wd, mom = (g["lr"], g["alpha"], g["eps"], g["weight_decay"],
                                       g["momentum"])
            for p, grad, x in _with_grads(g):
                st = self.state[p]
                if not st:
                    _start(st, p, "square_avg", *(("momentum_buffer",) if mom > 0 else ()),
                           *(("grad_avg",) if g["centered"] else ()))
                st["step"] += 1
                grad = _decay(grad, x, lr, wd)
                sq = st["square_avg"]._data
                _average_sq_(sq, grad, alpha)
                if g["centered"]:
                    ga = st["grad_avg"]._data
                    _average_(ga, grad, alpha)
                    avg = np.sqrt(sq - ga * ga) + eps
                else:
                    avg = np.sqrt(sq) + eps
                if mom > 0:
                    buf = st["momentum_buffer"]._data
                    buf *= mom
                    buf += grad / avg
                    x -= (lr * buf).astype(x.dtype, copy=False)
                else:
                    x -= (lr * grad / avg).astype(x.dtype, copy=False)
                p._bump()
        return loss


class Adagrad(Optimizer):
    """Adagrad with learning-rate decay and an initial accumulator value."""

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                 eps=1e-10, foreach=None, *, maximize=False, differentiable=False, fused=None):
        _check("learning rate", lr)
        _check("lr_decay value", lr_decay)
        _check("weight_decay value", weight_decay)
        _check("initial_accumulator_value value", initial_accumulator_value)
        _check("epsilon value", eps)
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps,
                                      weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      foreach=foreach, maximize=maximize,
                                      differentiable=differentiable, fused=fused))
        for g in self.param_groups:
            for p in g["params"]:
                st = self.state[p]
                st["step"] = 0.0
                st["sum"] = Tensor._make(np.full_like(_real(p._data), initial_accumulator_value))

    def step(self, closure=None):
        loss = self._closure(closure)
        for g in self.param_groups:
            for p, grad, x in _with_grads(g):
                st = self.state[p]
                st["step"] += 1
                grad = _decay(grad, x, g["lr"], g["weight_decay"])
                clr = g["lr"] / (1 + (st["step"] - 1) * g["lr_decay"])
                s = st["sum"]._data
                s += grad * grad
                x -= (clr * grad / (np.sqrt(s) + g["eps"])).astype(x.dtype, copy=False)
                p._bump()
        return loss


def _check_betas(betas):
    if not 0.0 <= betas[0] < 1.0:
        raise EmberValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise EmberValueError(f"Invalid beta parameter at index 1: {betas[1]}")


def _scalar32(value):
    """A 0-d float32 state Tensor, as torch keeps its scalar state (eta, mu, mu_product)."""
    return Tensor._make(np.array(value, np.float32))


class Adadelta(Optimizer):
    """Adadelta: running averages of squared gradients and squared updates (``rho``)."""

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 capturable=False, maximize=False, differentiable=False):
        _check("learning rate", lr)
        if not 0.0 <= rho <= 1.0:
            raise EmberValueError(f"Invalid rho value: {rho}")
        _check("epsilon value", eps)
        _check("weight_decay value", weight_decay)
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                                      maximize=maximize, capturable=capturable, foreach=foreach,
                                      differentiable=differentiable))

    def step(self, closure=None):
        """One Adadelta update of every parameter with a gradient; returns the closure's loss."""
        loss = self._closure(closure)
        for g in self.param_groups:
            lr, rho, eps, wd = g["lr"], g["rho"], g["eps"], g["weight_decay"]
            for p, grad, x in _with_grads(g):
                st = self.state[p]
                if not st:
                    _start(st, p, "square_avg", "acc_delta")
                st["step"] += 1
                grad = _decay(grad, x, lr, wd)
                sq, acc = st["square_avg"]._data, st["acc_delta"]._data
                _average_sq_(sq, grad, rho)
                delta = np.sqrt(acc + eps) / np.sqrt(sq + eps) * grad
                _average_sq_(acc, delta, rho)
                x -= (lr * delta).astype(x.dtype, copy=False)
                p._bump()
        return loss


class Adamax(Optimizer):
    """Adamax: Adam with the infinity norm of past gradients in the denominator."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False, differentiable=False, capturable=False):
        _check("learning rate", lr)
        _check("epsilon value", eps)
        _check_betas(betas)
        _check("weight_decay value", weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    def step(self, closure=None):
        """One Adamax update of every parameter with a gradient; returns the closure's loss."""
        loss = self._closure(closure)
        for g in self.param_groups:
            lr, (b1, b2), eps, wd = g["lr"], g["betas"], g["eps"], g["weight_decay"]
            for p, grad, x in _with_grads(g):
                st = self.state[p]
                if not st:
                    _start(st, p, "exp_avg", "exp_inf")
                st["step"] += 1
                grad = _decay(grad, x, lr, wd)
                m, u = st["exp_avg"]._data, st["exp_inf"]._data
                _average_(m, grad, b1)
                u *= b2
                np.maximum(u, np.abs(grad) + eps, out=u)
                clr = lr / (1 - b1 ** st["step"])
                x -= (clr * m / u).astype(x.dtype, copy=False)
                p._bump()
        return loss


class NAdam(Optimizer):
    """NAdam: Adam with Nesterov momentum and a momentum schedule (``momentum_decay``);
    ``decoupled_weight_decay`` decays the weights as AdamW does."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, *, foreach=None,
                 maximize=False, capturable=False, differentiable=False):
        _check("learning rate", lr)
        _check("epsilon value", eps)
        _check_betas(betas)
        _check("weight_decay value", weight_decay)
        _check("momentum_decay value", momentum_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, momentum_decay=momentum_decay,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize, foreach=foreach, capturable=capturable,
                                      differentiable=differentiable))

    def step(self, closure=None):
        """One NAdam update of every parameter with a gradient; returns the closure's loss."""
        loss = self._closure(closure)
        for g in self.param_groups:
            lr, (b1, b2), eps, wd = g["lr"], g["betas"], g["eps"], g["weight_decay"]
            md = g["momentum_decay"]
            for p, grad, x in _with_grads(g):
                st = self.state[p]
                if not st:
                    _start(st, p, "exp_avg", "exp_avg_sq", scalars=(("mu_product", 1.0),))
                st["step"] += 1
                step = st["step"]
                grad = _decay(grad, x, lr, wd, g["decoupled_weight_decay"])
                mu = b1 * (1.0 - 0.5 * 0.96 ** (step * md))
                mu_next = b1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * md))
                # torch keeps mu_product as a float32 scalar and multiplies it in float32
                mu_prod = np.float32(np.asarray(st["mu_product"]._data, np.float32) *
                                     np.float32(mu))
                st["mu_product"] = _scalar32(mu_prod)
                mu_prod = float(mu_prod)
                m, v = st["exp_avg"]._data, st["exp_avg_sq"]._data
                _average_(m, grad, b1)
                _average_sq_(v, grad, b2)
                denom = np.sqrt(v / (1 - b2 ** step)) + eps
                upd = (-lr * (1.0 - mu) / (1.0 - mu_prod)) * grad / denom
                upd2 = ((-lr * mu_next) / (1.0 - mu_prod * mu_next)) * m / denom
                x += upd.astype(x.dtype, copy=False)
                x += upd2.astype(x.dtype, copy=False)
                p._bump()
        return loss


class RAdam(Optimizer):
    """RAdam: Adam with the variance of the adaptive learning rate rectified (plain momentum
    SGD while it is intractable, ``rho_t <= 5``); ``decoupled_weight_decay`` as AdamW."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False,
                 capturable=False, differentiable=False):
        _check("learning rate", lr)
        _check("epsilon value", eps)
        _check_betas(betas)
        _check("weight_decay value", weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, maximize=maximize,
                                      foreach=foreach, capturable=capturable,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      differentiable=differentiable))

    def step(self, closure=None):
        """One RAdam update of every parameter with a gradient; returns the closure's loss."""
        loss = self._closure(closure)
        for g in self.param_groups:
            lr, (b1, b2), eps, wd = g["lr"], g["betas"], g["eps"], g["weight_decay"]
            for p, grad, x in _with_grads(g):
                st = self.state[p]
                if not st:
                    _start(st, p, "exp_avg", "exp_avg_sq")
                st["step"] += 1
                step = st["step"]
                grad = _decay(grad, x, lr, wd, g["decoupled_weight_decay"])
                m, v = st["exp_avg"]._data, st["exp_avg_sq"]._data
                _average_(m, grad, b1)
                _average_sq_(v, grad, b2)
                bc1 = 1 - b1 ** step
                bc2 = 1 - b2 ** step
                m_hat = m / bc1
                rho_inf = 2 / (1 - b2) - 1
                rho_t = rho_inf - 2 * step * (b2 ** step) / bc2
                if rho_t > 5.0:
                    rect = ((rho_t - 4) * (rho_t - 2) * rho_inf
                            / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
                    upd = m_hat * lr * (bc2 ** 0.5 / (np.sqrt(v) + eps)) * rect
                else:
                    upd = m_hat * lr
                x -= upd.astype(x.dtype, copy=False)
                p._bump()
        return loss


class ASGD(Optimizer):
    """Averaged SGD: the running average of the iterates is ``state['ax']``; ``eta`` and
    ``mu`` (float32 scalars, as torch keeps them) follow torch's schedules."""

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0,
                 foreach=None, maximize=False, differentiable=False, capturable=False):
        _check("learning rate", lr)
        _check("weight_decay value", weight_decay)
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0,
                                      weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    def step(self, closure=None):
        """One ASGD update of every parameter with a gradient; returns the closure's loss."""
        loss = self._closure(closure)
        for g in self.param_groups:
            lr, lambd, alpha, t0, wd = (g["lr"], g["lambd"], g["alpha"], g["t0"],
                                        g["weight_decay"])
            for p, grad, x in _with_grads(g):
                st = self.state[p]
                if not st:
                    _start(st, p, "ax", scalars=(("eta", lr), ("mu", 1.0)))
                st["step"] += 1
                step = st["step"]
                grad = _decay(grad, x, lr, wd)
                eta = float(st["eta"]._data)
                x *= 1 - lambd * eta
                x -= (eta * grad).astype(x.dtype, copy=False)
                ax, mu = st["ax"]._data, float(st["mu"]._data)
                if mu != 1:
                    ax += ((x - ax) * mu).astype(ax.dtype, copy=False)
                else:
                    ax[...] = x
                st["eta"] = _scalar32(lr / ((1 + lambd * lr * step) ** alpha))
                st["mu"] = _scalar32(1 / max(1, step - t0))
                p._bump()
        return loss


class Rprop(Optimizer):
    """Resilient backpropagation: per-element step sizes grown by ``etas[1]`` while the
    gradient keeps its sign and shrunk by ``etas[0]`` when it flips, within ``step_sizes``."""

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        _check("learning rate", lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise EmberValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        super().__init__(params, dict(lr=lr, etas=tuple(etas), step_sizes=tuple(step_sizes),
                                      foreach=foreach, maximize=maximize,
                                      differentiable=differentiable, capturable=capturable))

    def step(self, closure=None):
        """One Rprop update of every parameter with a gradient; returns the closure's loss."""
        loss = self._closure(closure)
        for g in self.param_groups:
            (etaminus, etaplus), (smin, smax) = g["etas"], g["step_sizes"]
            for p, grad, x in _with_grads(g):
                grad = np.array(grad, copy=True)
                st = self.state[p]
                if not st:
                    st["step"] = 0.0
                    st["prev"] = _zeros_like(p)
                    st["step_size"] = Tensor._make(np.full_like(x, g["lr"]))
                st["step"] += 1
                prev, size = st["prev"]._data, st["step_size"]._data
                s = np.sign(grad * prev)
                factor = np.where(s > 0, etaplus, np.where(s < 0, etaminus, 1.0))
                size *= factor.astype(size.dtype, copy=False)
                np.clip(size, smin, smax, out=size)
                grad[s < 0] = 0
                x -= (np.sign(grad) * size).astype(x.dtype, copy=False)
                prev[...] = grad
                p._bump()
        return loss
