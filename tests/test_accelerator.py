"""ember.accelerator (ember/accelerator.py) answers as torch.accelerator on a machine without an
accelerator: nothing available, no device; what needs one is a clear UnsupportedError."""
import pytest

import ember
from ember.errors import UnsupportedError

torch = pytest.importorskip("torch")


def test_queries_answer_as_torch_without_an_accelerator():
    assert ember.accelerator.is_available() is False
    assert ember.accelerator.device_count() == 0
    assert ember.accelerator.current_accelerator() is None
    if not torch.accelerator.is_available():
        assert ember.accelerator.device_count() == torch.accelerator.device_count()
        assert torch.accelerator.current_accelerator() is None


@pytest.mark.parametrize("call", [lambda: ember.accelerator.synchronize(),
                                  lambda: ember.accelerator.current_device_index(),
                                  lambda: ember.accelerator.set_device_index(0)])
def test_what_needs_a_device_is_an_unsupported_error(call):
    with pytest.raises(UnsupportedError, match="accelerator"):
        call()
