"""``ember._dynamo`` (torch._dynamo's user-facing names): ``reset``, ``explain``, ``config``
(``cache_size_limit``), ``OptimizedModule``; the compiler is ``ember.compiler.frontend``."""
from ember.compiler.frontend import GraphBreakError, config, explain, is_compiling, reset

__all__ = ["reset", "explain", "config", "is_compiling", "GraphBreakError", "OptimizedModule"]


def __getattr__(name):
    if name == "OptimizedModule":
        from ember.compiler.frontend import _optimized_module_cls
        return _optimized_module_cls()
    raise AttributeError(f"module 'ember._dynamo' has no attribute {name!r}")
