"""``ember.cuda`` (torch.cuda): ember is CPU-only. The queries answer as torch does on a machine
without CUDA (``is_available()`` False, ``device_count()`` 0, seeding and ``empty_cache`` do
nothing, the memory counters are 0); anything that needs a CUDA device raises
UnsupportedError."""
import sys as _sys

from ember.errors import UnsupportedError

# ``ember.cuda.amp`` (torch.cuda.amp): warns and is disabled, as torch without CUDA
from ember.amp import cuda_amp as amp  # noqa: E402
_sys.modules[__name__ + ".amp"] = amp

__all__ = ["is_available", "device_count", "is_initialized", "manual_seed", "manual_seed_all",
           "seed", "seed_all", "get_rng_state_all", "set_rng_state_all", "empty_cache",
           "current_device", "set_device", "get_device_name",
           "get_device_properties", "get_device_capability", "synchronize", "is_bf16_supported",
           "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
           "init", "amp"]


def _no_cuda(who):
    raise UnsupportedError(f"ember.cuda.{who}: ember runs only on the CPU; CUDA is not "
                           "available (ember.cuda.is_available() is False)")


def is_available():
    """False: ember has no CUDA backend."""
    return False


def device_count():
    """0: no CUDA devices."""
    return 0


def is_initialized():
    """False: CUDA is never initialised."""
    return False


def is_bf16_supported(including_emulation=True):
    """False: there is no CUDA device."""
    return False


def manual_seed(seed):
    """Does nothing, as torch.cuda.manual_seed without CUDA (seed the CPU generator with
    ember.manual_seed)."""


def manual_seed_all(seed):
    """Does nothing, as torch.cuda.manual_seed_all without CUDA."""


def seed():
    """Does nothing, as torch.cuda.seed without CUDA."""


def seed_all():
    """Does nothing, as torch.cuda.seed_all without CUDA."""


def get_rng_state_all():
    """[]: one state per CUDA device, and there are none (torch without CUDA)."""
    return []


def set_rng_state_all(new_states):
    """Does nothing, as torch.cuda.set_rng_state_all without CUDA (for each of no devices)."""


def empty_cache():
    """Does nothing: there is no CUDA memory cache."""


def init():
    """Raises UnsupportedError: CUDA cannot be initialised."""
    _no_cuda("init()")


def current_device():
    """Raises UnsupportedError: there is no CUDA device."""
    _no_cuda("current_device()")


def set_device(device):
    """Raises UnsupportedError: there is no CUDA device."""
    _no_cuda("set_device()")


def get_device_name(device=None):
    """Raises UnsupportedError: there is no CUDA device."""
    _no_cuda("get_device_name()")


def get_device_properties(device=None):
    """Raises UnsupportedError: there is no CUDA device."""
    _no_cuda("get_device_properties()")


def get_device_capability(device=None):
    """Raises UnsupportedError: there is no CUDA device."""
    _no_cuda("get_device_capability()")


def synchronize(device=None):
    """Raises UnsupportedError: there is no CUDA device."""
    _no_cuda("synchronize()")


def memory_allocated(device=None):
    """0, as torch.cuda.memory_allocated without CUDA (no CUDA memory: programs log it)."""
    return 0


def max_memory_allocated(device=None):
    """0, as torch.cuda.max_memory_allocated without CUDA."""
    return 0


def memory_reserved(device=None):
    """0, as torch.cuda.memory_reserved without CUDA."""
    return 0


def max_memory_reserved(device=None):
    """0, as torch.cuda.max_memory_reserved without CUDA."""
    return 0
