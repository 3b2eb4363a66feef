"""Starting child processes under a hard timeout, shared by the multiprocessing tests."""
import time

import pytest

TIMEOUT = 60
METHODS = ["fork", "spawn"]
# spawn starts a fresh interpreter per child (about a second each on a loaded 2-core machine)
START_METHODS = ["fork", pytest.param("spawn", marks=pytest.mark.slow)]


def run_children(ctx, target, *args, n=1, timeout=TIMEOUT):
    """Start ``n`` processes of ``target(i, *args)`` and join them under a hard timeout;
    fails unless every one exits with 0."""
    procs = [ctx.Process(target=target, args=(i,) + args) for i in range(n)]
    for p in procs:
        p.start()
    end = time.monotonic() + timeout
    for p in procs:
        p.join(max(0.0, end - time.monotonic()))
    hung = [p for p in procs if p.is_alive()]
    for p in hung:
        p.kill()
        p.join()
    assert not hung, f"{len(hung)} child process(es) still running after {timeout} s"
    assert [p.exitcode for p in procs] == [0] * n
