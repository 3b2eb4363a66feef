"""``ember.xpu`` (torch.xpu): ember is CPU-only. ``is_available()`` is False and
``device_count()`` 0, as torch answers on a machine without an Intel GPU, so device-selection
code (``"xpu" if torch.xpu.is_available() else "cpu"``) picks the CPU; seeding does nothing."""

__all__ = ["is_available", "device_count", "manual_seed", "manual_seed_all"]


def is_available():
    """False: ember has no XPU backend."""
    return False


def device_count():
    """0: no XPU devices."""
    return 0


def manual_seed(seed):
    """Does nothing, as torch.xpu.manual_seed without an XPU."""


def manual_seed_all(seed):
    """Does nothing, as torch.xpu.manual_seed_all without an XPU."""
