"""Launch a script under ``mpiexec -n N`` with a timeout, so a hang fails the test."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).parent / "scripts"
ROOT = Path(__file__).resolve().parents[2]


def mpiexec():
    """The mpiexec beside this interpreter, else on PATH; skip when none or no mpi4py."""
    pytest.importorskip("mpi4py")
    exe = Path(sys.executable).with_name("mpiexec")
    found = str(exe) if exe.exists() else shutil.which("mpiexec")
    if found is None:
        pytest.skip("mpiexec not found")
    return found


def run_ranks(script, n, *args, timeout=60, check=True, env=None):
    """Run tests/distributed/scripts/``script`` on ``n`` ranks; returns the CompletedProcess."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1", **(env or {}))
    cmd = [mpiexec(), "-n", str(n), sys.executable, str(SCRIPTS / script), *map(str, args)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
    if check:
        assert p.returncode == 0, f"rc={p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    return p


def ok_ranks(stdout):
    """The ranks that printed "OK rank R" (output of ranks may interleave on one line)."""
    return sorted(int(k) for k in re.findall(r"OK rank (\d+)", stdout))
