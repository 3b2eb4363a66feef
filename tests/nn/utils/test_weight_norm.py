"""The legacy nn.utils.weight_norm (ember/nn/utils/weight_norm.py) against torch: deprecation
warning, state_dict keys, forward and gradients with state copied from torch."""
import pytest

import ember
from tests.nn.utils.parametrized_modules import check_step, copy_state, modules, torch

pytestmark = pytest.mark.filterwarnings("ignore:.*weight_norm.* is deprecated:FutureWarning")


@pytest.mark.parametrize("kind", ["linear", "conv"])
def test_legacy_weight_norm_matches_torch(kind):
    em, tm, shape = modules(kind)
    with pytest.warns(FutureWarning, match="parametrizations.weight_norm"):
        em = ember.nn.utils.weight_norm(em)
    tm = torch.nn.utils.weight_norm(tm)
    copy_state(em, tm)
    check_step(em, tm, shape)
