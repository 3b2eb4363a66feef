"""A training script written in current torch idioms (tests/programs/idioms/current_torch.py:
swa_utils EMA, SequentialLR warm-up + cosine, StackDataset, channels-last, get_total_norm +
clip_grads_with_norm_, sdpa_kernel, fill_diagonal_, update_bn, torch.func per-sample
gradients) runs unchanged through the import alias and prints torch's numbers."""
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.programs.test_pytorch_examples import RUNNER

PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "idioms", "current_torch.py")


def _run(backend, cwd):
    out = subprocess.run([sys.executable, RUNNER, backend, PROGRAM], cwd=cwd,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return {line.split()[0]: line.split()[1:] for line in out.stdout.splitlines() if line}


def _numbers(words):
    return np.array([float(w.strip("(),")) for w in words])


def test_current_torch_idioms_run_unchanged_and_match_torch(tmp_path):
    pytest.importorskip("torch")
    ours, theirs = _run("ember", tmp_path), _run("torch", tmp_path)
    assert ours.keys() == theirs.keys() == {"losses", "lrs", "sim", "ema_n", "per_sample"}
    for key in theirs:
        np.testing.assert_allclose(_numbers(ours[key]), _numbers(theirs[key]), rtol=1e-8,
                                   err_msg=key)
