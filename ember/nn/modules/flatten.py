"""torch.nn.modules.flatten: Flatten and Unflatten (defined in linear)."""
from ember.nn.modules.linear import Flatten, Unflatten  # noqa: F401
