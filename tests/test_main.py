"""``python -m ember`` (ember/__main__.py) runs the ``ember`` command: its help and exit codes
from a fresh interpreter in another folder."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_python_m_ember_runs_the_command(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-m", "ember", "demo", "--help"], capture_output=True,
                         text=True, env=env, cwd=str(tmp_path), timeout=60)
    assert out.returncode == 0 and "--epochs" in out.stdout and "--seed" in out.stdout
    assert "--out" in out.stdout
    bad = subprocess.run([sys.executable, "-m", "ember", "no-such-command"], capture_output=True,
                         text=True, env=env, cwd=str(tmp_path), timeout=60)
    assert bad.returncode != 0 and "no-such-command" in bad.stderr
