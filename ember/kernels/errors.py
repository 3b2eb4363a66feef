"""The error kernels raise for bad arguments; dispatch prefixes it with the op's name."""


class KernelError(ValueError):
    """A kernel rejected its arguments; the message says what and why (without the op name)."""


class KernelDimensionError(KernelError, IndexError):
    """A ``dim`` argument out of range; dispatch turns it into ember.errors.DimensionError."""


class KernelValueError(KernelError):
    """An argument torch rejects with ValueError (not RuntimeError); dispatch turns it into
    ember.errors.EmberValueError."""
