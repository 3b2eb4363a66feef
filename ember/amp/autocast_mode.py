"""``ember.autocast`` / ``ember.amp.autocast`` (torch.autocast): regions where the ops of
torch's CPU autocast lists run in a lower precision (bfloat16 by default, or float16) or in
float32; the cast rule itself is ember.autograd.autocast. ember runs on the CPU only: a
``"cuda"`` region warns and is disabled, as torch without CUDA."""
import functools
import threading
import warnings

from ember import _dtype
from ember.autograd import autocast as _rule
from ember.autograd.state import STATE
from ember.errors import EmberRuntimeError, EmberValueError, public

__all__ = ["autocast", "is_autocast_available", "custom_fwd", "custom_bwd"]
# the names ``ember.<name>`` gives (torch.autocast, torch.is_autocast_enabled, ...)
TOP_LEVEL = ("autocast", "is_autocast_enabled", "get_autocast_dtype", "set_autocast_enabled",
             "set_autocast_dtype", "is_autocast_cache_enabled", "set_autocast_cache_enabled",
             "clear_autocast_cache", "autocast_increment_nesting", "autocast_decrement_nesting",
             "is_autocast_cpu_enabled", "get_autocast_cpu_dtype")

_DEVICES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve",
            "fpga", "maia", "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia",
            "privateuseone")


class _CpuState:
    """The CPU autocast settings of this thread (torch keeps them thread-local)."""

    def __init__(self):
        self.dtype = None     # None: bfloat16, made on first use
        self.nesting = 0


_TL = threading.local()


def _cpu():
    s = getattr(_TL, "cpu", None)
    if s is None:
        s = _TL.cpu = _CpuState()
    return s


def _device_of(device_type):
    if not isinstance(device_type, str):
        raise EmberValueError(f"Expected `device_type` of type `str`, got: "
                              f"`{type(device_type)}`")
    dev = device_type.split(":")[0]
    if dev not in _DEVICES:
        raise EmberRuntimeError(f"Expected one of {', '.join(_DEVICES)} device type at start of "
                                f"device string: {device_type}")
    return dev


def is_autocast_available(device_type):
    """Whether autocast runs on ``device_type``: only ``"cpu"`` in ember."""
    return _device_of(device_type) == "cpu"


def _cpu_dtype():
    s = _cpu()
    return _dtype.bfloat16_dtype() if s.dtype is None else s.dtype


def is_autocast_enabled(device_type=None):
    """Whether autocast is on for ``device_type`` (torch: no argument means ``"cuda"``, never
    on in ember)."""
    if device_type is None or _device_of(device_type) != "cpu":
        return False
    return STATE.autocast is not None


def get_autocast_dtype(device_type):
    """The lower-precision dtype of ``device_type``'s autocast: bfloat16 on the CPU unless set,
    float16 for ``"cuda"``."""
    if _device_of(device_type) == "cpu":
        return _cpu_dtype()
    return _dtype.float16


def set_autocast_enabled(device_type, enabled):
    """Turn CPU autocast on or off for this thread (what the context manager does)."""
    if _device_of(device_type) == "cpu":
        _rule.install()
        STATE.autocast = _cpu_dtype().numpy if enabled else None


def set_autocast_dtype(device_type, dtype):
    """Set the CPU autocast dtype (bfloat16 or float16)."""
    if _device_of(device_type) == "cpu":
        _cpu().dtype = dtype
        if STATE.autocast is not None:
            STATE.autocast = dtype.numpy


def is_autocast_cache_enabled():
    """Whether autocast caches the casts of leaf tensors inside a region."""
    return STATE.autocast_cache


def set_autocast_cache_enabled(enabled):
    STATE.autocast_cache = bool(enabled)


def is_autocast_cpu_enabled():
    """Deprecated torch spelling of ``is_autocast_enabled("cpu")``."""
    return is_autocast_enabled("cpu")


def get_autocast_cpu_dtype():
    """Deprecated torch spelling of ``get_autocast_dtype("cpu")``."""
    return get_autocast_dtype("cpu")


def clear_autocast_cache():
    """Drop autocast's cached casts."""
    _rule.clear_cache()


def autocast_increment_nesting():
    _cpu().nesting += 1
    return _cpu().nesting


def autocast_decrement_nesting():
    _cpu().nesting -= 1
    return _cpu().nesting


class autocast:
    """``autocast(device_type, dtype=None, enabled=True, cache_enabled=None)``: a context
    manager and decorator. Inside, torch's CPU lower-precision ops (matmul, linear,
    convolutions, bmm, addmm, baddbmm, ...) cast float32 inputs to ``dtype`` (bfloat16 by
    default, float16 allowed) and its float32 ops (losses, linear algebra, FFT, prod, ...)
    cast lower-precision inputs to float32; float64 is never cast. Regions nest;
    ``enabled=False`` turns autocast off inside. Unsupported dtypes and ``"cuda"`` warn and
    disable the region, as torch on a machine without CUDA."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        dev = _device_of(device_type)
        self.device = dev
        self.fast_dtype = get_autocast_dtype(dev) if dtype is None else dtype
        self._cache_enabled = (STATE.autocast_cache if cache_enabled is None
                               else bool(cache_enabled))
        enabled = bool(enabled)
        if dev == "cuda" and enabled:
            warnings.warn("CUDA is not available or torch_xla is imported. Disabling autocast.",
                          stacklevel=2)
            enabled = False
        elif dev not in ("cpu", "cuda") and enabled:
            warnings.warn(f"User specified an unsupported autocast device_type '{dev}'",
                          stacklevel=2)
            enabled = False
        elif dev == "cpu" and enabled:
            ok = (_dtype.float16, _dtype.bfloat16_dtype())
            if self.fast_dtype not in ok:
                warnings.warn("In CPU autocast, but the target dtype is not supported. "
                              "Disabling autocast.\nCPU Autocast only supports dtypes of "
                              "torch.bfloat16, torch.float16 currently.", stacklevel=2)
                enabled = False
        self._enabled = enabled

    def __enter__(self):
        if self.device != "cpu":
            self._prev = None
            return self
        _rule.install()
        s = _cpu()
        self._prev = (STATE.autocast, s.dtype, STATE.autocast_cache)
        s.dtype = self.fast_dtype
        STATE.autocast = self.fast_dtype.numpy if self._enabled else None
        STATE.autocast_cache = self._cache_enabled
        autocast_increment_nesting()
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        if self._prev is None:
            return False
        if autocast_decrement_nesting() == 0:
            _rule.clear_cache()
        STATE.autocast, _cpu().dtype, STATE.autocast_cache = self._prev
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def decorate_autocast(*args, **kwargs):
            with autocast(self.device, self.fast_dtype, self._enabled, self._cache_enabled):
                return func(*args, **kwargs)
        return decorate_autocast


def custom_fwd(fwd=None, *, device_type, cast_inputs=None):
    """Decorator for a custom Function's ``forward`` (torch.amp.custom_fwd): with
    ``cast_inputs`` set, floating inputs are cast to it and forward runs with autocast off;
    otherwise forward runs under the caller's autocast state."""
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)
    _device_of(device_type)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        args[0]._fwd_used_autocast = is_autocast_enabled(device_type)
        args[0]._dtype = get_autocast_dtype(device_type)
        if cast_inputs is None or not is_autocast_enabled(device_type):
            return fwd(*args, **kwargs)
        with autocast(device_type, enabled=False):
            cast = [_cast_floating(a, cast_inputs) for a in args]
            kw = {k: _cast_floating(v, cast_inputs) for k, v in kwargs.items()}
            return fwd(*cast, **kw)
    return decorate_fwd


def custom_bwd(bwd=None, *, device_type):
    """Decorator for a custom Function's ``backward``: runs it with the autocast state its
    forward ran with (torch.amp.custom_bwd)."""
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)
    _device_of(device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        ctx = args[0]
        with autocast(device_type, getattr(ctx, "_dtype", None),
                      getattr(ctx, "_fwd_used_autocast", False)):
            return bwd(*args, **kwargs)
    return decorate_bwd


def _cast_floating(value, dtype):
    from ember.tensor import Tensor
    if isinstance(value, Tensor) and value.is_floating_point() and value.dtype != dtype:
        return value.to(dtype)
    if isinstance(value, (list, tuple)):
        return type(value)(_cast_floating(v, dtype) for v in value)
    return value


# errors name the function they came from (ember.errors.public)
for _n in ("is_autocast_enabled", "get_autocast_dtype", "set_autocast_enabled",
           "set_autocast_dtype", "is_autocast_cache_enabled", "set_autocast_cache_enabled",
           "is_autocast_cpu_enabled", "get_autocast_cpu_dtype", "clear_autocast_cache",
           "autocast_increment_nesting", "autocast_decrement_nesting"):
    globals()[_n] = public(globals()[_n])
del _n
