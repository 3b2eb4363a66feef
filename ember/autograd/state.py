"""Per-thread autograd and tracing state read on every dispatch."""
import threading


class _State(threading.local):
    grad_enabled = True
    inference = False
    anomaly = False
    tracer = None  # the active tracer (see ember.autograd.dispatch.Tracer protocol) or None


STATE = _State()
