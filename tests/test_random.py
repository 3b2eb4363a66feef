"""Random number generation (ember/random.py): manual_seed, initial_seed, get/set_rng_state and
Generator objects behave as torch's (same seed, same draws again; independent generators; state
round trips), and a generator argument that is not a Generator is refused."""
import numpy as np
import pytest

import ember
from ember import random as R

torch = pytest.importorskip("torch")


def test_manual_seed_returns_the_default_generator_and_replays():
    for m in (torch, ember):
        g = m.manual_seed(123)
        assert g is m.default_generator if m is torch else g is R.default_generator
        assert m.initial_seed() == 123
        a = m.rand(5).numpy()
        m.manual_seed(123)
        np.testing.assert_array_equal(m.rand(5).numpy(), a)


def test_rng_state_round_trips():
    for m in (torch, ember):
        m.manual_seed(0)
        state = m.get_rng_state()
        a = m.randn(4).numpy()
        m.rand(3)
        m.set_rng_state(state)
        np.testing.assert_array_equal(m.randn(4).numpy(), a)


def test_rng_state_is_a_byte_tensor_that_saves_and_restores_the_seed(tmp_path):
    """A checkpoint keeps ``get_rng_state()`` as torch's ByteTensor: clone, save, load."""
    ember.manual_seed(11)
    ember.rand(3)
    state = ember.get_rng_state().clone()
    assert state.dtype == ember.uint8 and state.dim() == 1 and state.shape == (R.STATE_BYTES,)
    a = ember.randn(5).numpy()
    ember.manual_seed(99)
    ember.save({"rng_state": state}, tmp_path / "ck.pt")
    ember.set_rng_state(ember.load(tmp_path / "ck.pt")["rng_state"])
    np.testing.assert_array_equal(ember.randn(5).numpy(), a)
    assert ember.initial_seed() == 11
    g = ember.Generator().manual_seed(4)
    s = g.get_state()
    b = ember.rand(4, generator=g).numpy()
    np.testing.assert_array_equal(ember.rand(4, generator=g.set_state(s)).numpy(), b)


def test_set_rng_state_refuses_what_is_not_a_state():
    for m in (torch, ember):
        with pytest.raises(TypeError, match="expected a torch.ByteTensor, but got list"):
            m.set_rng_state([1, 2])
        with pytest.raises(TypeError, match="RNG state must be a torch.ByteTensor"):
            m.set_rng_state(m.zeros(3))
        with pytest.raises(RuntimeError, match="input RNG state size to be 3"):
            m.set_rng_state(m.zeros(3, dtype=m.uint8))


def test_fork_rng_restores_the_stream_outside_it():
    for m in (torch, ember):
        m.manual_seed(2)
        a = m.rand(3).numpy()
        m.manual_seed(2)
        with m.random.fork_rng():
            m.rand(10)
        np.testing.assert_array_equal(m.rand(3).numpy(), a)
        m.manual_seed(2)
        with m.random.fork_rng(enabled=False):
            m.rand(10)
        assert not np.array_equal(m.rand(3).numpy(), a)


def test_generators_are_independent_of_the_default_one():
    g1, g2 = ember.Generator().manual_seed(7), ember.Generator().manual_seed(7)
    ember.manual_seed(99)
    a = ember.rand(4, generator=g1).numpy()
    ember.rand(10)                                   # the default stream moves, g2 does not
    np.testing.assert_array_equal(ember.rand(4, generator=g2).numpy(), a)
    assert g1.initial_seed() == 7


def test_seed_draws_a_fresh_seed():
    s = ember.seed()
    assert isinstance(s, int) and 0 <= s < 2 ** 64 and ember.initial_seed() == s


def test_resolve_refuses_what_is_not_a_generator():
    assert R.resolve(None) is R.default_generator
    g = ember.Generator()
    assert R.resolve(g) is g
    with pytest.raises(TypeError, match="generator must be an ember.Generator, got int"):
        R.resolve(3)
