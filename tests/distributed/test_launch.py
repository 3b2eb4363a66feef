"""``ember run -n N script.py`` (ember/distributed/launch.py): every rank gets the script's
arguments and torchrun's variables, a failing or exiting rank ends the job naming it, the DDP
example trains and resumes from its checkpoint, a missing script is an error."""
import subprocess
import sys

import pytest

from tests.distributed.helpers import ROOT, SCRIPTS, mpiexec


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
