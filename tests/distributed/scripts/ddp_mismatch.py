"""Rank 1 builds a different model: DDP must refuse it, naming the rank."""
import ember.distributed as dist
from ember import nn
from ember.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("mpi")
DDP(nn.Linear(3, 4 if dist.get_rank() == 1 else 5))
print("constructed")
