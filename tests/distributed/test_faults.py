"""A failing rank ends the whole job, through mpiexec and through ``ember run``."""
import subprocess
import sys

import pytest

from tests.distributed.helpers import ROOT, SCRIPTS, mpiexec, run_ranks


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


def test_ember_run_launches_ranks_and_aborts_on_failure():
    mpiexec()
    cmd = [sys.executable, "-m", "ember", "run", "-n", "2", str(SCRIPTS / "fail.py"), "--lr", "3"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode != 0
    assert p.stdout.count("['--lr', '3']") == 2, p.stdout  # both ranks got the arguments
    for r in (0, 1):  # and torchrun's variables
        assert f"env ['{r}', '2', '{r}', '2']" in p.stdout, p.stdout
    assert "rank 1 of 2 failed" in p.stderr and "boom on purpose" in p.stderr, p.stderr
    cmd = [sys.executable, "-m", "ember", "run", "-n", "2", str(SCRIPTS / "fail.py"), "exit"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode != 0
    assert "rank 1 of 2 exited with status 3" in p.stderr, p.stderr
    assert "not stopped" not in p.stdout


@pytest.mark.slow  # two short trainings on 2 ranks: ~6 s
def test_ember_run_trains_the_example_and_checkpoints(tmp_path):
    mpiexec()
    ckpt = tmp_path / "ck.safetensors"
    cmd = [sys.executable, "-m", "ember", "run", "-n", "2", str(ROOT / "examples" / "ddp_train.py"),
           "--epochs", "1", "--checkpoint", str(ckpt)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=90, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("epoch 1:") == 1 and "on 2 ranks" in p.stdout, p.stdout
    import ember
    assert ember.load(str(ckpt))["epoch"] == 1
    p = subprocess.run(cmd[:-3] + ["2", "--checkpoint", str(ckpt), "--resume"],
                       capture_output=True, text=True, timeout=90, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert "resumed from" in p.stdout and "epoch 1:" not in p.stdout, p.stdout  # every rank
    assert p.stdout.count("epoch 2:") == 1 and ember.load(str(ckpt))["epoch"] == 2, p.stdout


def test_ember_run_missing_script():
    p = subprocess.run([sys.executable, "-m", "ember", "run", "-n", "2", "no_such.py"],
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode == 2 and "not found" in p.stderr
