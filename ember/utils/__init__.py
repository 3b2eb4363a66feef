"""``ember.utils``: ``data`` (Dataset, DataLoader, ...), ``checkpoint``; ``tensorboard``
(SummaryWriter) loads when imported."""
from ember.utils import checkpoint, data  # noqa: F401
