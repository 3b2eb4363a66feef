"""Stochastic Weight Averaging and EMA (torch's ``torch.optim.swa_utils``): ``AveragedModel``
keeps a running average of a model's parameters (and optionally its buffers), ``SWALR`` anneals
each group's lr to a fixed SWA lr, ``update_bn`` recomputes BatchNorm statistics with one pass
over the data, and the ``get_*_avg_fn`` factories make the averaging functions.

The averages are the same operations as torch's on a CPU (torch's per-parameter SWA update
``avg + (p - avg) / (n + 1)``, EMA as ``lerp``), so results agree with torch's to rounding.
"""
import copy
import math
import numbers

import numpy as np

from ember.autograd.grad_mode import no_grad
from ember.nn.modules.batchnorm import _BatchNorm
from ember.nn.modules.module import Module
from ember.optim.lr_scheduler import LRScheduler
from ember.optim.optimizer import Optimizer
from ember.tensor import Tensor, check_device
from ember.errors import EmberTypeError, EmberValueError

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn",
           "get_swa_multi_avg_fn", "get_ema_avg_fn", "get_swa_avg_fn"]


def _check_decay(who, decay):
    if not isinstance(decay, (numbers.Real, Tensor)):
        raise EmberTypeError(f"{who}: decay must be a number, got {type(decay).__name__}")
    if not 0.0 <= float(decay) <= 1.0:
        raise EmberValueError(f"{who}: Invalid decay value {decay} provided. Please provide a "
                              "value in [0,1] range.")


def _is_float(t):
    return t.is_floating_point() or t.is_complex()


def get_ema_multi_avg_fn(decay=0.999):
    """The in-place EMA update of a list of averaged tensors towards the model's:
    ``ema = decay * ema + (1 - decay) * current`` (``lerp_`` for floating tensors), for
    ``AveragedModel(multi_avg_fn=...)``. ``decay`` must lie in [0, 1]."""
    _check_decay("get_ema_multi_avg_fn", decay)

    def ema_update(ema_param_list, current_param_list, _num_averaged):
        with no_grad():
            if _is_float(ema_param_list[0]):
                for p_ema, p_model in zip(ema_param_list, current_param_list):
                    p_ema.lerp_(p_model, 1 - decay)
            else:
                for p_ema, p_model in zip(ema_param_list, current_param_list):
                    p_ema.copy_(p_ema * decay + p_model * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn():
    """The in-place equal-weight (SWA) update of a list of averaged tensors with the model's:
    ``avg += (current - avg) / (num_averaged + 1)``, for ``AveragedModel(multi_avg_fn=...)``."""

    def swa_update(averaged_param_list, current_param_list, num_averaged):
        with no_grad():
            if _is_float(averaged_param_list[0]):
                weight = 1 / (num_averaged + 1)
                for p_avg, p_model in zip(averaged_param_list, current_param_list):
                    p_avg.lerp_(p_model, weight)
            else:   # integer buffers: the mean truncated into the buffer's dtype
                for p_avg, p_model in zip(averaged_param_list, current_param_list):
                    p_avg.copy_(p_avg + (p_model - p_avg) / (num_averaged + 1))

    return swa_update


def get_ema_avg_fn(decay=0.999):
    """The EMA of one tensor, ``decay * ema + (1 - decay) * current`` (a new tensor), for
    ``AveragedModel(avg_fn=...)``. ``decay`` must lie in [0, 1]."""
    _check_decay("get_ema_avg_fn", decay)

    def ema_update(ema_param, current_param, _num_averaged):
        with no_grad():
            return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn():
    """The equal-weight (SWA) average of one tensor, ``avg + (current - avg) /
    (num_averaged + 1)`` (a new tensor), for ``AveragedModel(avg_fn=...)``."""

    def swa_update(averaged_param, current_param, num_averaged):
        with no_grad():
            return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


def _by_dtype(pairs):
    """The (averaged, current) pairs as lists grouped by dtype (in order of first appearance),
    as torch groups them for a ``multi_avg_fn``."""
    groups = {}
    for a, c in pairs:
        lists = groups.setdefault(a.dtype, ([], []))
        lists[0].append(a)
        lists[1].append(c)
    return groups.values()


class AveragedModel(Module):
    """A copy of ``model`` whose parameters (and buffers with ``use_buffers=True``) are a
    running average of ``model``'s, updated by ``update_parameters(model)``: equal weights
    (SWA) by default, or ``avg_fn(averaged, current, n_averaged)`` returning the new value, or
    ``multi_avg_fn(averaged_list, current_list, n_averaged)`` updating in place (one of the
    two). The first update copies ``model``; ``n_averaged`` (an int64 buffer) counts the
    updates. Calling it runs the copy's forward. Without ``use_buffers`` the buffers follow
    ``model``'s (recompute BatchNorm statistics with ``update_bn``). ``device`` may only be the
    cpu. The state dict holds ``n_averaged`` and ``module.<name>``, as torch's."""

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise EmberValueError("AveragedModel: Only one of avg_fn and multi_avg_fn should be "
                                  "provided")
        if not isinstance(model, Module):
            raise EmberTypeError("AveragedModel: model must be an ember.nn.Module, got "
                                 f"{type(model).__name__}")
        check_device(device, "AveragedModel")
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", Tensor._make(np.array(0, np.int64)))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        """The wrapped copy's forward."""
        return self.module(*args, **kwargs)

    def update_parameters(self, model):
        """Average ``model``'s parameters (and buffers with ``use_buffers``) into this copy's;
        the first call copies them. Without ``use_buffers`` the buffers are copied."""
        if not isinstance(model, Module):
            raise EmberTypeError("AveragedModel.update_parameters: model must be an "
                                 f"ember.nn.Module, got {type(model).__name__}")
        if self.use_buffers:
            mine = [*self.module.parameters(), *self.module.buffers()]
            theirs = [*model.parameters(), *model.buffers()]
        else:
            mine, theirs = list(self.parameters()), list(model.parameters())
            my_buffers, their_buffers = list(self.module.buffers()), list(model.buffers())
            if len(my_buffers) != len(their_buffers):
                raise EmberValueError(
                    f"AveragedModel.update_parameters: model has {len(their_buffers)} buffers, "
                    f"the averaged model {len(my_buffers)}")
        pairs = [(a.detach(), c.detach()) for a, c in zip(mine, theirs)]   # as torch: zip
        n = self.n_averaged
        count = int(n)   # as torch, a negative count (an edited state) neither copies nor averages
        with no_grad():
            if count == 0:
                for a, c in pairs:
                    a.copy_(c)
            elif count > 0 and self.multi_avg_fn is not None:
                for averaged, current in _by_dtype(pairs):
                    self.multi_avg_fn(averaged, current, n)
            elif count > 0:
                avg_fn = self.avg_fn if self.avg_fn is not None else get_swa_avg_fn()
                for a, c in pairs:
                    a.copy_(avg_fn(a, c, n))
            if not self.use_buffers:   # the buffers follow the model's
                for b_mine, b_theirs in zip(my_buffers, their_buffers):
                    b_mine.copy_(b_theirs.detach())
            n.add_(1)


def update_bn(loader, model, device=None):
    """Recompute the running mean and variance of ``model``'s BatchNorm layers with one pass
    over ``loader`` (batches are tensors, or lists / tuples whose first element is the input),
    in train mode with cumulative averages (``momentum=None``); each layer's momentum and the
    model's mode are restored after. ``device``: where to move each batch (only the cpu)."""
    if not isinstance(model, Module):
        raise EmberTypeError(f"update_bn: model must be an ember.nn.Module, got "
                             f"{type(model).__name__}")
    check_device(device, "update_bn")
    layers = [m for m in model.modules() if isinstance(m, _BatchNorm)]
    if not layers:
        return
    momenta = [m.momentum for m in layers]
    for m in layers:
        m.reset_running_stats()
    was_training = model.training
    model.train()
    for m in layers:
        m.momentum = None
    try:
        with no_grad():
            for batch in loader:
                if isinstance(batch, (list, tuple)):
                    batch = batch[0]
                if device is not None:
                    batch = batch.to(device)
                model(batch)
    finally:
        for m, momentum in zip(layers, momenta):
            m.momentum = momentum
        model.train(was_training)


class SWALR(LRScheduler):
    """Anneal each group's lr to its ``swa_lr`` (one value, or one per group) over
    ``anneal_epochs`` steps, by cosine (``anneal_strategy="cos"``) or linearly (``"linear"``),
    then keep it there; the lr sequence is torch's. Use with ``AveragedModel`` late in
    training."""

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos",
                 last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise EmberTypeError(f"SWALR: {type(optimizer).__name__} is not an Optimizer")
        n = len(optimizer.param_groups)
        if isinstance(swa_lr, (list, tuple)):
            if len(swa_lr) != n:
                raise EmberValueError(
                    "SWALR: swa_lr must have the same length as optimizer.param_groups. swa_lr "
                    f"has {len(swa_lr)} values, param_groups has {n}.")
            swa_lrs = list(swa_lr)
        else:
            swa_lrs = [swa_lr] * n
        if anneal_strategy not in ("cos", "linear"):
            raise EmberValueError("SWALR: anneal_strategy must be one of 'cos' or 'linear', "
                                  f"instead got {anneal_strategy}")
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise EmberValueError("SWALR: anneal_epochs must be equal or greater than 0, got "
                                  f"{anneal_epochs}")
        for lr, group in zip(swa_lrs, optimizer.param_groups):
            group["swa_lr"] = lr
        self._set_anneal_func(anneal_strategy)
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t):
        return t

    @staticmethod
    def _cosine_anneal(t):
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        """The lr the schedule started from, given the current ``lr`` at fraction ``alpha``."""
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def _set_anneal_func(self, anneal_strategy):
        self._anneal_strategy = anneal_strategy
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" \
            else self._linear_anneal

    def get_lr(self):
        """Each group's next lr: recover the start lr from the current one at the previous
        step's fraction, then interpolate towards ``swa_lr`` at this step's."""
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        span = max(1, self.anneal_epochs)
        prev_alpha = self.anneal_func(max(0, min(1, (step - 1) / span)))
        alpha = self.anneal_func(max(0, min(1, step / span)))
        groups = self.optimizer.param_groups
        starts = [self._get_initial_lr(g["lr"], g["swa_lr"], prev_alpha) for g in groups]
        return [g["swa_lr"] * alpha + lr * (1 - alpha) for g, lr in zip(groups, starts)]

    def state_dict(self):
        """Every attribute but the optimizer and the anneal function (its strategy is kept)."""
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict):
        """Restore a ``state_dict()``, the anneal function from its strategy."""
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)
