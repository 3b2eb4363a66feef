"""torch.nn.modules.channelshuffle: ChannelShuffle."""
from ember.autograd._generated import functions as G
from ember.nn.modules.module import Module


class ChannelShuffle(Module):
    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, input):
        n, c = input.shape[:2]
        rest = tuple(input.shape[2:])
        x = G.reshape(input, (n, self.groups, c // self.groups) + rest)
        return G.reshape(G.transpose(x, 1, 2), (n, c) + rest)

    def extra_repr(self):
        return f"groups={self.groups}"
