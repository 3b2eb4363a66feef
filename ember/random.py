"""Random number generation: ``ember.Generator`` and the default generator behind ``manual_seed``."""
import contextlib
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
        """The generator state as a uint8 tensor (torch's ByteTensor, of ``STATE_BYTES``
        bytes: the seed, the PCG64 state and increment, the cached half-word) that
        ``set_state`` restores."""
        from ember.tensor import Tensor
        s = self._rng.bit_generator.state
        raw = (self._seed.to_bytes(8, "little") + s["state"]["state"].to_bytes(16, "little")
               + s["state"]["inc"].to_bytes(16, "little") + bytes([s["has_uint32"]])
               + s["uinteger"].to_bytes(4, "little"))
        return Tensor._make(np.frombuffer(raw, np.uint8).copy())

    def set_state(self, new_state):
        """Restore a state from ``get_state``; returns self.

        Raises TypeError when ``new_state`` is not a uint8 tensor and RuntimeError when it is
        not ``STATE_BYTES`` long.
        """
        from ember.errors import EmberRuntimeError, EmberTypeError
        from ember.tensor import Tensor
        if not isinstance(new_state, Tensor):
            raise EmberTypeError("expected a torch.ByteTensor, but got "
                                 f"{type(new_state).__name__}")
        if new_state._data.dtype != np.uint8:
            raise EmberTypeError("RNG state must be a torch.ByteTensor")
        raw = new_state._data.tobytes()
        if len(raw) != STATE_BYTES:
            raise EmberRuntimeError(f"Expected an ember Generator state of size {STATE_BYTES} "
                                    f"but found the input RNG state size to be {len(raw)}")
        word = lambda lo, hi: int.from_bytes(raw[lo:hi], "little")
        rng = np.random.default_rng()
        rng.bit_generator.state = {"bit_generator": "PCG64",
                                   "state": {"state": word(8, 24), "inc": word(24, 40)},
                                   "has_uint32": raw[40], "uinteger": word(41, 45)}
        self._seed, self._np_rng = word(0, 8), rng
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


STATE_BYTES = 45   # Generator.get_state(): seed 8, PCG64 state 16 and increment 16, cache 1 + 4

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
    """The default generator's state, a uint8 tensor (``Generator.get_state``)."""
    return default_generator.get_state()


def set_rng_state(new_state):
    """Restore the default generator's state from ``get_rng_state``; raises as
    ``Generator.set_state``."""
    default_generator.set_state(new_state)


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, _caller="fork_rng", _devices_kw="devices",
             device_type="cuda"):
    """A context manager that restores the default generator's state on exit, so random
    draws inside it leave the stream outside unchanged (``enabled=False``: does nothing).
    ember has no accelerator generators, so ``devices`` and ``device_type`` select nothing."""
    if not enabled:
        yield
        return
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)


def resolve(generator):
    """The generator to draw from: ``generator`` or the default one."""
    if generator is None:
        return default_generator
    if not isinstance(generator, Generator):
        raise TypeError(f"generator must be an ember.Generator, got {type(generator).__name__}")
    return generator
