"""Random number generation: ``ember.Generator`` and the default generator behind ``manual_seed``."""
import os

import numpy as np


def _entropy_seed():
    """A seed from OS entropy, in [0, 2**63)."""
    return int.from_bytes(os.urandom(16), "little") % (2 ** 63)


class Generator:
    """A seeded source of random numbers (a NumPy PCG64 generator underneath, made on first
    draw so that ``import ember`` does not import ``numpy.random``).

    Kernels draw from it through the NumPy Generator methods it forwards.
    """

    __slots__ = ("_np_rng", "_seed", "device")

    def __init__(self, device="cpu"):
        if device != "cpu":
            from ember.tensor import check_device
            check_device(device, "Generator")
        self.device = device
        self._seed = _entropy_seed()
        self._np_rng = None

    @property
    def _rng(self):
        """The NumPy Generator seeded with ``self._seed`` (made on first use)."""
        if self._np_rng is None:
            self._np_rng = np.random.default_rng(self._seed)
        return self._np_rng

    def manual_seed(self, seed):
        """Reseed; returns self."""
        seed = int(seed)
        if seed < 0:
            seed &= 0xFFFF_FFFF_FFFF_FFFF
        self._seed = seed
        self._np_rng = None
        return self

    def seed(self):
        """Reseed from OS entropy and return the new seed."""
        self.manual_seed(_entropy_seed())
        return self._seed

    def initial_seed(self):
        """The seed last set."""
        return self._seed

    def get_state(self):
        """The generator state as a dict (JSON-serialisable)."""
        return self._rng.bit_generator.state

    def set_state(self, state):
        """Restore a state from ``get_state``."""
        self._rng.bit_generator.state = state
        return self

    def __repr__(self):
        return f"<ember.Generator seed={self._seed}>"

    # the NumPy Generator surface used by kernels
    def random(self, size):
        return self._rng.random(size)

    def standard_normal(self, size):
        return self._rng.standard_normal(size)

    def integers(self, low, high, size):
        return self._rng.integers(low, high, size)

    def permutation(self, n):
        return self._rng.permutation(n)

    def choice(self, *args, **kwargs):
        return self._rng.choice(*args, **kwargs)

    def poisson(self, lam):
        return self._rng.poisson(lam)

    def binomial(self, n, p):
        return self._rng.binomial(n, p)


default_generator = Generator()


def manual_seed(seed):
    """Seed the default generator (and NumPy's legacy global one); returns the generator."""
    np.random.seed(int(seed) % (2 ** 32))
    return default_generator.manual_seed(seed)


def seed():
    """Reseed the default generator from entropy; returns the seed."""
    return default_generator.seed()


def initial_seed():
    """The default generator's seed."""
    return default_generator.initial_seed()


def get_rng_state():
    """The default generator's state."""
    return default_generator.get_state()


def set_rng_state(state):
    """Restore the default generator's state."""
    default_generator.set_state(state)


def resolve(generator):
    """The generator to draw from: ``generator`` or the default one."""
    if generator is None:
        return default_generator
    if not isinstance(generator, Generator):
        raise TypeError(f"generator must be an ember.Generator, got {type(generator).__name__}")
    return generator
