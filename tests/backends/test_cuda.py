"""ember.backends.cuda (ember/backends/cuda.py): not built with CUDA; the matmul flags torch
programs set keep torch's defaults and change nothing."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def test_not_built_and_torchs_matmul_defaults():
    m = ember.backends.cuda.matmul
    assert ember.backends.cuda.is_built() is False
    assert m.allow_tf32 is torch.backends.cuda.matmul.allow_tf32 is False
    assert m.allow_fp16_reduced_precision_reduction is True
    assert m.allow_bf16_reduced_precision_reduction is True


def test_setting_allow_tf32_changes_no_result(monkeypatch):
    a = np.random.default_rng(0).standard_normal((8, 8)).astype(np.float32)
    want = (ember.tensor(a) @ ember.tensor(a)).numpy()
    monkeypatch.setattr(ember.backends.cuda.matmul, "allow_tf32", True)
    np.testing.assert_array_equal((ember.tensor(a) @ ember.tensor(a)).numpy(), want)
