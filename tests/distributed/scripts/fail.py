"""Rank 1 raises (or, with "exit", calls sys.exit(3)) while rank 0 waits in a collective: the job must end, non-zero, naming rank 1."""
import sys

import ember
import ember.distributed as dist

dist.init_process_group("mpi")
print("args", sys.argv[1:], flush=True)
if dist.get_rank() == 1:
    if "exit" in sys.argv:
        sys.exit(3)
    raise ValueError("boom on purpose")
dist.all_reduce(ember.ones(3))
print("rank 0 was not stopped", flush=True)
