"""Lazy modules, as torch's: ``LazyLinear(out_features)``, ``LazyConv2d(out_channels, k)``,
``LazyBatchNorm2d()``, ... infer their input size (in_features / in_channels / num_features)
from the first input. Until then their parameters are ``UninitializedParameter``s, so an
optimizer can be built before the first call; the first forward materializes them in place
(same objects, initialised as the full module initialises them) and the module becomes the
full class (``LazyLinear`` -> ``Linear``). A state_dict loaded before the first call
materializes them with the loaded shapes."""
import warnings

from ember.ops import creation
from ember.errors import EmberValueError
from ember.nn.modules import batchnorm, conv, instancenorm, linear
from ember.nn.modules.module import Module
from ember.nn.parameter import UninitializedBuffer, UninitializedParameter, _Uninitialized
from ember.tensor import Tensor

__all__ = ["LazyModuleMixin", "LazyLinear",
           "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d",
           "LazyConvTranspose3d", "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d",
           "LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d"]


def _is_uninit(t):
    return isinstance(t, _Uninitialized)


class LazyModuleMixin:
    """Shared by the Lazy* modules: ``cls_to_become`` is the full module class;
    ``_infer(input)`` names the constructor argument the first input gives."""
    cls_to_become = None

    def _lazy_init(self, args, bias_like, buffers=()):
        self._lazy_args = args
        # the attributes torch's lazy modules show before the first call (in_features=0, ...)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")       # initialising the zero-size tensors
            zero = self.cls_to_become(**args)
        for k, v in vars(zero).items():
            if not k.startswith("_"):
                self.__dict__[k] = v
        for name in bias_like:
            self.register_parameter(name, UninitializedParameter())
        for name in buffers:
            self.register_buffer(name, UninitializedBuffer())
        self._lazy_hook = self.register_forward_pre_hook(_infer_on_first_call)
        self._lazy_load = self._register_load_state_dict_pre_hook(self._lazy_load_hook)

    def extra_repr(self):
        return self.cls_to_become.extra_repr(self)

    def has_uninitialized_params(self):
        """Whether a parameter or buffer still waits for the first input."""
        return any(_is_uninit(t) for t in list(self._parameters.values()) +
                   list(self._buffers.values()))

    def initialize_parameters(self, input):
        """Build the full module for ``input``'s size and move its parameters into the
        placeholders (the ones a loaded state_dict has not filled)."""
        kwargs = dict(self._lazy_args)
        kwargs.update(self._infer(input))
        full = self.cls_to_become(**kwargs)
        for store in ("_parameters", "_buffers"):
            mine, theirs = getattr(self, store), getattr(full, store)
            for name, t in theirs.items():
                if name in mine and _is_uninit(mine[name]):
                    mine[name].materialize(t)
                elif name not in mine:
                    mine[name] = t
        for k, v in vars(full).items():
            if not k.startswith("_"):
                self.__dict__[k] = v

    def _lazy_load_hook(self, state_dict, prefix, local_metadata, strict, missing_keys,
                        unexpected_keys, error_msgs):
        for store in ("_parameters", "_buffers"):
            for name, t in getattr(self, store).items():
                key = prefix + name
                if key in state_dict and _is_uninit(t):
                    v = state_dict[key]
                    t.materialize(creation.zeros(tuple(v.shape),
                                                 dtype=getattr(v, "dtype", None)))

    def _finish_lazy(self):
        self._lazy_hook.remove()
        self._lazy_load.remove()  # as torch: no hook of the lazy class outlives it
        for k in ("_lazy_args", "_lazy_hook", "_lazy_load"):
            self.__dict__.pop(k, None)
        self.__class__ = self.cls_to_become


def _infer_on_first_call(module, args):
    if not args or not isinstance(args[0], Tensor):
        raise EmberValueError(f"{type(module).__name__}: the first call needs a tensor input to "
                              f"infer the module's size")
    module.initialize_parameters(args[0])
    module._finish_lazy()


class LazyLinear(LazyModuleMixin, Module):
    """``Linear`` whose ``in_features`` is ``input.shape[-1]`` of the first input."""
    cls_to_become = linear.Linear

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.out_features = out_features
        self._lazy_init(dict(in_features=0, out_features=out_features, bias=bias, dtype=dtype),
                        ["weight"] + (["bias"] if bias else []))
        if not bias:
            self.register_parameter("bias", None)

    def _infer(self, input):
        return {"in_features": input.shape[-1]}


class _LazyConv(LazyModuleMixin, Module):
    def _setup(self, out_channels, bias, kwargs):
        self.out_channels = out_channels
        self._lazy_init(dict(in_channels=0, out_channels=out_channels, bias=bias, **kwargs),
                        ["weight"] + (["bias"] if bias else []))
        if not bias:
            self.register_parameter("bias", None)

    def _infer(self, input):
        n = self.cls_to_become._n
        if input.dim() not in (n + 1, n + 2):
            raise EmberValueError(f"{type(self).__name__}: expected a {n + 1}-D or {n + 2}-D "
                                  f"input, got {input.dim()}-D {tuple(input.shape)}")
        return {"in_channels": input.shape[1] if input.dim() == n + 2 else input.shape[0]}


class _LazyConvNd(_LazyConv):
    def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        self._setup(out_channels, bias, dict(kernel_size=kernel_size, stride=stride,
                                             padding=padding, dilation=dilation, groups=groups,
                                             padding_mode=padding_mode, dtype=dtype))


class _LazyConvTransposeNd(_LazyConv):
    def __init__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0,
                 groups=1, bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        self._setup(out_channels, bias, dict(kernel_size=kernel_size, stride=stride,
                                             padding=padding, output_padding=output_padding,
                                             groups=groups, dilation=dilation,
                                             padding_mode=padding_mode, dtype=dtype))


def _conv(name, cls, base):
    return type(name, (base,), {"cls_to_become": cls, "__module__": __name__,
                                "__doc__": f"``{cls.__name__}`` whose ``in_channels`` comes "
                                           f"from the first input."})


LazyConv1d = _conv("LazyConv1d", conv.Conv1d, _LazyConvNd)
LazyConv2d = _conv("LazyConv2d", conv.Conv2d, _LazyConvNd)
LazyConv3d = _conv("LazyConv3d", conv.Conv3d, _LazyConvNd)
LazyConvTranspose1d = _conv("LazyConvTranspose1d", conv.ConvTranspose1d, _LazyConvTransposeNd)
LazyConvTranspose2d = _conv("LazyConvTranspose2d", conv.ConvTranspose2d, _LazyConvTransposeNd)
LazyConvTranspose3d = _conv("LazyConvTranspose3d", conv.ConvTranspose3d, _LazyConvTransposeNd)


class _LazyNorm(LazyModuleMixin, Module):
    def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None):
        super().__init__()
        params = ["weight", "bias"] if affine else []
        buffers = ["running_mean", "running_var", "num_batches_tracked"] \
            if track_running_stats else []
        self._lazy_init(dict(num_features=0, eps=eps, momentum=momentum, affine=affine,
                             track_running_stats=track_running_stats, dtype=dtype),
                        params, buffers)
        for name in ("weight", "bias") if not affine else ():
            self.register_parameter(name, None)
        for name in ("running_mean", "running_var", "num_batches_tracked") \
                if not track_running_stats else ():
            self.register_buffer(name, None)

    def _infer(self, input):
        if input.dim() < 2:
            raise EmberValueError(f"{type(self).__name__}: expected an input with a channel "
                                  f"dimension, got {input.dim()}-D {tuple(input.shape)}")
        return {"num_features": input.shape[1]}


class _LazyInstanceNorm(_LazyNorm):
    """(torch's lazy instance norms default to affine=True, track_running_stats=True, unlike
    InstanceNorm*d.)"""

    def _infer(self, input):
        n = self._spatial
        if input.dim() not in (n + 1, n + 2):
            raise EmberValueError(f"{type(self).__name__}: expected a {n + 1}-D or {n + 2}-D "
                                  f"input, got {input.dim()}-D {tuple(input.shape)}")
        return {"num_features": input.shape[1] if input.dim() == n + 2 else input.shape[0]}


def _norm(name, cls, base, spatial):
    return type(name, (base,), {"cls_to_become": cls, "_spatial": spatial,
                                "__doc__": f"``{cls.__name__}`` whose ``num_features`` comes "
                                           f"from the first input.", "__module__": __name__})


LazyBatchNorm1d = _norm("LazyBatchNorm1d", batchnorm.BatchNorm1d, _LazyNorm, 1)
LazyBatchNorm2d = _norm("LazyBatchNorm2d", batchnorm.BatchNorm2d, _LazyNorm, 2)
LazyBatchNorm3d = _norm("LazyBatchNorm3d", batchnorm.BatchNorm3d, _LazyNorm, 3)
LazyInstanceNorm1d = _norm("LazyInstanceNorm1d", instancenorm.InstanceNorm1d, _LazyInstanceNorm, 1)
LazyInstanceNorm2d = _norm("LazyInstanceNorm2d", instancenorm.InstanceNorm2d, _LazyInstanceNorm, 2)
LazyInstanceNorm3d = _norm("LazyInstanceNorm3d", instancenorm.InstanceNorm3d, _LazyInstanceNorm, 3)
