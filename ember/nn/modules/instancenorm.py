"""torch.nn.modules.instancenorm: the InstanceNorm layers (defined in normalization)."""
from ember.nn.modules.normalization import (InstanceNorm1d, InstanceNorm2d,  # noqa: F401
                                            InstanceNorm3d, _InstanceNorm)
