"""Lazy modules against torch's: repr before the first call, the full class and parameter
shapes after it, initialisation drawn from the same distributions, an optimizer built before the
first call training the materialized parameters, a state_dict loaded before the first call."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

CASES = [
    ("LazyLinear", (4,), (2, 3)),
    ("LazyLinear", (4, False), (2, 5, 3)),
    ("LazyConv1d", (4, 3), (2, 3, 8)),
    ("LazyConv2d", (4, 3, 1, 1, 1, 2), (2, 6, 5, 5)),
    ("LazyConv3d", (2, 2), (3, 4, 4, 4)),
    ("LazyConvTranspose1d", (4, 3, 2), (2, 3, 5)),
    ("LazyConvTranspose2d", (4, 3), (2, 3, 5, 5)),
    ("LazyConvTranspose3d", (2, 2), (1, 2, 3, 3, 3)),
    ("LazyBatchNorm1d", (), (4, 3)),
    ("LazyBatchNorm2d", (), (2, 3, 4, 4)),
    ("LazyBatchNorm3d", (1e-3, 0.2, False), (2, 3, 2, 2, 2)),
    ("LazyInstanceNorm1d", (), (2, 3, 5)),
    ("LazyInstanceNorm2d", (), (2, 3, 4, 4)),
    ("LazyInstanceNorm3d", (), (2, 3, 2, 2, 2)),
]


@pytest.mark.parametrize("name,args,shape", CASES, ids=[f"{c[0]}{c[1]}" for c in CASES])
def test_lazy_module_becomes_the_full_module_as_torch(name, args, shape):
    em, tm = getattr(ember.nn, name)(*args), getattr(torch.nn, name)(*args)
    assert repr(em) == repr(tm)
    assert em.has_uninitialized_params()
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    ye, yt = em(ember.tensor(x)), tm(torch.tensor(x))
    assert type(em).__name__ == type(tm).__name__ and repr(em) == repr(tm)
    assert tuple(ye.shape) == tuple(yt.shape)
    te = {k: tuple(v.shape) for k, v in em.state_dict().items()}
    assert te == {k: tuple(v.shape) for k, v in tm.state_dict().items()}
    # same module now: with torch's values, the same output
    em.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    em.eval(), tm.eval()
    np.testing.assert_allclose(em(ember.tensor(x)).detach().numpy(),
                               tm(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_lazy_linear_initialises_like_linear():
    ember.manual_seed(3)
    m = ember.nn.LazyLinear(64)
    m(ember.randn(8, 100))
    bound = 1 / np.sqrt(100)
    w = m.weight.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert w.std() == pytest.approx(bound / np.sqrt(3), rel=0.1)


def test_optimizer_built_before_the_first_call_trains_the_materialized_parameters():
    m = ember.nn.Sequential(ember.nn.LazyConv2d(3, 3), ember.nn.ReLU(), ember.nn.Flatten(),
                            ember.nn.LazyLinear(2))
    opt = ember.optim.SGD(m.parameters(), lr=0.1)
    x = ember.randn(4, 1, 6, 6)
    m(x)
    before = [p.detach().numpy().copy() for p in m.parameters()]
    loss = m(x).pow(2).sum()
    loss.backward()
    opt.step()
    after = [p.detach().numpy() for p in m.parameters()]
    assert len(before) == 4 and all(not np.array_equal(a, b) for a, b in zip(before, after))


def test_state_dict_loaded_before_the_first_call_materializes_the_parameters():
    src = ember.nn.Linear(3, 4)
    m = ember.nn.LazyLinear(4)
    m.load_state_dict(src.state_dict())
    assert not m.has_uninitialized_params()
    x = ember.randn(2, 3)
    np.testing.assert_array_equal(m(x).detach().numpy(), src(x).detach().numpy())
    assert type(m) is ember.nn.Linear


def test_lazy_module_errors_name_the_module():
    with pytest.raises(ember.EmberError, match="LazyConv2d: expected a 3-D or 4-D input"):
        ember.nn.LazyConv2d(3, 3)(ember.randn(5, 5))


def test_initialized_lazy_module_keeps_no_hook_of_the_lazy_class():
    """As torch: the first call removes the load_state_dict pre-hook too (it stayed, bound to
    a method of the lazy class the module no longer has, and blocked ember.save(model))."""
    import io
    t = torch.nn.LazyLinear(3)
    t(torch.randn(2, 5))
    m = ember.nn.LazyLinear(3)
    m(ember.randn(2, 5))
    assert len(m._load_state_dict_pre_hooks) == len(t._load_state_dict_pre_hooks) == 0
    assert len(m._forward_pre_hooks) == len(t._forward_pre_hooks) == 0
    buf = io.BytesIO()
    ember.save(m, buf)
    buf.seek(0)
    m2 = ember.load(buf)
    x = ember.randn(4, 5)
    assert type(m2) is ember.nn.Linear and ember.allclose(m2(x), m(x))
