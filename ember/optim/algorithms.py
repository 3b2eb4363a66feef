"""torch's optimizers' update rules (single-tensor form) on NumPy; the math of SGD, Adam(W),
RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam, ASGD and Rprop lives in
``ember.optim._updates``, which ``ember.compile`` also traces into a captured training step.

State tensors live in ``optimizer.state[param]`` as ember Tensors (``step`` as a float); each
update writes the parameter's storage in place.
"""
import math

import numpy as np

from ember.optim import _fused
from ember.optim import _updates
from ember.optim._updates import NUMPY, adam_update, sgd_momentum_update, sgd_update
from ember.optim.optimizer import Optimizer, required
from ember.tensor import Tensor
from ember.errors import EmberRuntimeError, EmberTypeError, EmberValueError


def _real(a):
    """A complex array as its real view (..., 2), as torch's optimizers update complex
    parameters (``torch.view_as_real``); a real array itself."""
    if a.dtype.kind != "c":
        return a
    part = np.dtype(np.float32 if a.dtype == np.complex64 else np.float64)
    return np.lib.stride_tricks.as_strided(a.real, a.shape + (2,), a.strides + (part.itemsize,))


def _state(a, p):
    """A new state Tensor holding ``a`` (computed on ``p``'s real view): for a complex ``p``,
    a complex array of ``p``'s shape, as torch keeps it (the updates read it through ``_real``)."""
    if p._data.dtype.kind == "c":
        a = np.ascontiguousarray(a, dtype=_real(p._data).dtype).view(p._data.dtype)[..., 0]
    return Tensor._make(a)


def _zeros_like(p):
    return Tensor._make(np.zeros_like(p._data))


def _full_like(p, value):
    """State of ``p``'s shape and dtype filled with ``value``, in both parts of a complex ``p``
    (torch's ``complex(value, value)``: the real and imaginary parts update independently)."""
    return Tensor._make(np.full_like(p._data, complex(value, value) if p._data.dtype.kind == "c"
                                     else value))


def _grad(p, maximize):
    g = _real(p.grad._data)
    return -g if maximize else g


def _with_grads(group):
    """(parameter, its gradient array (negated under ``maximize``), its data array) for each
    parameter of ``group`` that has a gradient."""
    for p in group["params"]:
        if p.grad is not None:
            yield p, _grad(p, group["maximize"]), _real(p._data)


def _check_fused(fused, foreach, differentiable):
    """torch's checks of ``fused=True`` (Adam, AdamW, SGD, Adagrad), after the groups'."""
    if fused:
        if differentiable:
            raise EmberRuntimeError("`fused` does not support `differentiable`")
        if foreach:
            raise EmberRuntimeError("`fused` and `foreach` cannot be `True` together.")


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
        _check_fused(fused, foreach, differentiable)

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
                        buf = st["momentum_buffer"] = _state(np.array(d, x.dtype, copy=True), p)
                    b = _real(buf._data)
                    if not first and not nesterov and _fused.usable(x, d, b):
                        _fused.sgd_momentum_(x, d, b, mom, damp, lr)   # one pass
                    else:
                        sgd_momentum_update(x, d, b, mom, 1 - damp, lr, NUMPY, nesterov, first)
                p._bump()
        return loss


class Adam(Optimizer):
    """Adam (amsgrad, maximize, weight decay; ``decoupled_weight_decay`` gives AdamW)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False):
        _check_adam(lr, eps, betas, weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize, foreach=foreach, capturable=capturable,
                                      differentiable=differentiable, fused=fused,
                                      decoupled_weight_decay=decoupled_weight_decay))

        _check_fused(fused, foreach, differentiable)

    def step(self, closure=None):
        """One Adam update of every parameter with a gradient; returns the closure's loss."""
        loss = self._closure(closure)
        for i, g in enumerate(self.param_groups):
            if _multi_tensor(g):
                self._step_flat(i, g)
                continue
            lr, (b1, b2), eps, wd = g["lr"], g["betas"], g["eps"], g["weight_decay"]
            for p, grad, x in _with_grads(g):
                st = self.state[p]
                if not st:
                    _start(st, p, "exp_avg", "exp_avg_sq",
                           *(("max_exp_avg_sq",) if g["amsgrad"] else ()))
                grad = _decay(grad, x, lr, wd, g["decoupled_weight_decay"])
                st["step"] += 1
                step = st["step"]
                m, v = _real(st["exp_avg"]._data), _real(st["exp_avg_sq"]._data)
                bc2_sqrt, step_size = math.sqrt(1 - b2 ** step), lr / (1 - b1 ** step)
                if not g["amsgrad"] and _fused.usable(x, grad, m, v):  # one pass (ember.optim._fused)
                    _fused.adam_(x, grad, m, v, b1, b2, bc2_sqrt, eps, step_size)
                else:
                    adam_update(x, grad, m, v, 1 - b1, b2, 1 - b2, bc2_sqrt, eps, step_size, NUMPY,
                                _real(st["max_exp_avg_sq"]._data) if g["amsgrad"] else None)
                p._bump()
        return loss

    def _step_flat(self, i, g):
        """Update the parameters of group ``g`` (the ``i``-th) that have a gradient as one
        multi-tensor step (``fused``/``foreach``): per dtype and step count, the state kept
        flat (``_fused.FlatState``); a large parameter is updated in its own memory with its
        gradient, runs of small ones are gathered into flat arrays (``_fused.runs``), one
        update each (one compiled pass when ``_fused.usable``), the parameters written back.
        Elementwise the same operations as the per-parameter step."""
        lr, (b1, b2), eps, wd = g["lr"], g["betas"], g["eps"], g["weight_decay"]
        names = ("exp_avg", "exp_avg_sq") + (("max_exp_avg_sq",) if g["amsgrad"] else ())
        buckets = {}
        for p in g["params"]:
            if p.grad is None:
                continue
            st = self.state[p]
            if not st:
                if g["fused"] and p._data.dtype.kind != "f":
                    raise EmberRuntimeError(
                        "`fused=True` requires all the params to be floating point Tensors of "
                        f"supported devices: ['cpu'] but {p.dtype} and cpu")
                _start(st, p, *names)
            st["step"] += 1
            x = _real(p._data)
            buckets.setdefault((x.dtype, st["step"]), []).append((p, st, x))
        for (dtype, step), items in buckets.items():
            params = [p for p, _, _ in items]
            states = [st for _, st, _ in items]
            xs = [x for _, _, x in items]
            flats = self.__dict__.setdefault("_flat", {})   # not part of the pickled state
            flat = flats.get((i, dtype))
            if flat is None or not flat.current(params, states):
                flat = flats[(i, dtype)] = _fused.FlatState(params, states, names, dtype)
            bc2_sqrt, step_size = math.sqrt(1 - b2 ** step), lr / (1 - b1 ** step)
            grads = [_real(p.grad._data) for p in params]
            for j0, j1 in _fused.runs(xs, grads):
                lo, hi = flat.offsets[j0], flat.offsets[j1]
                x = _fused.gather(xs[j0:j1], hi - lo, dtype, copy=False)   # updated in place
                grad = _fused.gather(grads[j0:j1], hi - lo, dtype,
                                     copy=g["maximize"])   # maximize negates it in place
                if g["maximize"]:
                    np.negative(grad, out=grad)
                grad = _decay(grad, x, lr, wd, g["decoupled_weight_decay"])
                m, v = flat.buffers["exp_avg"][lo:hi], flat.buffers["exp_avg_sq"][lo:hi]
                if not g["amsgrad"] and _fused.usable(x, grad, m, v):
                    _fused.adam_(x, grad, m, v, b1, b2, bc2_sqrt, eps, step_size)
                else:
                    vmax = flat.buffers.get("max_exp_avg_sq")
                    adam_update(x, grad, m, v, 1 - b1, b2, 1 - b2, bc2_sqrt, eps, step_size,
                                NUMPY, None if vmax is None else vmax[lo:hi])
                _fused.scatter(x, xs[j0:j1], [o - lo for o in flat.offsets[j0:j1 + 1]])
            for p in params:
                p._bump()


def _multi_tensor(group):
    """True when ``group`` updates as one multi-tensor step: ``fused=True``, ``foreach=True``,
    or both left None (the default: the same math, elementwise, as the per-parameter loop that
    ``foreach=False`` or ``fused=False`` asks for); never with ``differentiable``."""
    if group.get("differentiable"):
        return False
    fused, foreach = group.get("fused"), group.get("foreach")
    return bool(fused or foreach) or (fused is None and foreach is None)


class AdamW(Adam):
    """Adam with decoupled weight decay (default 1e-2)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable, differentiable=differentiable,
                         fused=fused, decoupled_weight_decay=True)


class _Traceable(Optimizer):
    """An optimizer whose per-parameter update is one function of ``ember.optim._updates``
    (``update``), run by this ``step`` on arrays and traced by ``ember.compile``'s captured
    training step (``ember.compiler.step``) on the same terms: the state ``_slots`` in the
    update's order (None: unused under the group's options), the scalars from the group
    (``_scalars``) and from the step count (``_step_scalars``, after ``_advance``), the
    branch-choosing ``_flags`` (of the state and the step number the update runs at), and
    ``_finish`` after it (ASGD's schedules). Weight decay (``_decay``) and ``maximize`` come
    before the update."""

    update = None

    def _init_state(self, group, p, st):
        raise NotImplementedError(f"{type(self).__name__}: an optimizer built on _Traceable "
                                  "must define _init_state (its per-parameter state)")

    def _slots(self, group):
        raise NotImplementedError(f"{type(self).__name__}: an optimizer built on _Traceable "
                                  "must define _slots (its state names in the update's order)")

    def _scalars(self, group):
        return {}

    def _step_scalars(self, group, st):
        return {}

    def _flags(self, group, st, step):
        return {}

    def _advance(self, group, st):
        st["step"] += 1

    def _finish(self, group, st):
        pass

    def step(self, closure=None):
        """One update of every parameter with a gradient; returns the closure's loss."""
        loss = self._closure(closure)
        cls = type(self)
        update = cls.update
        per_step = cls._step_scalars is not _Traceable._step_scalars
        flags = cls._flags is not _Traceable._flags
        finish = cls._finish is not _Traceable._finish
        for g in self.param_groups:
            kw = self._scalars(g)
            kw["ops"] = NUMPY
            slots = self._slots(g)
            lr, wd = g["lr"], g.get("weight_decay", 0)
            decoupled = g.get("decoupled_weight_decay", False)
            for p, grad, x in _with_grads(g):
                st = self.state[p]
                if not st:
                    self._init_state(g, p, st)
                self._advance(g, st)
                grad = _decay(grad, x, lr, wd, decoupled)
                if per_step:
                    kw.update(self._step_scalars(g, st))
                if flags:
                    kw.update(self._flags(g, st, st["step"]))
                update(x, grad, *[_real(st[k]._data) if k else None for k in slots], **kw)
                if finish:
                    self._finish(g, st)
                p._bump()
        return loss


class RMSprop(_Traceable):
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

    update = staticmethod(_updates.rmsprop_update)

    def _init_state(self, group, p, st):
        _start(st, p, "square_avg", *(("momentum_buffer",) if group["momentum"] > 0 else ()),
               *(("grad_avg",) if group["centered"] else ()))

    def _slots(self, group):
        return ("square_avg", "grad_avg" if group["centered"] else None,
                "momentum_buffer" if group["momentum"] > 0 else None)

    def _scalars(self, group):
        return dict(alpha=group["alpha"], one_m_alpha=1 - group["alpha"], eps=group["eps"],
                    lr=group["lr"], momentum=group["momentum"])


class Adagrad(_Traceable):
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
        _check_fused(fused, foreach, differentiable)
        for g in self.param_groups:
            for p in g["params"]:
                self._init_state(g, p, self.state[p])

    update = staticmethod(_updates.adagrad_update)

    def _init_state(self, group, p, st):
        st["step"] = 0.0
        st["sum"] = _full_like(p, group["initial_accumulator_value"])

    def _slots(self, group):
        return ("sum",)

    def _scalars(self, group):
        return dict(eps=group["eps"])

    def _step_scalars(self, group, st):
        return dict(clr=group["lr"] / (1 + (st["step"] - 1) * group["lr_decay"]))


def _check_betas(betas):
    if not 0.0 <= betas[0] < 1.0:
        raise EmberValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise EmberValueError(f"Invalid beta parameter at index 1: {betas[1]}")


def _check_adam(lr, eps, betas, weight_decay):
    """The hyper-parameter checks of the Adam family, in torch's order."""
    _check("learning rate", lr)
    _check("epsilon value", eps)
    _check_betas(betas)
    _check("weight_decay value", weight_decay)


def _adam_scalars(group):
    """The per-group scalars of an update with both of Adam's moments (NAdam, RAdam)."""
    b1, b2 = group["betas"]
    return dict(one_m_b1=1 - b1, b2=b2, one_m_b2=1 - b2, eps=group["eps"])


def _scalar32(value):
    """A 0-d float32 state Tensor, as torch keeps its scalar state (eta, mu, mu_product)."""
    return Tensor._make(np.array(value, np.float32))


class Adadelta(_Traceable):
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

    update = staticmethod(_updates.adadelta_update)

    def _init_state(self, group, p, st):
        _start(st, p, "square_avg", "acc_delta")

    def _slots(self, group):
        return ("square_avg", "acc_delta")

    def _scalars(self, group):
        return dict(rho=group["rho"], one_m_rho=1 - group["rho"], eps=group["eps"],
                    lr=group["lr"])


class Adamax(_Traceable):
    """Adamax: Adam with the infinity norm of past gradients in the denominator."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False, differentiable=False, capturable=False):
        _check_adam(lr, eps, betas, weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    update = staticmethod(_updates.adamax_update)

    def _init_state(self, group, p, st):
        _start(st, p, "exp_avg", "exp_inf")

    def _slots(self, group):
        return ("exp_avg", "exp_inf")

    def _scalars(self, group):
        b1, b2 = group["betas"]
        return dict(one_m_b1=1 - b1, b2=b2, eps=group["eps"])

    def _step_scalars(self, group, st):
        return dict(clr=group["lr"] / (1 - group["betas"][0] ** st["step"]))


class NAdam(_Traceable):
    """NAdam: Adam with Nesterov momentum and a momentum schedule (``momentum_decay``);
    ``decoupled_weight_decay`` decays the weights as AdamW does."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, *, foreach=None,
                 maximize=False, capturable=False, differentiable=False):
        _check_adam(lr, eps, betas, weight_decay)
        _check("momentum_decay value", momentum_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, momentum_decay=momentum_decay,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize, foreach=foreach, capturable=capturable,
                                      differentiable=differentiable))

    update = staticmethod(_updates.nadam_update)

    def _init_state(self, group, p, st):
        _start(st, p, "exp_avg", "exp_avg_sq", scalars=(("mu_product", 1.0),))

    def _slots(self, group):
        return ("exp_avg", "exp_avg_sq")

    def _scalars(self, group):
        return _adam_scalars(group)

    @staticmethod
    def _mu(group, step):
        return group["betas"][0] * (1.0 - 0.5 * 0.96 ** (step * group["momentum_decay"]))

    def _advance(self, group, st):
        """The step count, and the product of the momentum schedule (torch keeps it as a
        float32 scalar and multiplies it in float32)."""
        st["step"] += 1
        st["mu_product"] = _scalar32(np.float32(np.asarray(st["mu_product"]._data, np.float32)
                                                * np.float32(self._mu(group, st["step"]))))

    def _step_scalars(self, group, st):
        step, lr = st["step"], group["lr"]
        mu, mu_next = self._mu(group, step), self._mu(group, step + 1)
        mu_prod = float(st["mu_product"]._data)
        return dict(bc2=1 - group["betas"][1] ** step,
                    c_grad=(-lr * (1.0 - mu) / (1.0 - mu_prod)),
                    c_avg=((-lr * mu_next) / (1.0 - mu_prod * mu_next)))


class RAdam(_Traceable):
    """RAdam: Adam with the variance of the adaptive learning rate rectified (plain momentum
    SGD while it is intractable, ``rho_t <= 5``); ``decoupled_weight_decay`` as AdamW."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False,
                 capturable=False, differentiable=False):
        _check_adam(lr, eps, betas, weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, maximize=maximize,
                                      foreach=foreach, capturable=capturable,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      differentiable=differentiable))

    update = staticmethod(_updates.radam_update)

    def _init_state(self, group, p, st):
        _start(st, p, "exp_avg", "exp_avg_sq")

    def _slots(self, group):
        return ("exp_avg", "exp_avg_sq")

    def _scalars(self, group):
        return _adam_scalars(group)

    @staticmethod
    def _rho(group, step):
        """(rho_t, rho_inf): the length of the approximated simple moving average."""
        b2 = group["betas"][1]
        rho_inf = 2 / (1 - b2) - 1
        return rho_inf - 2 * step * (b2 ** step) / (1 - b2 ** step), rho_inf

    def _step_scalars(self, group, st):
        step = st["step"]
        (b1, b2), lr = group["betas"], group["lr"]
        rho_t, rho_inf = self._rho(group, step)
        rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) \
            ** 0.5 if rho_t > 5.0 else 0.0
        return dict(step_size=lr / (1 - b1 ** step), adapt=(1 - b2 ** step) ** 0.5 * rect)

    def _flags(self, group, st, step):
        return dict(rectified=self._rho(group, step)[0] > 5.0)


class ASGD(_Traceable):
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

    update = staticmethod(_updates.asgd_update)

    def _init_state(self, group, p, st):
        _start(st, p, "ax", scalars=(("eta", group["lr"]), ("mu", 1.0)))

    def _slots(self, group):
        return ("ax",)

    def _step_scalars(self, group, st):
        """``eta`` and ``mu`` as the previous step left them (float32, as torch)."""
        eta = float(st["eta"]._data)
        return dict(decay=1 - group["lambd"] * eta, eta=eta, mu=float(st["mu"]._data))

    def _flags(self, group, st, step):
        return dict(averaging=float(st["mu"]._data) != 1)

    def _finish(self, group, st):
        """torch's schedules of ``eta`` and ``mu`` for the next step."""
        lr, step = group["lr"], st["step"]
        st["eta"] = _scalar32(lr / ((1 + group["lambd"] * lr * step) ** group["alpha"]))
        st["mu"] = _scalar32(1 / max(1, step - group["t0"]))


class Rprop(_Traceable):
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

    update = staticmethod(_updates.rprop_update)

    def _init_state(self, group, p, st):
        st["step"] = 0.0
        st["prev"] = _zeros_like(p)
        st["step_size"] = _full_like(p, group["lr"])

    def _slots(self, group):
        return ("prev", "step_size")

    def _scalars(self, group):
        (etaminus, etaplus), (smin, smax) = group["etas"], group["step_sizes"]
        return dict(etaminus=etaminus, etaplus=etaplus, step_min=smin, step_max=smax)
