"""ember.backends.mps (ember/backends/mps.py): no Metal backend, and a tensor sent to "mps" is
refused naming the device."""
import pytest

import ember
from ember.errors import UnsupportedError


def test_not_available_nor_built():
    assert ember.backends.mps.is_available() is False
    assert ember.backends.mps.is_built() is False


def test_an_mps_device_is_refused_naming_it():
    with pytest.raises(UnsupportedError, match="'mps'"):
        ember.ones(2).to("mps")
