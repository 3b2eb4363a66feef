"""A failing rank ends the whole job under mpiexec (the abort hooks of ember/distributed/group.py),
collective timeouts abort, and debug mode names the rank calling another collective."""

import pytest

from tests.distributed.helpers import run_ranks


def test_raising_rank_aborts_every_rank():
    p = run_ranks("fail.py", 2, check=False, timeout=60)
    assert p.returncode != 0
    assert "rank 1 of 2 failed" in p.stderr and "boom on purpose" in p.stderr, p.stderr
    assert "not stopped" not in p.stdout


def test_rank_calling_sys_exit_aborts_every_rank_under_plain_mpiexec():
    # without the exit handler rank 1 waits in MPI_Finalize and rank 0 in all_reduce: a hang
    p = run_ranks("fail.py", 2, "exit", check=False, timeout=30)
    assert p.returncode == 3, (p.returncode, p.stderr)
    assert "rank 1 of 2 exited with status 3; aborting all ranks" in p.stderr, p.stderr
    assert "not stopped" not in p.stdout


@pytest.mark.parametrize("mode", ["exit0", "exit_caught"])
def test_clean_sys_exit_on_every_rank_is_not_aborted(mode):
    p = run_ranks("fail.py", 2, mode, timeout=30)
    assert "aborting" not in p.stderr and p.stdout.count("was not stopped") == 2, p.stdout


def test_rank_exiting_cleanly_while_others_wait_ends_within_the_timeout():
    p = run_ranks("fail.py", 2, "exit0early", check=False, timeout=25)
    assert p.returncode != 0
    assert "all_reduce: timed out after 1 s on rank 0" in p.stderr, p.stderr


@pytest.mark.parametrize("mode,op", [("timeout", "all_reduce"),
                                     ("timeout_obj", "all_gather_object")])
def test_collective_timeout_aborts(mode, op):
    p = run_ranks("fail.py", 2, mode, check=False, timeout=25)
    assert p.returncode != 0
    assert f"{op}: timed out after 1 s on rank 0" in p.stderr, p.stderr


def test_debug_mode_names_the_rank_with_another_collective():
    p = run_ranks("fail.py", 2, "mismatch", check=False, env={"EMBER_DISTRIBUTED_DEBUG": "DETAIL"})
    assert p.returncode != 0
    assert "collective mismatch" in p.stderr and "rank 1 called" in p.stderr, p.stderr
    assert "[4]" in p.stderr and "not stopped" not in p.stdout


def test_debug_mode_names_the_rank_calling_another_collective():
    p = run_ranks("fail.py", 2, "mismatch_op", check=False,
                  env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL"})
    assert p.returncode != 0
    assert "collective mismatch" in p.stderr and '"op": "broadcast"' in p.stderr, p.stderr
    assert "not stopped" not in p.stdout


