"""``ember.cpu.amp`` (torch.cpu.amp, deprecated in torch): ``autocast`` and ``GradScaler``
for the CPU, each warning as torch and forwarding to ``ember.amp``."""
from ember.amp._deprecated import CpuAutocast as autocast  # noqa: F401
from ember.amp._deprecated import CpuGradScaler as GradScaler  # noqa: F401

__all__ = ["autocast", "GradScaler"]
