"""``ember.mps`` (torch.mps): ember is CPU-only. Seeding does nothing, as torch's on a machine
without Apple's MPS backend (``torch.backends.mps.is_available()`` is False there, and in
ember); ``empty_cache`` and ``synchronize`` need the backend and raise, as torch's do."""
from ember.errors import EmberRuntimeError

__all__ = ["manual_seed", "seed", "device_count", "empty_cache", "synchronize"]


def manual_seed(seed):
    """Does nothing, as torch.mps.manual_seed without MPS."""


def seed():
    """Does nothing, as torch.mps.seed without MPS."""


def device_count():
    """0: no MPS device."""
    return 0


def empty_cache():
    raise EmberRuntimeError("Cannot execute emptyCache() without MPS backend.")


def synchronize():
    raise EmberRuntimeError("Cannot execute deviceSynchronize() without MPS backend.")
