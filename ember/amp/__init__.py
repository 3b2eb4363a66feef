"""``ember.amp`` (torch.amp): automatic mixed precision on the CPU. ``autocast`` runs torch's
lower-precision ops in bfloat16/float16 and its float32 ops in float32 (ember.autograd.autocast
holds the rule); ``GradScaler`` scales losses and skips steps whose gradients overflow.
See docs/amp.md."""
from ember.amp.autocast_mode import (autocast, custom_bwd, custom_fwd,  # noqa: F401
                                     is_autocast_available)
from ember.amp.grad_scaler import GradScaler  # noqa: F401

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd", "is_autocast_available"]
