"""torch's deprecated device-specific spellings: ``ember.cpu.amp`` and ``ember.cuda.amp``
(``autocast(enabled=True, dtype=..., cache_enabled=True)`` and ``GradScaler(...)``), each with
torch's FutureWarning; the cuda ones are disabled (ember has no CUDA), as torch without CUDA."""
import warnings

from ember import _dtype
from ember.amp import autocast_mode as _am
from ember.amp.grad_scaler import GradScaler as _GradScaler


def _deprecated(spelled, device, what):
    warnings.warn(f"`{spelled}(args...)` is deprecated. Please use "
                  f"`torch.amp.{what}('{device}', args...)` instead.", FutureWarning, stacklevel=3)


class CpuAutocast(_am.autocast):
    """``ember.cpu.amp.autocast(enabled=True, dtype=ember.bfloat16, cache_enabled=True)``:
    ``ember.amp.autocast("cpu", ...)``."""

    def __init__(self, enabled=True, dtype=None, cache_enabled=True):
        _deprecated("torch.cpu.amp.autocast", "cpu", "autocast")
        dtype = _dtype.bfloat16_dtype() if dtype is None else dtype
        super().__init__("cpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class CudaAutocast(_am.autocast):
    """``ember.cuda.amp.autocast(enabled=True, dtype=ember.float16, cache_enabled=True)``:
    warns and is disabled (no CUDA)."""

    def __init__(self, enabled=True, dtype=_dtype.float16, cache_enabled=True):
        _deprecated("torch.cuda.amp.autocast", "cuda", "autocast")
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class CpuGradScaler(_GradScaler):
    """``ember.cpu.amp.GradScaler(...)``: ``ember.amp.GradScaler("cpu", ...)``."""

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        _deprecated("torch.cpu.amp.GradScaler", "cpu", "GradScaler")
        super().__init__("cpu", init_scale, growth_factor, backoff_factor, growth_interval,
                         enabled)


class CudaGradScaler(_GradScaler):
    """``ember.cuda.amp.GradScaler(...)``: warns and is disabled (no CUDA): a pass-through
    whose ``step`` calls ``optimizer.step()``."""

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        _deprecated("torch.cuda.amp.GradScaler", "cuda", "GradScaler")
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval,
                         enabled)
