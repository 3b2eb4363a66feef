"""``ember.cuda.amp`` (torch.cuda.amp, deprecated in torch): ember has no CUDA, so
``autocast`` and ``GradScaler`` warn and are disabled, as torch on a machine without CUDA
(the scaler passes through: ``scale`` returns its input, ``step`` steps)."""
from ember.amp._deprecated import CudaAutocast as autocast  # noqa: F401
from ember.amp._deprecated import CudaGradScaler as GradScaler  # noqa: F401
from ember.amp.autocast_mode import custom_bwd as _custom_bwd, custom_fwd as _custom_fwd

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd"]


def custom_fwd(fwd=None, *, cast_inputs=None):
    """``torch.cuda.amp.custom_fwd``: ``ember.amp.custom_fwd(device_type="cuda")``."""
    return _custom_fwd(fwd, device_type="cuda", cast_inputs=cast_inputs)


def custom_bwd(bwd=None):
    """``torch.cuda.amp.custom_bwd``: ``ember.amp.custom_bwd(device_type="cuda")``."""
    return _custom_bwd(bwd, device_type="cuda")
