"""ember: a PyTorch-style deep-learning framework on NumPy.

``import ember`` loads only NumPy and ember's core; ``ember.nn``, ``ember.optim``, ``ember.jit``,
``ember.onnx`` and ``ember.utils`` load on first use.
"""
import importlib as _importlib

from ember._dtype import cdouble, cfloat, complex64, complex128  # noqa: F401
from ember._dtype import (bool_, double, dtype, float, float16, float32, float64,  # noqa: A004
                          get_default_dtype, half, int, int8, int16, int32, int64, long,
                          set_default_dtype, short, uint8)
from ember._dtype import bool_ as bool  # noqa: A004
from ember import _dtype as _dtype_mod
from ember._dtype import (channels_last, channels_last_3d, contiguous_format, layout,
                          memory_format, preserve_format, sparse_coo, strided)
from ember.tensor import Size, Tensor, device
from ember._legacy import LEGACY as _LEGACY_TYPES
globals().update(_LEGACY_TYPES)  # FloatTensor, LongTensor, ... (torch legacy types)
from ember.autograd import _generated
from ember import overloads as _overloads
from ember.autograd.grad_mode import (enable_grad, inference_mode, is_grad_enabled,
                                      is_inference_mode_enabled, no_grad, set_grad_enabled)
from ember.creation import (arange, as_tensor, bernoulli, empty, empty_like, eye, from_dlpack,
                            from_numpy, full, full_like, linspace, multinomial, normal, ones,
                            ones_like, rand, rand_like, randint, randn, randn_like, randperm,
                            tensor, zeros, zeros_like)
from ember.overloads import (clip, dropout, is_complex, is_floating_point, is_tensor, max, min,
                             norm, numel, std, var)
from ember.overloads import (allclose, atleast_1d, atleast_2d, atleast_3d,
                             broadcast_shapes, index_put, nonzero, tril_indices, triu_indices,
                             unravel_index, where)
from ember.overloads import can_cast, equal, promote_types, result_type
from ember._sorting import (aminmax, cummax, cummin, kthvalue, median, mode,
                            nanmedian, sort, std_mean, topk, unique, unique_consecutive,
                            var_mean)
from ember import return_types
from ember._printing import set_printoptions
from ember._spectral import (bartlett_window, blackman_window, hamming_window,  # noqa: E402
                             hann_window, istft, kaiser_window, stft)
from ember import errors as _errors
from ember.errors import EmberError, UnsupportedError
from ember.kernels.runtime.memory import get_memory_reuse, set_memory_reuse
from ember.kernels.runtime.threads import (get_conv_blas_limit, get_num_threads,
                                           set_conv_blas_limit, set_num_threads, set_parallel_layer)
from ember.random import (Generator, default_generator, get_rng_state, initial_seed,
                          manual_seed, seed, set_rng_state)

_overloads.install()
Tensor.stft, Tensor.istft = stft, istft
_importlib.import_module("ember._aliases").install(globals(), Tensor)  # arcsin, ...
_importlib.import_module("ember._sorting").install(Tensor)
_importlib.import_module("ember.linalg").install(Tensor, globals())
_importlib.import_module("ember._breadth").install(globals(), Tensor)
# the one process-wide setting made at import (docs/process.md); EMBER_MEMORY_REUSE=0 skips it
_importlib.import_module("ember.kernels.runtime.memory").configure_from_environment()
for _name in _generated.EMBER_FUNCTIONS:
    if _name not in ("var", "std", "norm", "nonzero", "index_put", "where"):
        globals()[_name] = getattr(_generated, _name)
_importlib.import_module("ember.autograd.out").install(globals())  # out= (torch's semantics)
# every public function and Tensor method raises ember's errors naming it (ember.errors.public);
# a spec op's own generated entry is named by dispatch (ember.autograd.dispatch.named_by_dispatch)
from ember.autograd.dispatch import named_by_dispatch as _named_by_dispatch  # noqa: E402
for _name, _fn in list(globals().items()):
    if _name[0] != "_" and _errors.needs_public(_fn) and not _named_by_dispatch(_name, _fn):
        globals()[_name] = _errors.public(_fn)
for _name, _fn in list(vars(Tensor).items()):
    if (_name[0] != "_" or _name[:2] == "__" == _name[-2:]) and _errors.needs_public(_fn) \
            and _fn.__module__ != Tensor.__module__ and not _named_by_dispatch(_name, _fn) \
            and _name not in _overloads._NAMED:
        setattr(Tensor, _name, _errors.public(_fn, _name))
del _name, _fn
autograd = _importlib.import_module("ember.autograd")


def _to_sparse(self, sparse_dim=None, **kwargs):
    """The sparse COO form of this tensor (ember.sparse.to_sparse; loads ember.sparse)."""
    return _importlib.import_module("ember.sparse").to_sparse(self, sparse_dim, **kwargs)


Tensor.to_sparse = _to_sparse
_SPARSE_FUNCTIONS = ("sparse_coo_tensor", "sparse_csr_tensor")

__version__ = "0.1.0"

_LAZY = {"nn", "optim", "jit", "onnx", "utils", "backends", "cli", "serialization",
         "accelerator", "cuda",
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
    if name in _SPARSE_FUNCTIONS:   # ember.sparse_coo_tensor (ember.sparse loads on first use)
        return getattr(_importlib.import_module("ember.sparse"), name)
    if name in ("finfo", "iinfo"):
        return getattr(_importlib.import_module("ember._finfo"), name)
    raise AttributeError(f"module 'ember' has no attribute {name!r}")


def __dir__():
    import pkgutil
    subs = {m.name for m in pkgutil.iter_modules(__path__) if m.name[:1] != "_"}
    return sorted(set(globals()) | _LAZY | set(_AMP_NAMES) | subs |
                  set(_SPARSE_FUNCTIONS))
