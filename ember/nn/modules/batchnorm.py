"""torch.nn.modules.batchnorm: the BatchNorm layers and their bases (defined in
normalization)."""
from ember.nn.modules.normalization import (BatchNorm1d, BatchNorm2d, BatchNorm3d,  # noqa: F401
                                            _BatchNorm, _NormBase)
