"""ember.backends.cudnn (ember/backends/cudnn.py): the flags torch programs set, with torch's
defaults; no cuDNN, so is_available() is False and version() None, as torch without cuDNN."""
import pytest

import ember

torch = pytest.importorskip("torch")


def test_flags_and_queries_as_torch():
    c = ember.backends.cudnn
    assert c.is_available() is False and c.version() is None
    assert (c.enabled, c.benchmark, c.deterministic) == (True, False, False)
    t = torch.backends.cudnn
    assert (c.enabled, c.benchmark, c.deterministic) == (t.enabled, t.benchmark, t.deterministic)


def test_flags_can_be_set(monkeypatch):
    monkeypatch.setattr(ember.backends.cudnn, "benchmark", True)
    monkeypatch.setattr(ember.backends.cudnn, "deterministic", True)
    x = ember.randn(1, 2, 5, 5)
    w = ember.randn(3, 2, 3, 3)
    assert ember.nn.functional.conv2d(x, w).shape == (1, 3, 3, 3)   # nothing changes
