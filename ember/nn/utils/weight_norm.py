"""The legacy ``nn.utils.weight_norm`` / ``remove_weight_norm`` (parameters ``weight_g`` and
``weight_v``; ``weight`` recomputed before every forward by a pre-hook), as torch keeps them for
old checkpoints. New code: ``nn.utils.parametrizations.weight_norm``."""
import warnings

from ember.errors import EmberValueError
from ember.nn.utils.parametrize import check_module, find_hook
from ember.nn.parameter import Parameter
from ember.nn.utils.parametrizations import _weight_norm, norm_except_dim

__all__ = ["weight_norm", "remove_weight_norm"]


class WeightNorm:
    """The forward pre-hook that sets ``module.<name>`` from ``<name>_g`` and ``<name>_v``."""

    def __init__(self, name, dim):
        self.name = name
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module):
        return _weight_norm(getattr(module, self.name + "_v"), getattr(module, self.name + "_g"),
                            self.dim)

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module, name="weight", dim=0):
    """Split ``module.<name>`` into a magnitude ``<name>_g`` and a direction ``<name>_v``."""
    check_module(module, "weight_norm")
    warnings.warn("`ember.nn.utils.weight_norm` is deprecated in favor of "
                  "`ember.nn.utils.parametrizations.weight_norm` (as torch's)", FutureWarning,
                  stacklevel=2)
    if find_hook(module, WeightNorm, name)[0] is not None:
        raise EmberValueError(f"weight_norm: cannot register two weight_norm hooks on the "
                              f"same parameter {name}")
    weight = module._parameters.get(name)
    if weight is None:
        raise EmberValueError(f"weight_norm: module {type(module).__name__} has no parameter "
                              f"'{name}'")
    fn = WeightNorm(name, dim)
    del module._parameters[name]
    module.register_parameter(name + "_g", Parameter(norm_except_dim(weight, 2, fn.dim).detach()))
    module.register_parameter(name + "_v", Parameter(weight.detach()))
    setattr(module, name, fn.compute_weight(module))
    module.register_forward_pre_hook(fn)
    return module


def remove_weight_norm(module, name="weight"):
    """Fold ``<name>_g`` and ``<name>_v`` back into one parameter ``<name>``."""
    check_module(module, "remove_weight_norm")
    key, hook = find_hook(module, WeightNorm, name)
    if key is None:
        raise EmberValueError(f"weight_norm of '{name}' not found in {type(module).__name__}")
    weight = hook.compute_weight(module).detach()
    delattr(module, name)
    del module._parameters[name + "_g"]
    del module._parameters[name + "_v"]
    module.register_parameter(name, Parameter(weight))
    del module._forward_pre_hooks[key]
    return module
