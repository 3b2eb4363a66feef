"""Per-thread autograd and tracing state read on every dispatch."""
import threading


class _State(threading.local):
    grad_enabled = True
    inference = False
    anomaly = False
    tracer = None  # the active tracer (see ember.autograd.dispatch.Tracer protocol) or None
    autocast = None  # the active autocast region's lower-precision dtype (ember.amp) or None
    autocast_cache = True  # whether that region caches the casts of leaf tensors


STATE = _State()
