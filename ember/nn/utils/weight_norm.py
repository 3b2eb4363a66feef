"""The legacy ``nn.utils.weight_norm`` / ``remove_weight_norm`` (parameters ``weight_g`` and
``weight_v``; ``weight`` recomputed before every forward by a pre-hook), as torch keeps them for
old checkpoints. New code: ``nn.utils.parametrizations.weight_norm``."""
import warnings

from ember.nn.utils.parametrize import check_module, legacy_remove, legacy_target
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
    weight = legacy_target(module, WeightNorm, name, "weight_norm")
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
    return legacy_remove(module, WeightNorm, name, "weight_norm",
                         lambda hook: hook.compute_weight(module), parameters=("_g", "_v"))
