"""DistributedSampler: each rank iterates its own equal share of a dataset (torch's semantics)."""
import math

import numpy as np

from ember.errors import EmberValueError
from ember.utils.data import Sampler


class DistributedSampler(Sampler):
    """Indices of rank ``rank``'s share of ``dataset`` among ``num_replicas`` ranks (defaults:
    ember.distributed's rank and world size). With ``shuffle`` the order is a permutation seeded
    by ``seed + epoch`` (the same on every rank; call ``set_epoch`` each epoch to reshuffle).
    Without ``drop_last`` the index list is padded by wrapping around so every rank gets
    ``ceil(len / num_replicas)`` indices; with it the tail is dropped instead.

    Raises EmberValueError for a rank outside ``[0, num_replicas)``."""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False):
        if num_replicas is None or rank is None:
            import ember.distributed as dist
            num_replicas = dist.get_world_size() if num_replicas is None else num_replicas
            rank = dist.get_rank() if rank is None else rank
        if num_replicas < 1 or rank < 0 or rank >= num_replicas:
            raise EmberValueError(f"DistributedSampler: invalid rank {rank}, rank should be in "
                                  f"the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        if drop_last and n % num_replicas:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            indices = np.random.default_rng(self.seed + self.epoch).permutation(n).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            pad = self.total_size - len(indices)
            if pad <= len(indices):
                indices += indices[:pad]
            elif indices:
                indices += (indices * math.ceil(pad / len(indices)))[:pad]
        else:
            indices = indices[:self.total_size]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """Set the epoch, which changes the shuffle order (call it before each epoch)."""
        self.epoch = epoch
