"""``ember.utils``: ``data`` (Dataset, DataLoader, ...)."""
from ember.utils import data  # noqa: F401
