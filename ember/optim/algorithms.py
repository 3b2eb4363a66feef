"""SGD, Adam, AdamW, RMSprop, Adagrad: torch's update rules (single-tensor form) on NumPy.

State tensors live in ``optimizer.state[param]`` as ember Tensors (``step`` as a float); each
update writes the parameter's storage in place.
"""
import math

import numpy as np

from ember.optim import _fused
from ember.optim.optimizer import Optimizer, required
from ember.tensor import Tensor
from ember.errors import EmberTypeError, EmberValueError


def _zeros_like(p):
    return Tensor._make(np.zeros_like(p._data))


def _grad(p, maximize):
    g = p.grad._data
    return -g if maximize else g


def _check(name, value, low=0.0):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            and not hasattr(value, "_data"):
        raise EmberTypeError(f"Invalid {name}: expected a number, got {type(value).__name__}")
    if not value >= low:  # NaN too
        raise EmberValueError(f"Invalid {name}: {value}")


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
            for p in g["params"]:
                if p.grad is None:
                    continue
                d = _grad(p, g["maximize"])
                x = p._data
                if wd != 0:
                    d = d + wd * x
                if mom != 0:
                    st = self.state[p]
                    buf = st.get("momentum_buffer")
                    if buf is None:
                        buf = st["momentum_buffer"] = Tensor._make(np.array(d, x.dtype, copy=True))
                    else:
                        b = buf._data
                        b *= mom
                        b += (1 - damp) * d
                    d = d + mom * buf._data if nesterov else buf._data
                x -= (lr * d).astype(x.dtype, copy=False)
                p._bump()
        return loss


class Adam(Optimizer):
    """Adam (amsgrad, maximize, weight decay; ``decoupled_weight_decay`` gives AdamW)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False):
        _check("learning rate", lr)
        _check("epsilon value", eps)
        if not 0.0 <= betas[0] < 1.0:
            raise EmberValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise EmberValueError(f"Invalid beta parameter at index 1: {betas[1]}")
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
            for p in g["params"]:
                if p.grad is None:
                    continue
                grad = _grad(p, g["maximize"])
                x = p._data
                st = self.state[p]
                if not st:
                    st["step"] = 0.0
                    st["exp_avg"] = _zeros_like(p)
                    st["exp_avg_sq"] = _zeros_like(p)
                    if g["amsgrad"]:
                        st["max_exp_avg_sq"] = _zeros_like(p)
                if wd != 0:
                    if g["decoupled_weight_decay"]:
                        x *= 1 - lr * wd
                    else:
                        grad = grad + wd * x
                st["step"] += 1
                step = st["step"]
                m, v = st["exp_avg"]._data, st["exp_avg_sq"]._data
                if not g["amsgrad"] and _fused.usable(x, grad, m, v):  # one pass (ember.optim._fused)
                    _fused.adam_(x, grad, m, v, b1, b2, math.sqrt(1 - b2 ** step), eps,
                                 lr / (1 - b1 ** step))
                    p._bump()
                    continue
                m += (grad - m) * (1 - b1)
                v *= b2
                v += (1 - b2) * grad * grad
                bc1 = 1 - b1 ** step
                bc2_sqrt = math.sqrt(1 - b2 ** step)
                if g["amsgrad"]:
                    vm = st["max_exp_avg_sq"]._data
                    np.maximum(vm, v, out=vm)
                    denom = np.sqrt(vm) / bc2_sqrt + eps
                else:
                    denom = np.sqrt(v) / bc2_sqrt + eps
                x -= ((lr / bc1) * m / denom).astype(x.dtype, copy=False)
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
            for p in g["params"]:
                if p.grad is None:
                    continue
                grad = _grad(p, g["maximize"])
                x = p._data
                st = self.state[p]
                if not st:
                    st["step"] = 0.0
                    st["square_avg"] = _zeros_like(p)
                    if mom > 0:
                        st["momentum_buffer"] = _zeros_like(p)
                    if g["centered"]:
                        st["grad_avg"] = _zeros_like(p)
                st["step"] += 1
                if wd != 0:
                    grad = grad + wd * x
                sq = st["square_avg"]._data
                sq *= alpha
                sq += (1 - alpha) * grad * grad
                if g["centered"]:
                    ga = st["grad_avg"]._data
                    ga += (grad - ga) * (1 - alpha)
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
                st["sum"] = Tensor._make(np.full_like(p._data, initial_accumulator_value))

    def step(self, closure=None):
        loss = self._closure(closure)
        for g in self.param_groups:
            for p in g["params"]:
                if p.grad is None:
                    continue
                grad = _grad(p, g["maximize"])
                x = p._data
                st = self.state[p]
                st["step"] += 1
                if g["weight_decay"] != 0:
                    grad = grad + g["weight_decay"] * x
                clr = g["lr"] / (1 + (st["step"] - 1) * g["lr_decay"])
                s = st["sum"]._data
                s += grad * grad
                x -= (clr * grad / (np.sqrt(s) + g["eps"])).astype(x.dtype, copy=False)
                p._bump()
        return loss
