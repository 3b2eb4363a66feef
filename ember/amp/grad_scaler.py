"""``ember.amp.GradScaler`` (torch.amp.GradScaler): loss scaling for lower-precision training.
``scale`` multiplies outputs by the scale, ``unscale_`` divides an optimizer's gradients by it
and records whether any is inf/nan, ``step`` skips the optimizer step when one was, and
``update`` backs the scale off after an overflow or grows it after ``growth_interval`` clean
steps. A disabled scaler (``enabled=False``, or ``"cuda"``: ember has no CUDA) passes through:
``scale`` returns its input, ``step`` calls ``optimizer.step()``, ``get_scale`` is 1.0."""
import warnings
from collections import abc, defaultdict
from enum import Enum

import numpy as np

from ember.errors import EmberRuntimeError, EmberValueError

__all__ = ["GradScaler", "OptState"]


class OptState(Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _refresh_per_optimizer_state():
    return {"stage": OptState.READY, "found_inf_per_device": {}}


class GradScaler:
    """``GradScaler(device="cuda", init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5,
    growth_interval=2000, enabled=True)``; use ``"cpu"`` (ember's device) for an active one."""

    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0,
                 backoff_factor=0.5, growth_interval=2000, enabled=True):
        self._device = device
        self._enabled = enabled
        if self._device == "cuda" and enabled:
            warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  "
                          "Disabling.", stacklevel=2)
            self._enabled = False
        if self._enabled:
            if growth_factor <= 1.0:
                raise EmberValueError("GradScaler: the growth factor must be > 1.0, got "
                                      f"{growth_factor}")
            if backoff_factor >= 1.0:
                raise EmberValueError("GradScaler: the backoff factor must be < 1.0, got "
                                      f"{backoff_factor}")
            self._init_scale = init_scale
            self._scale = None
            self._growth_factor = growth_factor
            self._backoff_factor = backoff_factor
            self._growth_interval = growth_interval
            self._init_growth_tracker = 0
            self._growth_tracker = None
            self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)

    def _check_scale_growth_tracker(self, funcname):
        if self._scale is None:
            raise EmberRuntimeError(
                f"Attempted {funcname} but _scale is None.  This may indicate your script did "
                "not use scaler.scale(loss or outputs) earlier in the iteration.")
        return self._scale, self._growth_tracker

    def _lazy_init_scale_growth_tracker(self):
        import ember
        self._scale = ember.full((), self._init_scale, dtype=ember.float32)
        self._growth_tracker = ember.full((), self._init_growth_tracker, dtype=ember.int32)

    def scale(self, outputs):
        """``outputs`` (a tensor, or nested lists/tuples/iterables of them) times the scale;
        unchanged when disabled."""
        if not self._enabled:
            return outputs
        from ember.tensor import Tensor
        if self._scale is None:
            self._lazy_init_scale_growth_tracker()

        def apply_scale(val):
            if isinstance(val, Tensor):
                return val * self._scale
            if isinstance(val, abc.Iterable):
                iterable = map(apply_scale, val)
                if isinstance(val, (list, tuple)):
                    return type(val)(iterable)
                return iterable
            raise EmberValueError("outputs must be a Tensor or an iterable of Tensors")
        return apply_scale(outputs)

    def _unscale_grads_(self, optimizer, inv_scale, allow_fp16):
        import ember
        found = False
        with ember.no_grad():
            for group in optimizer.param_groups:
                for param in group["params"]:
                    g = param.grad
                    if g is None:
                        continue
                    if not allow_fp16 and g.dtype == ember.float16:
                        raise EmberValueError("Attempting to unscale FP16 gradients.")
                    if not bool(np.all(np.isfinite(g._data.astype(np.float32)))):
                        found = True
                    g.mul_(inv_scale)
        return found

    def unscale_(self, optimizer):
        """Divide ``optimizer``'s gradients by the scale (in place) and record inf/nan; once per
        optimizer between ``update`` calls, before ``step``."""
        if not self._enabled:
            return
        self._check_scale_growth_tracker("unscale_")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.UNSCALED:
            raise EmberRuntimeError("unscale_() has already been called on this optimizer "
                                    "since the last update().")
        if state["stage"] is OptState.STEPPED:
            raise EmberRuntimeError("unscale_() is being called after step().")
        inv_scale = float(np.float32(1.0 / np.float64(self._scale.item())))
        state["found_inf_per_device"] = {"cpu": self._unscale_grads_(optimizer, inv_scale,
                                                                      False)}
        state["stage"] = OptState.UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """``optimizer.step(*args, **kwargs)`` unless the unscaled gradients hold inf/nan (then
        the step is skipped and None returned); unscales first if ``unscale_`` was not
        called."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise EmberRuntimeError("Closure use is not currently supported if GradScaler is "
                                    "enabled.")
        self._check_scale_growth_tracker("step")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.STEPPED:
            raise EmberRuntimeError("step() has already been called since the last update().")
        if state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        if not state["found_inf_per_device"]:
            raise EmberRuntimeError("No inf checks were recorded for this optimizer.")
        retval = None
        if not any(state["found_inf_per_device"].values()):
            retval = optimizer.step(*args, **kwargs)
        state["stage"] = OptState.STEPPED
        return retval

    def update(self, new_scale=None):
        """Set the scale for the next iteration: ``new_scale`` if given (a float or a
        one-element tensor), else back off by ``backoff_factor`` after an inf/nan, or grow by
        ``growth_factor`` after ``growth_interval`` clean iterations."""
        if not self._enabled:
            return
        from ember.tensor import Tensor
        self._check_scale_growth_tracker("update")
        if new_scale is not None:
            if isinstance(new_scale, Tensor):
                if new_scale.numel() != 1 or new_scale.requires_grad:
                    raise EmberValueError(
                        "new_scale should be a float or a 1-element torch.cuda.FloatTensor or "
                        "torch.FloatTensor with requires_grad=False.")
                self._scale.fill_(float(new_scale.item()))
            else:
                self._scale.fill_(float(new_scale))
        else:
            found = [f for s in self._per_optimizer_states.values()
                     for f in s["found_inf_per_device"].values()]
            if not found:
                raise EmberRuntimeError("No inf checks were recorded prior to update.")
            scale = np.float32(self._scale.item())
            tracker = int(self._growth_tracker.item())
            if any(found):
                scale, tracker = np.float32(scale * np.float32(self._backoff_factor)), 0
            elif tracker + 1 == self._growth_interval:
                grown = np.float32(scale * np.float32(self._growth_factor))
                if np.isfinite(grown):
                    scale = grown
                tracker = 0
            else:
                tracker += 1
            self._scale.fill_(float(scale))
            self._growth_tracker.fill_(tracker)
        self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)

    def get_scale(self):
        """The current scale as a Python float (1.0 when disabled)."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else self._scale.item()

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = new_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = new_factor

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = new_interval

    def _get_growth_tracker(self):
        if not self._enabled:
            return 0
        return (self._init_growth_tracker if self._growth_tracker is None
                else int(self._growth_tracker.item()))

    def is_enabled(self):
        """Whether this scaler scales (False when built disabled or for ``"cuda"``)."""
        return self._enabled

    def state_dict(self):
        """``{"scale", "growth_factor", "backoff_factor", "growth_interval",
        "_growth_tracker"}``; empty when disabled."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval,
                "_growth_tracker": self._get_growth_tracker()}

    def load_state_dict(self, state_dict):
        """Restore a ``state_dict()``; a disabled scaler ignores it."""
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise EmberRuntimeError("The source state dict is empty, possibly because it was "
                                    "saved from a disabled instance of GradScaler.")
        self._init_scale = state_dict["scale"]
        if self._scale is not None:
            self._scale.fill_(state_dict["scale"])
        self._growth_factor = state_dict["growth_factor"]
        self._backoff_factor = state_dict["backoff_factor"]
        self._growth_interval = state_dict["growth_interval"]
        self._init_growth_tracker = state_dict["_growth_tracker"]
        if self._growth_tracker is not None:
            self._growth_tracker.fill_(state_dict["_growth_tracker"])
