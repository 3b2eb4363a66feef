"""``ember.accelerator`` (torch.accelerator): ember is CPU-only, so there is no accelerator."""
from ember.errors import UnsupportedError

__all__ = ["is_available", "device_count", "current_accelerator", "current_device_index",
           "set_device_index", "synchronize"]


def is_available():
    """False: ember runs only on the CPU."""
    return False


def device_count():
    """0: no accelerator devices."""
    return 0


def current_accelerator(check_available=False):
    """None, as torch answers where there is no accelerator."""
    return None


def _none(who):
    raise UnsupportedError(f"ember.accelerator.{who}: ember runs only on the CPU; there is no "
                           "accelerator (ember.accelerator.is_available() is False)")


def current_device_index():
    """Raises UnsupportedError: there is no accelerator device."""
    _none("current_device_index()")


def set_device_index(device):
    """Raises UnsupportedError: there is no accelerator device."""
    _none("set_device_index()")


def synchronize(device=None):
    """Raises UnsupportedError: there is no accelerator device."""
    _none("synchronize()")
