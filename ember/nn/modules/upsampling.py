"""torch.nn.modules.upsampling: Upsample and its 2-d shorthands (defined in misc)."""
from ember.nn.modules.misc import (Upsample, UpsamplingBilinear2d,  # noqa: F401
                                   UpsamplingNearest2d)
