"""Linear, Bilinear and Identity (ember/nn/modules/linear.py) against torch with identical weights:
forward outputs, input and parameter gradients and buffers, in train and eval modes (float64)."""
import pytest

from tests.nn.layer_cases import CASES, cases, check_against_torch


PARAMS = cases(CASES, "linear")


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("name,src,specs", PARAMS, ids=[c[0] for c in PARAMS])
def test_layer_matches_torch(name, src, specs, train):
    check_against_torch(src, specs, train)
