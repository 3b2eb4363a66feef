"""ember.mps answers as torch.mps does on a machine without Apple's MPS backend."""
import pytest

import ember


def test_seeding_does_nothing_and_device_work_raises_as_torch_without_mps():
    torch = pytest.importorskip("torch")
    assert ember.backends.mps.is_available() is torch.backends.mps.is_available() is False
    assert ember.mps.manual_seed(0) is None and torch.mps.manual_seed(0) is None
    assert ember.mps.device_count() == 0
    for name in ("empty_cache", "synchronize"):
        with pytest.raises(RuntimeError) as theirs:
            getattr(torch.mps, name)()
        with pytest.raises(RuntimeError) as ours:
            getattr(ember.mps, name)()
        assert str(ours.value) == str(theirs.value)
