"""parametrizations.weight_norm and spectral_norm (ember/nn/utils/parametrizations.py) against
torch: state_dict keys, forward and gradients with state copied from torch (the power-iteration
vectors too); spectral_norm's estimate of the largest singular value; a legacy weight_norm
checkpoint loads into the parametrization."""
import numpy as np
import pytest

import ember
from tests.nn.utils.parametrized_modules import check_step, copy_state, modules, torch

pytestmark = pytest.mark.filterwarnings("ignore:.*weight_norm.* is deprecated:FutureWarning")


@pytest.mark.parametrize("kind", ["linear", "conv"])
@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_parametrization_matches_torch(kind, dim):
    em, tm, shape = modules(kind)
    em = ember.nn.utils.parametrizations.weight_norm(em, dim=dim)
    tm = torch.nn.utils.parametrizations.weight_norm(tm, dim=dim)
    assert type(em).__name__ == type(tm).__name__
    copy_state(em, tm)
    check_step(em, tm, shape)


@pytest.mark.parametrize("kind", ["linear", "conv", "convT"])
@pytest.mark.parametrize("train", [True, False])
def test_spectral_norm_parametrization_matches_torch(kind, train):
    em, tm, shape = modules(kind)
    em = ember.nn.utils.parametrizations.spectral_norm(em)
    tm = torch.nn.utils.parametrizations.spectral_norm(tm)
    copy_state(em, tm)
    check_step(em, tm, shape, train)


def test_spectral_norm_estimates_the_largest_singular_value():
    # Singular values 3, 1, 0.5, ...: power iteration converges like (1/3)^(2k), so 30 calls leave
    # the estimate exact to float64 whatever the random start vectors are.
    rng = np.random.default_rng(0)
    u, _ = np.linalg.qr(rng.standard_normal((5, 5)))
    v, _ = np.linalg.qr(rng.standard_normal((6, 6)))
    w = u @ np.diag([3.0, 1.0, 0.5, 0.25, 0.125]) @ v[:5]
    lin = ember.nn.Linear(6, 5).double()
    with ember.no_grad():
        lin.weight.copy_(ember.tensor(w))
    m = ember.nn.utils.parametrizations.spectral_norm(lin)
    for _ in range(30):
        m.weight
    np.testing.assert_allclose(np.linalg.svd(m.weight.detach().numpy(), compute_uv=False),
                               np.array([3.0, 1.0, 0.5, 0.25, 0.125]) / 3.0, rtol=1e-10)


def test_legacy_weight_norm_checkpoint_loads_into_the_parametrization():
    torch.manual_seed(0)
    old = torch.nn.utils.weight_norm(torch.nn.Linear(3, 4).double())
    em = ember.nn.utils.parametrizations.weight_norm(ember.nn.Linear(3, 4).double())
    em.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in old.state_dict().items()})
    np.testing.assert_allclose(em.weight.detach().numpy(), old.weight.detach().numpy(), rtol=1e-12)
