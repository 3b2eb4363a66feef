"""``torch.nn.attention``: backend selection for ``scaled_dot_product_attention``.

ember has one attention kernel on the CPU, which stands for the backends torch runs there: the
math one and the CPU flash-attention one. ``sdpa_kernel(backends)`` restricts the backends a
region may use, as torch's does; a region that allows neither ``MATH`` nor ``FLASH_ATTENTION``
has no viable backend, and ``scaled_dot_product_attention`` inside it raises, as torch's does on
a CPU. ``bias`` holds the causal biases ``scaled_dot_product_attention`` takes as
``attn_mask``."""
import contextlib
import enum

from ember.errors import EmberTypeError
from ember.nn.attention import bias  # noqa: F401

__all__ = ["SDPBackend", "sdpa_kernel"]


class SDPBackend(enum.IntEnum):
    """The attention backends (torch's names and values)."""
    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


_CPU = frozenset((SDPBackend.MATH, SDPBackend.FLASH_ATTENTION))
_allowed = None    # None: every backend; else the frozenset of the innermost region


def viable():
    """Whether the current region allows a backend ember runs (``scaled_dot_product_attention``
    asks before running)."""
    return _allowed is None or bool(_allowed & _CPU)


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority=False):
    """A region in which ``scaled_dot_product_attention`` may use only ``backends`` (one
    ``SDPBackend`` or a list). ``set_priority`` orders the backends in torch; ember has one
    kernel, so the order does not matter."""
    if isinstance(backends, SDPBackend):
        backends = [backends]
    if not isinstance(backends, (list, tuple, set, frozenset)) or \
            not all(isinstance(b, SDPBackend) for b in backends):
        raise EmberTypeError(f"sdpa_kernel: backend must be an instance of SDPBackend or a list "
                             f"of SDPBackend instances, got {type(backends).__name__}")
    global _allowed
    outer, _allowed = _allowed, frozenset(backends)
    try:
        yield {}
    finally:
        _allowed = outer
