"""Per-thread autograd and tracing state read on every dispatch."""
import threading


class _State(threading.local):
    grad_enabled = True
    inference = False
    anomaly = False
    tracer = None  # the active tracer (see ember.autograd.dispatch.Tracer protocol) or None
    autocast = None  # the active autocast region's lower-precision dtype (ember.amp) or None
    autocast_cache = True  # whether that region caches the casts of leaf tensors
    saved_hooks = ()  # (pack_hook, unpack_hook) pairs of saved_tensors_hooks, innermost last
    saved_hooks_disabled = None  # disable_saved_tensors_hooks' message while it is active


STATE = _State()
