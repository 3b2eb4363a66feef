"""The error kernels raise for bad arguments; dispatch prefixes it with the op's name."""


class KernelError(ValueError):
    """A kernel rejected its arguments; the message says what and why (without the op name)."""
