"""The normalization layers (ember/nn/modules/normalization.py: batch, layer, group and instance
norm) against torch with identical weights, in train and eval modes (float64); InstanceNorm with
track_running_stats: training moves the running statistics as torch's, eval normalises with
them."""
import numpy as np
import pytest

import ember
from tests.nn import layer_cases

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("momentum", [0.1, None])
def test_instance_norm_running_stats_match_torch(momentum):
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 4)).astype(np.float32) * 2 + 1
    kw = dict(affine=True, track_running_stats=True, momentum=momentum)
    em, tm = ember.nn.InstanceNorm2d(3, **kw), torch.nn.InstanceNorm2d(3, **kw)
    for _ in range(2):
        np.testing.assert_allclose(em(ember.tensor(x)).detach().numpy(),
                                   tm(torch.tensor(x)).detach().numpy(), atol=1e-5)
    for k in ("running_mean", "running_var"):
        np.testing.assert_allclose(getattr(em, k).numpy(), getattr(tm, k).numpy(), rtol=1e-5,
                                   atol=1e-7)
    em.eval(), tm.eval()
    np.testing.assert_allclose(em(ember.tensor(x)).detach().numpy(),
                               tm(torch.tensor(x)).detach().numpy(), atol=1e-5)


def test_functional_instance_norm_without_stats_in_eval_is_an_error():
    with pytest.raises(ember.EmberError, match="running_mean and running_var"):
        ember.nn.functional.instance_norm(ember.randn(2, 3, 4), use_input_stats=False)


LAYER_CASES = layer_cases.cases(layer_cases.CASES, "normalization")


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("name,src,specs", LAYER_CASES, ids=[c[0] for c in LAYER_CASES])
def test_layer_matches_torch(name, src, specs, train):
    layer_cases.check_against_torch(src, specs, train)
