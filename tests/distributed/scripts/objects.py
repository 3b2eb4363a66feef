"""The object collectives on N ranks: broadcast_object_list and all_gather_object carry JSON
values; anything else is a TypeError naming JSON."""
import numpy as np

import ember
import ember.distributed as dist

dist.init_process_group("mpi")
r, n = dist.get_rank(), dist.get_world_size()

# object collectives: JSON only
objs = [None, None]
if r == 0:
    objs = [{"lr": 0.1, "names": ["a", "b"]}, 3]
dist.broadcast_object_list(objs, src=0)
assert objs == [{"lr": 0.1, "names": ["a", "b"]}, 3], objs
gathered = [None] * n
dist.all_gather_object(gathered, {"rank": r, "ok": True})
assert gathered == [{"rank": k, "ok": True} for k in range(n)], gathered
for bad in ((1, 2), np.float32(1.0), ember.zeros(2), {1: "x"}, float("nan")):
    try:
        dist.all_gather_object([None] * n, bad)
    except TypeError as e:
        assert "JSON" in str(e), e
    else:
        raise AssertionError(f"accepted {bad!r}")
dist.barrier()
dist.destroy_process_group()
print(f"OK rank {r}")
