"""``ember.nn.parallel``: DistributedDataParallel on ember.distributed (MPI)."""
from ember.nn.parallel.data_parallel import DataParallel, data_parallel  # noqa: F401
from ember.nn.parallel.distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
