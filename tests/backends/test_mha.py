"""ember.backends.mha (ember/backends/mha.py): the fast-path switch, as torch's (its effect on
the transformer modules: tests/nn/modules/test_transformer.py)."""
import pytest

import ember

torch = pytest.importorskip("torch")


def test_get_and_set_as_torch():
    m = ember.backends.mha
    assert m.get_fastpath_enabled() is torch.backends.mha.get_fastpath_enabled() is True
    try:
        m.set_fastpath_enabled(False)
        assert m.get_fastpath_enabled() is False
    finally:
        m.set_fastpath_enabled(True)
    assert m.get_fastpath_enabled() is True
