"""torch.nn.modules.pixelshuffle: PixelShuffle and PixelUnshuffle (defined in misc)."""
from ember.nn.modules.misc import PixelShuffle, PixelUnshuffle  # noqa: F401
