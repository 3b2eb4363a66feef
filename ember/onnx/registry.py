"""The symbolic-function registry: one function per spec op, per starting opset.

``@symbolic("conv2d")`` registers a function for every opset from 13; ``@symbolic("tril",
since=14)`` adds a version that is chosen from opset 14 on (the highest ``since`` not above the
requested opset wins). Pointwise spec ops are registered from the one table of
``ember.onnx.pointwise`` (``symbolics/pointwise.py``). A symbolic is called as ``fn(g, node, *tensor_args, **const_args)``:
``g`` is the ``GraphContext`` being built, ``node`` the JIT IR node (its outputs carry dtype and
shape), tensor slots arrive as ONNX value names (Python scalars and ``None`` stay as they are;
a ``Tensor[]`` slot is a list of names), and constant arguments arrive by their spec names
(traced sizes as ``Dyn`` objects). It returns the ONNX name of each IR output (a str, or a tuple
for multi-output ops; ``None`` for an output it does not produce).
"""
MIN_OPSET = 13
MAX_OPSET = 21

_REGISTRY = {}   # op name -> [(since, fn)] sorted by since

__all__ = ["symbolic", "register", "lookup", "registered_ops", "MIN_OPSET", "MAX_OPSET",
           "check_opset"]


def check_opset(opset):
    """Raise ValueError unless ``opset`` is an int in [MIN_OPSET, MAX_OPSET]."""
    if isinstance(opset, bool) or not isinstance(opset, int) or \
            not MIN_OPSET <= opset <= MAX_OPSET:
        raise ValueError(f"ember.onnx supports opset_version {MIN_OPSET} to {MAX_OPSET} "
                         f"(the default ONNX domain); got {opset!r}")
    return opset


def register(name, fn, since=MIN_OPSET):
    """Register ``fn`` as the symbolic of op ``name`` from opset ``since`` on (replacing an
    existing one for the same op and ``since``)."""
    entries = [e for e in _REGISTRY.get(name, []) if e[0] != since]
    entries.append((since, fn))
    entries.sort(key=lambda e: e[0])
    _REGISTRY[name] = entries
    return fn


def symbolic(*names, since=MIN_OPSET):
    """Decorator: register the function for the ops ``names`` from opset ``since``."""
    def deco(fn):
        for n in names:
            register(n, fn, since)
        return fn
    return deco


def lookup(name, opset):
    """The symbolic for op ``name`` at ``opset``, or None."""
    _load()
    best = None
    for since, fn in _REGISTRY.get(name, ()):
        if since <= opset:
            best = fn
    return best


def registered_ops():
    """{op name: [since, ...]} for every registered op."""
    _load()
    return {k: [s for s, _ in v] for k, v in sorted(_REGISTRY.items())}


_LOADED = False


def _load():
    global _LOADED
    if not _LOADED:
        _LOADED = True
        from ember.onnx import symbolics  # noqa: F401 - registers on import
