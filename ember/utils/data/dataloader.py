"""``torch.utils.data.dataloader``'s names, for code that imports them from there."""
from ember.utils.data import DataLoader, default_collate, default_convert, get_worker_info

__all__ = ["DataLoader", "default_collate", "default_convert", "get_worker_info"]
