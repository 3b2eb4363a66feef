"""torch.nn.modules.channelshuffle: ChannelShuffle (defined in misc)."""
from ember.nn.modules.misc import ChannelShuffle  # noqa: F401
