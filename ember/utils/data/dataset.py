"""``torch.utils.data.dataset``'s names (those ember has), for code that imports them from
there."""
from ember.utils.data import (ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset,
                              random_split)

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "ConcatDataset", "Subset",
           "random_split"]
