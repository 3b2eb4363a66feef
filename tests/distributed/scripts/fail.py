"""Faults that must end the whole job, non-zero, naming the rank. Rank 1 by mode (argv):
raise (default): raises while rank 0 waits in a collective; exit: calls sys.exit(3);
timeout: never joins, rank 0's collective times out (init_process_group(timeout=1));
mismatch: calls all_reduce with another shape (run with EMBER_DISTRIBUTED_DEBUG=DETAIL)."""
import sys
import time

import ember
import ember.distributed as dist

mode = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] in ("exit", "timeout", "mismatch") \
    else "raise"
dist.init_process_group("mpi", timeout=1 if mode == "timeout" else None)
print("args", sys.argv[1:], flush=True)
shape = 3
if dist.get_rank() == 1:
    if mode == "exit":
        sys.exit(3)
    if mode == "timeout":
        time.sleep(30)
    if mode == "mismatch":
        shape = 4
    else:
        raise ValueError("boom on purpose")
dist.all_reduce(ember.ones(shape))
print("rank 0 was not stopped", flush=True)
