"""The ``ember`` command and ``ember demo``."""
import os
import subprocess
import sys

import pytest

import ember
from ember import cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_demo_short_run(tmp_path):
    lines = []
    res = cli.demo(epochs=3, seed=1, out=str(tmp_path), progress=False, log=lines.append)
    assert res["test_accuracy"] >= 0.9
    assert res["restored_accuracy"] == res["test_accuracy"]
    assert os.path.exists(res["checkpoint"])
    ck = ember.load(res["checkpoint"])
    assert ck["epoch"] == 3 and "model" in ck and "optimizer" in ck
    text = "\n".join(lines)
    assert "epoch  1/3" in text and "held-out test" in text and "summary" in text
    assert len(res["batch_seconds"]) == 45 and "first batch" in text  # 1438 images / 32


def test_demo_is_deterministic(tmp_path):
    a = cli.demo(epochs=1, seed=5, out=str(tmp_path / "a"), progress=False, log=lambda s: None)
    b = cli.demo(epochs=1, seed=5, out=str(tmp_path / "b"), progress=False, log=lambda s: None)
    assert a["history"] == b["history"]


def test_main_help(tmp_path):
    with pytest.raises(SystemExit) as e:
        cli.main(["demo", "--help"])
    assert e.value.code == 0
    assert cli.main([]) == 0


def test_main_runs_demo(tmp_path, capsys):
    assert cli.main(["demo", "--epochs", "1", "--out", str(tmp_path), "--no-progress"]) == 0
    assert "summary" in capsys.readouterr().out
    assert os.path.exists(tmp_path / "lenet_digits.safetensors")
