"""``ember.distributed``: process groups and collectives on MPI through mpi4py, with
torch.distributed's names. Launch N ranks with ``ember run -n N script.py`` (or ``mpiexec``).
mpi4py is imported on first use; install it with ``pip install 'ember[distributed]'``."""
from ember.distributed.collectives import (ReduceOp, Work, all_gather, all_gather_into_tensor,
                                           all_reduce, all_to_all, all_to_all_single, barrier,
                                           broadcast, gather, irecv, isend, recv, reduce,
                                           reduce_scatter_tensor, scatter, send)
from ember.distributed.group import (ProcessGroup, destroy_process_group, get_backend, get_rank,
                                     get_world_size, init_process_group, is_available,
                                     is_initialized, is_mpi_available, new_group)
from ember.distributed.objects import all_gather_object, broadcast_object_list

__all__ = ["ReduceOp", "Work", "ProcessGroup", "init_process_group", "destroy_process_group",
           "is_available", "is_initialized", "is_mpi_available", "get_backend", "get_rank",
           "get_world_size", "new_group", "barrier", "all_reduce", "broadcast", "reduce",
           "all_gather", "all_gather_into_tensor", "reduce_scatter_tensor", "gather", "scatter",
           "all_to_all", "all_to_all_single", "send", "recv", "isend", "irecv", "broadcast_object_list",
           "all_gather_object"]
