"""torch's process-wide switches as ``ember.<name>`` (torch.use_deterministic_algorithms,
torch.set_float32_matmul_precision, torch.set_warn_always, ...), with torch's argument checks.

What each means on ember's CPU kernels: they are deterministic whatever the setting (the
deterministic switch also keeps each call's first kernel-or-fallback choice: the same bits on
every call); float32 matrix products always run in float32
("highest"); there is no inter-op thread pool (the count is recorded); NumPy cannot set the
CPU's flush-to-zero mode (``set_flush_denormal`` returns False, as torch on a CPU without it);
the one device is the CPU."""
import os

from ember.errors import EmberRuntimeError, EmberTypeError, UnsupportedError

_STATE = {"deterministic": False, "warn_only": False, "matmul_precision": "highest",
          "warn_always": False, "interop_threads": None}
_DEBUG_MODES = ("default", "warn", "error")


def _check_bool(op, name, value):
    if not isinstance(value, bool):
        raise EmberTypeError(f"{op}(): argument '{name}' must be bool, not "
                             f"{type(value).__name__}")


def use_deterministic_algorithms(mode, *, warn_only=False):
    """torch.use_deterministic_algorithms: ember's kernels are deterministic; while on, a call
    that ran its fallback while its kernel compiled keeps it (``compiler.tier``: the same bits on
    every call) instead of switching once the kernel is ready."""
    _check_bool("use_deterministic_algorithms", "mode", mode)
    _check_bool("use_deterministic_algorithms", "warn_only", warn_only)
    _STATE["deterministic"], _STATE["warn_only"] = mode, warn_only
    from ember.kernels.runtime import compiler   # a call keeps its first tier (same bits)
    compiler.keep_first_choices(mode)


def are_deterministic_algorithms_enabled():
    return _STATE["deterministic"]


def is_deterministic_algorithms_warn_only_enabled():
    return _STATE["warn_only"]


def set_deterministic_debug_mode(debug_mode):
    """torch.set_deterministic_debug_mode: 0/"default" (off), 1/"warn", 2/"error"."""
    if isinstance(debug_mode, str):
        if debug_mode not in _DEBUG_MODES:
            raise EmberRuntimeError(f"set_deterministic_debug_mode: invalid value of debug_mode, "
                                    f"expected one of `default`, `warn`, `error`, but got "
                                    f"{debug_mode}")
        debug_mode = _DEBUG_MODES.index(debug_mode)
    elif isinstance(debug_mode, bool) or not isinstance(debug_mode, int):
        raise EmberTypeError(f"set_deterministic_debug_mode: debug_mode must be str or int, but "
                             f"got {type(debug_mode).__name__}")
    if debug_mode not in (0, 1, 2):
        raise EmberRuntimeError(f"set_deterministic_debug_mode: invalid value of debug_mode, "
                                f"expected 0, 1, or 2, but got {debug_mode}")
    use_deterministic_algorithms(debug_mode > 0, warn_only=debug_mode == 1)


def get_deterministic_debug_mode():
    if not _STATE["deterministic"]:
        return 0
    return 1 if _STATE["warn_only"] else 2


def set_float32_matmul_precision(precision):
    """torch.set_float32_matmul_precision: "highest", "high" or "medium" (recorded; ember's
    float32 products are always computed in float32). Another value warns and changes nothing,
    as torch."""
    if precision not in ("highest", "high", "medium"):
        import warnings
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current "
                      f"set_float32_matmul_precision call has no effect.", UserWarning,
                      stacklevel=2)
        return
    _STATE["matmul_precision"] = precision


def get_float32_matmul_precision():
    return _STATE["matmul_precision"]


def set_warn_always(b, /):
    """torch.set_warn_always: whether warnings torch gives once are given every time."""
    _STATE["warn_always"] = bool(b)


def is_warn_always_enabled():
    return _STATE["warn_always"]


def get_num_interop_threads():
    """torch.get_num_interop_threads: the recorded count, else the number of CPUs (ember runs
    no inter-op pool)."""
    return _STATE["interop_threads"] or os.cpu_count() or 1


def set_num_interop_threads(num):
    if isinstance(num, bool) or not isinstance(num, int):
        raise EmberTypeError(f"set_num_interop_threads(): argument must be int, not "
                             f"{type(num).__name__}")
    if num <= 0:
        raise EmberRuntimeError(f"set_num_interop_threads expects a positive integer, got {num}")
    _STATE["interop_threads"] = num


def set_flush_denormal(mode):
    """torch.set_flush_denormal: False (NumPy cannot set the CPU's flush-to-zero mode, so
    denormals stay); a non-bool raises, as torch."""
    if not isinstance(mode, bool):
        raise EmberRuntimeError(f"set_flush_denormal: flush_denormal expects a bool, but got "
                                f"{type(mode).__name__}")
    return False


def get_default_device():
    """torch.get_default_device: the CPU, ember's one device."""
    from ember.tensor import device
    return device("cpu")


def set_default_device(device):
    """torch.set_default_device: None or the CPU; any other device raises UnsupportedError."""
    from ember.tensor import check_device, device as device_cls
    if isinstance(device, device_cls) and device.type != "cpu":
        raise UnsupportedError(f"set_default_device: ember runs only on the CPU; the device "
                               f"{device!r} is not available. Use 'cpu'.")
    check_device(device, "set_default_device")


def typename(obj, /):
    """torch.typename: ``Tensor.type()`` of a tensor, else the object's module-qualified
    name."""
    from ember.tensor import Tensor
    if isinstance(obj, Tensor):
        return obj.type()
    module = getattr(obj, "__module__", "") or ""
    if hasattr(obj, "__qualname__"):
        qualname = obj.__qualname__
    elif hasattr(obj, "__name__"):
        qualname = obj.__name__
    else:
        module = obj.__class__.__module__ or ""
        qualname = obj.__class__.__qualname__
    return qualname if module in ("", "builtins") else f"{module}.{qualname}"


def is_storage(obj, /):
    """torch.is_storage: False (an ember tensor holds an ndarray, not a storage object)."""
    return False


NAMES = ("use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
         "is_deterministic_algorithms_warn_only_enabled", "set_deterministic_debug_mode",
         "get_deterministic_debug_mode", "set_float32_matmul_precision",
         "get_float32_matmul_precision", "set_warn_always", "is_warn_always_enabled",
         "get_num_interop_threads", "set_num_interop_threads", "set_flush_denormal",
         "get_default_device", "set_default_device", "typename", "is_storage")
