"""torch.nn.modules.distance: CosineSimilarity and PairwiseDistance (defined in misc)."""
from ember.nn.modules.misc import CosineSimilarity, PairwiseDistance  # noqa: F401
