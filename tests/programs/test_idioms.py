"""Training scripts written in current torch idioms run unchanged through the import alias and
print torch's numbers: tests/programs/idioms/current_torch.py (swa_utils EMA, SequentialLR
warm-up + cosine, StackDataset, channels-last, get_total_norm + clip_grads_with_norm_,
sdpa_kernel, fill_diagonal_, update_bn, torch.func per-sample gradients) and
sequence_model.py (a pre-norm causal TransformerEncoder with a padding mask, packed
bidirectional LSTM, gradient accumulation, AMSGrad with a LambdaLR warm-up, torch.save /
torch.load(weights_only=True) of the state dicts, inference_mode, top-k) and inference.py
(device selection, cudnn.benchmark, torch.compile of an eval net with depthwise blocks,
interpolate, grid_sample, cdist, einsum, quantile, bucketize, unique, index_add_,
scatter_add_, masked_select, distributions and kl_divergence) and framework.py (a custom
autograd.Function with saved tensors, gradcheck, ModuleDict, a non-persistent buffer,
parametrizations.weight_norm, non-reentrant checkpoint, forward hooks and their removal,
Module.apply, an inference_mode decorator)."""
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.programs.test_pytorch_examples import RUNNER

IDIOMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "idioms")
# program -> (the lines it prints, the relative tolerance: float32 where it computes in it)
PROGRAMS = {"current_torch.py": ({"losses", "lrs", "sim", "ema_n", "per_sample"}, 1e-8),
            "sequence_model.py": ({"losses", "lr", "probs", "top", "autocast"}, 1e-8),
            "inference.py": ({"net", "resample", "geometry", "counting", "dist", "device"}, 1e-5),
            "framework.py": ({"out", "grads", "keys", "hook", "pred"}, 1e-10)}


def _run(backend, program, cwd):
    out = subprocess.run([sys.executable, RUNNER, backend, os.path.join(IDIOMS, program)],
                         cwd=cwd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return {line.split()[0]: line.split()[1:] for line in out.stdout.splitlines() if line}


def _numbers(words):
    return [float(w.strip("(),")) if w.strip("(),").lstrip("-").replace(".", "", 1).isdigit()
            else w for w in words]


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_current_torch_idioms_run_unchanged_and_match_torch(program, tmp_path):
    pytest.importorskip("torch")
    ours, theirs = _run("ember", program, tmp_path), _run("torch", program, tmp_path)
    lines, rtol = PROGRAMS[program]
    assert ours.keys() == theirs.keys() == lines
    for key in theirs:
        a, b = _numbers(ours[key]), _numbers(theirs[key])
        assert [type(v) for v in a] == [type(v) for v in b], key
        assert [v for v in a if isinstance(v, str)] == [v for v in b if isinstance(v, str)], key
        np.testing.assert_allclose([v for v in a if not isinstance(v, str)],
                                   [v for v in b if not isinstance(v, str)], rtol=rtol,
                                   err_msg=key)
