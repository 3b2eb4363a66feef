"""``ember.backends.mps`` (torch.backends.mps): ember has no Metal backend."""


def is_available():
    """False: ember has no MPS backend."""
    return False


def is_built():
    """False: ember is not built with MPS."""
    return False
