"""``ember.cpu`` (torch.cpu): the CPU device queries and ``ember.cpu.amp``."""
from ember.cpu import amp  # noqa: F401

__all__ = ["amp", "is_available", "device_count", "current_device", "synchronize"]


def is_available():
    """True: ember always runs on the CPU."""
    return True


def device_count():
    """1: the CPU is one device."""
    return 1


def current_device():
    """``"cpu"``."""
    return "cpu"


def synchronize(device=None):
    """Returns at once: CPU ops complete before they return."""
