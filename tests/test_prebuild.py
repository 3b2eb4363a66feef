"""ember/prebuild.py: the install-time kernel build's training steps run in a child process and
report where their pointwise kernels went; ``ember prebuild`` runs the build and reports a
failed one."""
import os
import subprocess
import sys

import ember.cli
from ember.kernels.runtime import prebuilt


def test_the_build_child_runs_every_workload_and_names_its_pointwise_cache(tmp_path):
    # NumPy paths only (no compile): the steps themselves, as the build's child runs them
    env = dict(os.environ, EMBER_JIT_COMPILE="off", EMBER_PREBUILT="0",
               NUMBA_CACHE_DIR=str(tmp_path / "numba"), EMBER_CACHE_DIR=str(tmp_path / "ember"))
    r = subprocess.run([sys.executable, "-m", "ember.prebuild"], env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    last = r.stdout.strip().splitlines()[-1]
    assert os.path.commonpath([last, str(tmp_path / "ember")]) == str(tmp_path / "ember"), last


def test_cli_prebuild_builds_into_the_given_directory(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(prebuilt, "build", lambda root=None, quiet=False: calls.append(root))
    assert ember.cli.main(["prebuild", str(tmp_path)]) == 0
    assert calls == [str(tmp_path)]


def test_cli_prebuild_reports_a_failed_build(monkeypatch, capsys):
    def fail(root=None, quiet=False):
        raise RuntimeError("ember prebuilt kernels: the build's workloads failed: boom")
    monkeypatch.setattr(prebuilt, "build", fail)
    assert ember.cli.main(["prebuild"]) == 1
    assert "the build's workloads failed: boom" in capsys.readouterr().err
