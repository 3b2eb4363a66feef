"""Exceptions of ember's own."""


class UnsupportedError(NotImplementedError):
    """A PyTorch feature or argument combination ember does not implement; the message says which."""
