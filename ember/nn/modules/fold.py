"""torch.nn.modules.fold: Fold and Unfold (defined in misc)."""
from ember.nn.modules.misc import Fold, Unfold  # noqa: F401
