"""``ember.nn.parallel``: DistributedDataParallel on ember.distributed (MPI)."""
from ember.nn.parallel.distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
