"""nn.utils.parametrize, parametrizations.weight_norm / spectral_norm and the legacy
nn.utils.weight_norm / spectral_norm against torch: state_dict keys, forward and gradients with
state copied from torch (the power-iteration vectors too), assignment through right_inverse,
caching, removal."""
import numpy as np
import pytest

import ember
from ember.nn.utils import parametrize as P

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore:.*weight_norm.* is deprecated:FutureWarning")


def _copy_state(em, tm):
    assert list(em.state_dict()) == list(tm.state_dict())
    em.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})


def _modules(kind):
    torch.manual_seed(0)
    if kind == "linear":
        return ember.nn.Linear(3, 4).double(), torch.nn.Linear(3, 4).double(), (5, 3)
    if kind == "conv":
        return ember.nn.Conv2d(2, 3, 3).double(), torch.nn.Conv2d(2, 3, 3).double(), (2, 2, 5, 5)
    return (ember.nn.ConvTranspose2d(2, 3, 3).double(), torch.nn.ConvTranspose2d(2, 3, 3).double(),
            (2, 2, 4, 4))


def _check_step(em, tm, shape, train=True):
    x = np.random.default_rng(1).standard_normal(shape)
    em.train(train)
    tm.train(train)
    ye, yt = em(ember.tensor(x)), tm(torch.tensor(x))
    np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), rtol=1e-10, atol=1e-12)
    (ye * ye).sum().backward()
    (yt * yt).sum().backward()
    pt = dict(tm.named_parameters())
    for k, p in em.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), pt[k].grad.numpy(), rtol=1e-9, atol=1e-11,
                                   err_msg=k)
    for k, b in dict(tm.named_buffers()).items():
        np.testing.assert_allclose(dict(em.named_buffers())[k].numpy(), b.numpy(), rtol=1e-10,
                                   err_msg=k)


@pytest.mark.parametrize("kind", ["linear", "conv"])
@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_parametrization_matches_torch(kind, dim):
    em, tm, shape = _modules(kind)
    em = ember.nn.utils.parametrizations.weight_norm(em, dim=dim)
    tm = torch.nn.utils.parametrizations.weight_norm(tm, dim=dim)
    assert type(em).__name__ == type(tm).__name__
    _copy_state(em, tm)
    _check_step(em, tm, shape)


@pytest.mark.parametrize("kind", ["linear", "conv", "convT"])
@pytest.mark.parametrize("train", [True, False])
def test_spectral_norm_parametrization_matches_torch(kind, train):
    em, tm, shape = _modules(kind)
    em = ember.nn.utils.parametrizations.spectral_norm(em)
    tm = torch.nn.utils.parametrizations.spectral_norm(tm)
    _copy_state(em, tm)
    _check_step(em, tm, shape, train)


def test_spectral_norm_estimates_the_largest_singular_value():
    m = ember.nn.utils.parametrizations.spectral_norm(ember.nn.Linear(6, 5).double())
    w = m.parametrizations.weight.original.detach().numpy()
    for _ in range(30):
        m.weight
    np.testing.assert_allclose(np.linalg.svd(m.weight.detach().numpy(), compute_uv=False)[0], 1.0,
                               rtol=1e-8)
    assert np.linalg.svd(w, compute_uv=False)[0] != pytest.approx(1.0)


@pytest.mark.parametrize("kind", ["linear", "conv"])
def test_legacy_weight_norm_and_spectral_norm_match_torch(kind):
    em, tm, shape = _modules(kind)
    with pytest.warns(FutureWarning, match="parametrizations.weight_norm"):
        em = ember.nn.utils.weight_norm(em)
    tm = torch.nn.utils.weight_norm(tm)
    _copy_state(em, tm)
    _check_step(em, tm, shape)
    em, tm, shape = _modules(kind)
    em, tm = ember.nn.utils.spectral_norm(em), torch.nn.utils.spectral_norm(tm)
    _copy_state(em, tm)
    _check_step(em, tm, shape)
    ember.nn.utils.remove_spectral_norm(em)
    torch.nn.utils.remove_spectral_norm(tm)
    assert list(em.state_dict()) == list(tm.state_dict())
    np.testing.assert_allclose(em.weight.detach().numpy(), tm.weight.detach().numpy(), rtol=1e-10)


def test_legacy_weight_norm_checkpoint_loads_into_the_parametrization():
    torch.manual_seed(0)
    old = torch.nn.utils.weight_norm(torch.nn.Linear(3, 4).double())
    em = ember.nn.utils.parametrizations.weight_norm(ember.nn.Linear(3, 4).double())
    em.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in old.state_dict().items()})
    np.testing.assert_allclose(em.weight.detach().numpy(), old.weight.detach().numpy(), rtol=1e-12)


class _Symmetric(ember.nn.Module):
    def forward(self, X):
        return X.triu() + X.triu(1).transpose(-1, -2)

    def right_inverse(self, A):
        return A.triu()


class _Scale(ember.nn.Module):
    def forward(self, X):
        return X * 2.0

    def right_inverse(self, A):
        return A / 2.0


def test_register_assign_cache_and_remove():
    m = ember.nn.Linear(3, 3)
    P.register_parametrization(m, "weight", _Symmetric())
    assert P.is_parametrized(m) and P.is_parametrized(m, "weight")
    assert not P.is_parametrized(m, "bias")
    assert type(m).__name__ == "ParametrizedLinear"
    assert P.type_before_parametrizations(m) is ember.nn.Linear
    w = m.weight.detach().numpy()
    np.testing.assert_array_equal(w, w.T)
    P.register_parametrization(m, "weight", _Scale())            # the chain grows
    assert len(m.parametrizations.weight) == 2
    A = np.arange(9.0).reshape(3, 3)
    A = A + A.T
    m.weight = ember.tensor(A, dtype=ember.float32)              # through right_inverse
    np.testing.assert_allclose(m.weight.detach().numpy(), A, rtol=1e-6)
    with P.cached():
        assert m.weight is m.weight
    assert m.weight is not m.weight
    (m(ember.ones(2, 3)).sum()).backward()
    assert m.parametrizations.weight.original.grad is not None
    P.remove_parametrizations(m, "weight")
    assert type(m) is ember.nn.Linear and "weight" in dict(m.named_parameters())
    np.testing.assert_allclose(m.weight.detach().numpy(), A, rtol=1e-6)


def test_parametrization_errors_name_the_problem():
    m = ember.nn.Linear(3, 3)
    with pytest.raises(ember.EmberError, match="no parameter, buffer or parametrized element"):
        P.register_parametrization(m, "nope", _Scale())
    with pytest.raises(ember.EmberError, match="does not have a parametrization on weight"):
        P.remove_parametrizations(m, "weight")
    ember.nn.utils.parametrizations.weight_norm(m)
    with pytest.raises(ember.EmberError, match="leave_parametrized=False"):
        P.remove_parametrizations(m, "weight", leave_parametrized=False)
