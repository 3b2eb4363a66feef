"""torch's deprecated device-specific amp spellings (ember/amp/_deprecated.py), against torch:
ember.cpu.amp.autocast and GradScaler warn with torch's FutureWarning and act as ember.amp's
for "cpu"; the cuda ones warn and are disabled."""
import pytest
import torch

import ember


@pytest.mark.parametrize("m", [torch, ember], ids=["torch", "ember"])
def test_cpu_autocast_warns_and_defaults_to_bfloat16(m):
    with pytest.warns(FutureWarning, match=r"torch.cpu.amp.autocast\(args...\)` is deprecated"):
        ctx = m.cpu.amp.autocast()
    with ctx:
        assert m.is_autocast_enabled("cpu") and m.get_autocast_dtype("cpu") == m.bfloat16
    with pytest.warns(FutureWarning):
        ctx = m.cpu.amp.autocast(dtype=m.float16)
    with ctx:
        assert (m.ones(2, 2) @ m.ones(2, 2)).dtype == m.float16
    with pytest.warns(FutureWarning):
        ctx = m.cpu.amp.autocast(enabled=False)
    with ctx:
        assert not m.is_autocast_enabled("cpu")


@pytest.mark.parametrize("m", [torch, ember], ids=["torch", "ember"])
def test_cpu_grad_scaler_warns_and_scales(m):
    with pytest.warns(FutureWarning, match="torch.cpu.amp.GradScaler"):
        s = m.cpu.amp.GradScaler(init_scale=8.0)
    assert s.is_enabled() and float(s.get_scale()) == 8.0
    assert float(s.scale(m.tensor(1.5))) == 12.0
