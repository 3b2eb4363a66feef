"""The loss modules (ember/nn/modules/loss.py) against torch with identical weights: forward
outputs, input and parameter gradients and buffers (float64)."""
import pytest

from tests.nn.layer_cases import LOSSES, cases, check_against_torch


PARAMS = cases(LOSSES, "loss")


@pytest.mark.parametrize("name,src,specs", PARAMS, ids=[c[0] for c in PARAMS])
def test_loss_module_matches_torch(name, src, specs):
    check_against_torch(src, specs, True, nograd=(1,))
