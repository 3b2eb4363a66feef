"""``torch.utils.data.dataset``'s names (those ember has), for code that imports them from
there."""
from ember.utils.data import (ChainDataset, ConcatDataset, Dataset, IterableDataset,
                              StackDataset, Subset, TensorDataset, random_split)

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "ConcatDataset", "ChainDataset",
           "StackDataset", "Subset", "random_split"]
