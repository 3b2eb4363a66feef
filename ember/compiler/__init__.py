"""``ember.compiler`` (torch.compiler): ``reset`` clears every compiled function's traces,
``is_compiling`` tells whether a compiled function is being traced, ``disable`` marks a function
to run eagerly. The compiler itself is ``ember.compiler.frontend``."""
from ember.compiler.frontend import is_compiling, reset

__all__ = ["reset", "is_compiling", "disable"]


def disable(fn=None, recursive=True):
    """``torch.compiler.disable``: ``fn`` unchanged (ember traces it only as a caller's ops)."""
    if fn is None:
        return lambda f: f
    return fn
