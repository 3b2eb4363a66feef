"""Grad-mode switches: no_grad, enable_grad, set_grad_enabled, inference_mode, detect_anomaly."""
import functools

from ember.autograd.state import STATE


class _GradModeContext:
    """Base for context managers that are also decorators."""

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__(*self._ctor_args):
                return fn(*args, **kwargs)

        return wrapper

    _ctor_args = ()


class no_grad(_GradModeContext):
    """Disable gradient recording inside the block or decorated function."""

    def __enter__(self):
        self._prev = STATE.grad_enabled
        STATE.grad_enabled = False

    def __exit__(self, *exc):
        STATE.grad_enabled = self._prev


class enable_grad(_GradModeContext):
    """Enable gradient recording inside the block or decorated function."""

    def __enter__(self):
        self._prev = STATE.grad_enabled
        STATE.grad_enabled = True

    def __exit__(self, *exc):
        STATE.grad_enabled = self._prev


class set_grad_enabled(_GradModeContext):
    """Set gradient recording on or off; usable as a call, a context manager or a decorator."""

    def __init__(self, mode):
        self._ctor_args = (mode,)
        self._prev = STATE.grad_enabled
        STATE.grad_enabled = bool(mode)

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        STATE.grad_enabled = self._prev


class inference_mode(_GradModeContext):
    """Like no_grad, and tensors made inside are marked as inference tensors.
    ``inference_mode(False)`` leaves inference mode and turns gradients on, as torch's (also
    inside ``no_grad``)."""

    def __init__(self, mode=True):
        self._ctor_args = (mode,)
        self.mode = mode

    def __enter__(self):
        self._prev = (STATE.grad_enabled, STATE.inference)
        STATE.grad_enabled = not self.mode
        STATE.inference = bool(self.mode)

    def __exit__(self, *exc):
        STATE.grad_enabled, STATE.inference = self._prev


class detect_anomaly(_GradModeContext):
    """Record the creating stack of every backward node and raise on NaN gradients."""

    def __init__(self, check_nan=True):
        self._ctor_args = (check_nan,)
        self.check_nan = check_nan
        import warnings
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime "
                      "and should only be enabled for debugging.", UserWarning, stacklevel=2)

    def __enter__(self):
        self._prev = STATE.anomaly
        STATE.anomaly = "nan" if self.check_nan else True

    def __exit__(self, *exc):
        STATE.anomaly = self._prev


def is_grad_enabled():
    """Return whether gradient recording is on in this thread."""
    return STATE.grad_enabled


def is_inference_mode_enabled():
    """Return whether inference mode is on in this thread."""
    return STATE.inference


def is_anomaly_enabled():
    """torch.is_anomaly_enabled: whether anomaly detection (``detect_anomaly``) is on."""
    return bool(STATE.anomaly)


def is_anomaly_check_nan_enabled():
    """torch.is_anomaly_check_nan_enabled: whether anomaly detection also checks for NaN."""
    return STATE.anomaly == "nan"


def set_anomaly_enabled(enabled, check_nan=True):
    """torch.set_anomaly_enabled: turn anomaly detection on or off in this thread (what
    ``detect_anomaly`` does for a block)."""
    if not isinstance(enabled, bool) or not isinstance(check_nan, bool):
        from ember.errors import EmberTypeError
        raise EmberTypeError(f"set_anomaly_enabled(): enabled and check_nan must be bool, got "
                             f"{type(enabled).__name__} and {type(check_nan).__name__}")
    STATE.anomaly = ("nan" if check_nan else True) if enabled else False
