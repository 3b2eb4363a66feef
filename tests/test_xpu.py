"""ember.xpu answers as torch.xpu does on a machine without an Intel GPU."""
import pytest

import ember


def test_no_xpu_device_as_torch_without_one():
    torch = pytest.importorskip("torch")
    assert ember.xpu.is_available() is torch.xpu.is_available() is False
    assert ember.xpu.device_count() == torch.xpu.device_count() == 0
    assert ember.xpu.manual_seed(0) is None and ember.xpu.manual_seed_all(0) is None
    device = "cuda" if ember.cuda.is_available() else "xpu" if ember.xpu.is_available() else "cpu"
    assert ember.ones(2, device=device).device.type == "cpu"
