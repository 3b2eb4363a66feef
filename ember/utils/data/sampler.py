"""``torch.utils.data.sampler``'s names, for code that imports them from there."""
from ember.utils.data import (BatchSampler, RandomSampler, Sampler, SequentialSampler,
                              SubsetRandomSampler, WeightedRandomSampler)

__all__ = ["BatchSampler", "RandomSampler", "Sampler", "SequentialSampler", "SubsetRandomSampler",
           "WeightedRandomSampler"]
