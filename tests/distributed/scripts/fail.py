"""Faults that must end the whole job, non-zero, naming the rank. Rank 1 by mode (argv):
raise (default): raises while rank 0 waits in a collective; exit: calls sys.exit(3);
timeout: never joins, rank 0's collective times out (init_process_group(timeout=1));
timeout_obj: likewise, rank 0 waiting in all_gather_object;
mismatch: calls all_reduce with another shape (run with EMBER_DISTRIBUTED_DEBUG=DETAIL);
mismatch_op: calls broadcast instead (likewise);
exit0early: calls sys.exit(0) while rank 0 waits (timeout=1: rank 0's collective times out).
exit0: no fault, every rank calls sys.exit(0) without destroy_process_group: a clean exit.
exit_caught: no fault, rank 1 catches its own sys.exit(3) and goes on."""
import os
import sys
import time

import ember
import ember.distributed as dist

MODES = ("exit", "timeout", "timeout_obj", "mismatch", "mismatch_op", "exit0early", "exit0", "exit_caught")
mode = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] in MODES else "raise"
dist.init_process_group("mpi", timeout=1 if mode in ("timeout", "timeout_obj", "exit0early") else None)
env = [os.environ.get(k) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")]
print(f"args {sys.argv[1:]} env {env}", flush=True)  # one write: ranks share stdout
shape = 3
if mode == "exit_caught" and dist.get_rank() == 1:
    try:
        sys.exit(3)
    except SystemExit:
        pass
elif dist.get_rank() == 1 and mode != "exit0":
    if mode == "exit":
        sys.exit(3)
    if mode == "exit0early":
        sys.exit(0)
    if mode in ("timeout", "timeout_obj"):
        time.sleep(30)
    if mode == "mismatch":
        shape = 4
    elif mode == "mismatch_op":
        dist.broadcast(ember.ones(shape), src=0)
    else:
        raise ValueError("boom on purpose")
if mode == "timeout_obj":
    dist.all_gather_object([None, None], {"rank": dist.get_rank()})
dist.all_reduce(ember.ones(shape))
print(f"rank {dist.get_rank()} was not stopped", flush=True)
if mode == "exit0":
    sys.exit(0)
