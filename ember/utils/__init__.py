"""``ember.utils``: ``data`` (Dataset, DataLoader, ...), ``checkpoint``."""
from ember.utils import checkpoint, data  # noqa: F401
