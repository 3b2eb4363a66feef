"""The importer registry: one function per ONNX op, per opset range where its semantics changed.

``@importer("Conv", since=1, attrs={...})`` registers ``fn`` for op ``Conv`` of the default domain
from opset 1 on; the version with the highest ``since`` not above the model's opset is chosen.
``attrs`` maps every attribute the importer understands to its default; a node carrying any other
attribute is rejected at load time. ``check(attrs, node)`` may return ``(attr, reason)`` for an
attribute value the importer cannot run (also rejected at load time). ``strings=True`` marks an
importer that takes or makes STRING tensors (NumPy object arrays of ``str``, handled only inside
the importer: ember has no string tensor); a node of any other op that reads or writes one is
rejected at load time.

An importer is called as ``fn(attrs, *inputs)`` where ``attrs`` is a dict (defaults filled in,
strings decoded, tensors as NumPy arrays) and ``inputs`` are ember Tensors (``None`` for an
omitted optional input, a list for a sequence). It returns one value (a Tensor, a list for a
sequence, None for an empty optional) or a tuple of them, one per node output. Graph attributes
arrive compiled (``load.Subgraph``), and such a node also gets the enclosing scope as
``attrs["_env"]`` while it runs.
"""
from dataclasses import dataclass, field

__all__ = ["importer", "lookup", "registered_importers", "Importer"]


@dataclass
class Importer:
    op: str
    domain: str
    since: int
    fn: object
    attrs: dict = field(default_factory=dict)
    check: object = None
    max_outputs: int = 1
    strings: bool = False


_REGISTRY = {}   # (domain, op) -> [Importer] sorted by since


def importer(*ops, since=1, domain="", attrs=None, check=None, max_outputs=1, strings=False):
    """Decorator: register ``fn`` as the importer of ONNX ops ``ops`` from opset ``since``."""
    def deco(fn):
        for op in ops:
            entry = Importer(op, domain, since, fn, dict(attrs or {}), check, max_outputs,
                             strings)
            lst = [e for e in _REGISTRY.get((domain, op), []) if e.since != since]
            lst.append(entry)
            lst.sort(key=lambda e: e.since)
            _REGISTRY[(domain, op)] = lst
        return fn
    return deco


def _norm_domain(domain):
    return "" if domain in ("", "ai.onnx") else domain


def lookup(op, opset, domain=""):
    """The ``Importer`` for ``op`` at ``opset`` (None when there is none)."""
    _load()
    best = None
    for e in _REGISTRY.get((_norm_domain(domain), op), ()):
        if e.since <= opset:
            best = e
    return best


def versions(op, domain=""):
    """The ``since`` opsets registered for ``op`` (empty when the op is unknown)."""
    _load()
    return [e.since for e in _REGISTRY.get((_norm_domain(domain), op), ())]


def registered_importers():
    """{(domain, op): [since, ...]} for every registered op."""
    _load()
    return {k: [e.since for e in v] for k, v in sorted(_REGISTRY.items())}


_LOADED = False


def _load():
    global _LOADED
    if not _LOADED:
        _LOADED = True
        from ember.onnx.importer import (ops_attention, ops_control,  # noqa: F401
                                         ops_elementwise, ops_loss, ops_ml, ops_nn,
                                         ops_quant, ops_random, ops_reduce, ops_rnn,
                                         ops_sequence, ops_shape, ops_signal, ops_text,
                                         ops_training, ops_vision)


def registered_string_ops():
    """The ops whose importers take or make STRING tensors."""
    _load()
    return sorted({op for (_d, op), lst in _REGISTRY.items() if any(e.strings for e in lst)})
