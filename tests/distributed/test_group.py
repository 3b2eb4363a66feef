"""Process groups (ember/distributed/group.py) without mpiexec: uninitialized use and a bad
backend are clear errors, a world of one rank, torch's RANK / WORLD_SIZE checked against MPI's,
and rendezvous init methods say how to launch instead."""
import os
import subprocess
import sys

import pytest

from tests.distributed.helpers import ROOT


def test_uninitialized_and_bad_backend():
    import ember
    import ember.distributed as dist
    assert not dist.is_initialized()
    with pytest.raises(RuntimeError, match="init_process_group"):
        dist.all_reduce(ember.ones(2))
    with pytest.raises(ValueError, match="backend 'nccl' is not supported"):
        dist.init_process_group("nccl")


SCRIPT = """
import os, ember, ember.distributed as dist
from ember.nn.parallel import DistributedDataParallel as DDP
if os.environ.get("MASTER_ADDR"):
    try:
        dist.init_process_group("mpi")
    except (RuntimeError, ValueError) as e:
        print("refused:", e)
        raise SystemExit(0)
dist.init_process_group("mpi")
assert (dist.get_rank(), dist.get_world_size(), dist.is_initialized()) == (0, 1, True)
t = ember.tensor([1.0, 2.0])
dist.all_reduce(t, op=dist.ReduceOp.AVG)
m = DDP(ember.nn.Linear(2, 1))
m(t).sum().backward()
assert m.module.weight.grad is not None
dist.destroy_process_group()
print("single ok", t.tolist())
"""


@pytest.mark.parametrize("env,want", [
    ({}, "single ok [1.0, 2.0]"),
    # as torchrun starts them: no env:// rendezvous, and the error says how to launch instead
    ({"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"},
     "refused: init_process_group: world_size=2 from the environment but this process was not "
     "started by an MPI launcher"),
    ({"RANK": "x", "MASTER_ADDR": "h"}, "refused: init_process_group: rank from the "
     "environment must be an integer, got 'x'"),
    ({"RANK": "0", "WORLD_SIZE": "1"}, "single ok [1.0, 2.0]")])
def test_world_of_one(env, want):
    pytest.importorskip("mpi4py")
    e = dict(os.environ, PYTHONPATH=str(ROOT), **env)
    e.pop("RANK", None) if not env else None
    p = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60,
                       env=e, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert want in p.stdout, p.stdout


def test_rendezvous_init_methods_say_how_to_launch():
    pytest.importorskip("mpi4py")
    import ember.distributed as dist
    for kw in ({"init_method": "tcp://127.0.0.1:23456"}, {"init_method": "file:///tmp/x"},
               {"store": object()}):
        with pytest.raises(RuntimeError, match=r"ember run -n N script.py.*mpich#7805|"
                                               r"mpich#7805.*ember run -n N script.py"):
            dist.init_process_group("mpi", **kw)
        assert not dist.is_initialized()
