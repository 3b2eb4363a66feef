"""ember: a PyTorch-style deep-learning framework on NumPy.

``import ember`` loads only NumPy and ember's core; ``ember.nn``, ``ember.optim``, ``ember.jit``,
``ember.onnx`` and ``ember.utils`` load on first use.
"""
import importlib as _importlib
import math as _math

from ember._dtype import cdouble, cfloat, complex64, complex128  # noqa: F401
from ember._dtype import (bool_, double, dtype, float, float16, float32, float64,  # noqa: A004
                          get_default_dtype, half, int, int8, int16, int32, int64, long,
                          set_default_dtype, short, uint8)
from ember._dtype import bool_ as bool  # noqa: A004
from ember import _dtype as _dtype_mod
from ember._dtype import (channels_last, channels_last_3d, contiguous_format, layout,
                          memory_format, preserve_format, sparse_bsc, sparse_bsr,
                          sparse_coo, sparse_csc, sparse_csr, strided)
from ember.tensor import Size, Tensor, device
from ember.autograd.grad_mode import (enable_grad, inference_mode, is_grad_enabled,
                                      is_inference_mode_enabled, no_grad, set_grad_enabled)
from ember import return_types
from ember._printing import set_printoptions
from ember.errors import EmberError, UnsupportedError
from ember.kernels.runtime.memory import get_memory_reuse, set_memory_reuse
from ember.kernels.runtime.threads import (get_conv_blas_limit, get_num_threads,
                                           set_conv_blas_limit, set_num_threads, set_parallel_layer)
from ember.random import (Generator, default_generator, get_rng_state, initial_seed,
                          manual_seed, seed, set_rng_state)
from ember._settings import (are_deterministic_algorithms_enabled, get_default_device,
                             get_deterministic_debug_mode, get_float32_matmul_precision,
                             get_num_interop_threads,
                             is_deterministic_algorithms_warn_only_enabled,
                             is_storage, is_warn_always_enabled, set_default_device,
                             set_deterministic_debug_mode, set_float32_matmul_precision,
                             set_flush_denormal, set_num_interop_threads, set_warn_always,
                             typename, use_deterministic_algorithms)

# the process-wide memory settings made at import (docs/process.md): freed-memory reuse
# (EMBER_MEMORY_REUSE=0 skips it) and NumPy's huge-page advice off (NUMPY_MADVISE_HUGEPAGE set: kept)
_importlib.import_module("ember.kernels.runtime.memory").configure_from_environment()
# the op functions and Tensor's methods; then every public function and method raises ember's
# errors naming it (ember/ops/namespace.py)
_importlib.import_module("ember.ops.namespace").build(globals(), Tensor)
autograd = _importlib.import_module("ember.autograd")
_ops_namespace = _importlib.import_module("ember.ops.namespace")


# functions of ember.sparse in ember's namespace (ember.sparse loads on first use)
_SPARSE_FUNCTIONS = {"sparse_coo_tensor": "ember.sparse", "sparse_csr_tensor": "ember.sparse",
                     "spmm": "ember.sparse.ops"}

__version__ = "0.1.0"

# torch's constants: torch.inf, torch.nan, torch.e, torch.pi (Python floats) and torch.newaxis
inf, nan, e, pi, newaxis = _math.inf, _math.nan, _math.e, _math.pi, None

_LAZY = {"nn", "optim", "jit", "onnx", "utils", "backends", "cli", "serialization",
         "accelerator", "cuda", "mps", "xpu",
         "special", "distributions", "distributed", "signal", "multiprocessing"}


_AMP_NAMES = ("autocast", "is_autocast_enabled", "get_autocast_dtype", "set_autocast_enabled",
              "set_autocast_dtype", "is_autocast_cache_enabled", "set_autocast_cache_enabled",
              "clear_autocast_cache", "autocast_increment_nesting",
              "autocast_decrement_nesting", "is_autocast_cpu_enabled", "get_autocast_cpu_dtype")


def _is_submodule(name):
    """Whether ``ember.<name>`` is a public module or package of ember (``ember.fft``, ...)."""
    import importlib.util
    return name[:1] != "_" and name.isidentifier() and \
        importlib.util.find_spec(f"ember.{name}") is not None


def _public(name, fn):
    """``ember.<name>``, a function loaded on first use, raising errors that name it as the
    eager ones do (kept in the namespace once loaded)."""
    from ember import errors
    if errors.needs_public(fn):
        fn = errors.public(fn, name)
    globals()[name] = fn
    return fn


def __getattr__(name):
    """PEP 562: subpackages (``ember.onnx``, ``ember.distributions``, ``ember.fft``, any
    ``ember.<module>``) and a few functions load on first attribute access."""
    if name in _LAZY or _is_submodule(name):
        return _importlib.import_module(f"ember.{name}")
    if name == "bfloat16":
        return _dtype_mod.bfloat16_dtype()
    if name in ("save", "load"):
        return getattr(_importlib.import_module("ember.serialization"), name)
    if name in _AMP_NAMES:   # torch.autocast, torch.is_autocast_enabled, ... (ember.amp)
        return getattr(_importlib.import_module("ember.amp.autocast_mode"), name)
    if name in _SPARSE_FUNCTIONS:
        return _public(name, getattr(_importlib.import_module(_SPARSE_FUNCTIONS[name]), name))
    if name in ("finfo", "iinfo"):
        return getattr(_importlib.import_module("ember._finfo"), name)
    if name in _ops_namespace.NN_TOPLEVEL:   # torch.conv2d, torch.batch_norm, ... (ember.nn)
        return _public(name, getattr(_importlib.import_module("ember.nn.toplevel"), name))
    if name in ("compile", "explain"):   # torch.compile (ember.compiler.frontend, on first use)
        return _public(name, getattr(_importlib.import_module("ember.compiler.frontend"), name))
    if name == "_dynamo":
        return _importlib.import_module("ember._dynamo")
    if name == "vmap":   # torch.vmap is torch.func.vmap
        return _importlib.import_module("ember.func").vmap
    if name.startswith("_foreach_"):   # torch._foreach_mul_, ... (ember.ops.foreach)
        found = _importlib.import_module("ember.ops.foreach").FUNCTIONS.get(name)
        if found is not None:
            return found
    raise AttributeError(f"module 'ember' has no attribute {name!r}")


def __dir__():
    import pkgutil
    subs = {m.name for m in pkgutil.iter_modules(__path__) if m.name[:1] != "_"}
    return sorted(set(globals()) | _LAZY | set(_AMP_NAMES) | subs |
                  {"compile", "explain", "vmap"} |
                  set(_SPARSE_FUNCTIONS) | set(_ops_namespace.NN_TOPLEVEL))
