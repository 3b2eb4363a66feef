"""``ember.utils``: ``data`` (Dataset, DataLoader, ...), ``checkpoint``, ``hooks``
(RemovableHandle); ``tensorboard`` (SummaryWriter) loads when imported."""
from ember.utils import checkpoint, data, hooks  # noqa: F401
