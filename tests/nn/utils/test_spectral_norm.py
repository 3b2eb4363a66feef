"""The legacy nn.utils.spectral_norm (ember/nn/utils/spectral_norm.py) against torch: state_dict
keys (the power-iteration vectors too), forward and gradients with state copied from torch, and
remove_spectral_norm."""
import numpy as np
import pytest

import ember
from tests.nn.utils.parametrized_modules import check_step, copy_state, modules, torch


@pytest.mark.parametrize("kind", ["linear", "conv"])
def test_legacy_spectral_norm_matches_torch_and_is_removed_as_torch(kind):
    em, tm, shape = modules(kind)
    em, tm = ember.nn.utils.spectral_norm(em), torch.nn.utils.spectral_norm(tm)
    copy_state(em, tm)
    check_step(em, tm, shape)
    ember.nn.utils.remove_spectral_norm(em)
    torch.nn.utils.remove_spectral_norm(tm)
    assert list(em.state_dict()) == list(tm.state_dict())
    np.testing.assert_allclose(em.weight.detach().numpy(), tm.weight.detach().numpy(), rtol=1e-10)
