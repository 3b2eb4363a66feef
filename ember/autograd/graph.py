"""``torch.autograd.graph``: hooks on the tensors autograd saves for backward
(``saved_tensors_hooks``, ``save_on_cpu``, ``disable_saved_tensors_hooks``), ``Node``,
``increment_version``.

Inside ``saved_tensors_hooks(pack_hook, unpack_hook)`` every tensor an op saves for its
backward is handed to ``pack_hook`` and only what it returns is kept; the backward calls
``unpack_hook`` on that to get the tensor back (activation offloading, compression). The
innermost active pair applies; a pack of an op's own output is rebuilt with the op as its
``grad_fn`` when unpacked.
"""
from ember.autograd.node import Node
from ember.autograd.state import STATE
from ember.errors import EmberRuntimeError

__all__ = ["saved_tensors_hooks", "save_on_cpu", "disable_saved_tensors_hooks", "Node",
           "increment_version"]


class saved_tensors_hooks:
    """Context manager: ``pack_hook(tensor) -> object`` when autograd saves ``tensor`` for
    backward, ``unpack_hook(object) -> tensor`` when the backward reads it."""

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self):
        if STATE.saved_hooks_disabled is not None:
            raise EmberRuntimeError(STATE.saved_hooks_disabled)
        STATE.saved_hooks = STATE.saved_hooks + ((self.pack_hook, self.unpack_hook),)
        return self

    def __exit__(self, *exc):
        STATE.saved_hooks = STATE.saved_hooks[:-1]


class save_on_cpu(saved_tensors_hooks):
    """Saved tensors are kept as copies in CPU memory (ember's only device: a copy, so a later
    in-place change of the original does not reach the backward)."""

    def __init__(self, pin_memory=False, device_type="cuda"):
        super().__init__(lambda t: t.detach().clone(), lambda packed: packed)


class disable_saved_tensors_hooks:
    """Context manager: entering ``saved_tensors_hooks`` inside raises ``error_message``."""

    def __init__(self, error_message):
        self.error_message = error_message

    def __enter__(self):
        self._prev = STATE.saved_hooks_disabled
        STATE.saved_hooks_disabled = self.error_message
        return self

    def __exit__(self, *exc):
        STATE.saved_hooks_disabled = self._prev


def increment_version(tensor):
    """Bump ``tensor``'s version counter, as an in-place write would (a backward that saved it
    then refuses it)."""
    tensors = tensor if isinstance(tensor, (list, tuple)) else (tensor,)
    for t in tensors:
        t._bump()
