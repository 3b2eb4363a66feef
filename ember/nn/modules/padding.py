"""torch.nn.modules.padding: the padding layers (defined in misc)."""
from ember.nn.modules.misc import (CircularPad1d, CircularPad2d, CircularPad3d,  # noqa: F401
                                   ConstantPad1d, ConstantPad2d, ConstantPad3d, ReflectionPad1d,
                                   ReflectionPad2d, ReflectionPad3d, ReplicationPad1d,
                                   ReplicationPad2d, ReplicationPad3d, ZeroPad1d, ZeroPad2d,
                                   ZeroPad3d)
