"""Runs tests/differential/opdb_body.py (ember against torch on op_db's entries) in a child
process: after its examples the process's heap is corrupted (a later test in the same process
aborts with "double free or corruption"; the op responsible is not pinned yet), so they must not
share a process with the rest of the suite."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("expecttest")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_opdb_entry_matches_torch():
    body = os.path.join(os.path.dirname(os.path.abspath(__file__)), "opdb_body.py")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           body], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, (done.stdout + done.stderr)[-20000:]
