"""Exceptions of ember's own.

Every error ember raises for a user's mistake is an ``EmberError``. Each concrete class also
subclasses the Python builtin PyTorch raises in the same situation, so torch-style
``except RuntimeError`` / ``except TypeError`` clauses keep working:

=====================  =======================  ==============================================
class                  builtin base             raised for
=====================  =======================  ==============================================
``EmberRuntimeError``  ``RuntimeError``         shapes that do not fit, values out of range
``EmberTypeError``     ``TypeError``            an argument of the wrong type or dtype
``EmberValueError``    ``ValueError``           an argument value torch rejects with ValueError
``EmberIndexError``    ``IndexError``           an index or dimension out of range
``EmberOverflowError`` ``OverflowError``        a Python int that does not fit the tensor dtype
``UnsupportedError``   ``NotImplementedError``  a PyTorch feature ember does not implement
=====================  =======================  ==============================================

Messages start with the name of the op or function (``conv2d: ...``), exactly once.
"""


class EmberError(Exception):
    """Base class of every error ember raises for a user's mistake."""


class EmberRuntimeError(EmberError, RuntimeError):
    """Arguments that do not fit together (shapes, sizes, values out of range)."""


class EmberTypeError(EmberError, TypeError):
    """An argument of the wrong type or dtype."""


class EmberValueError(EmberError, ValueError):
    """An argument value rejected where PyTorch raises ValueError."""


class EmberIndexError(EmberError, IndexError):
    """An index or dimension out of range."""


class EmberOverflowError(EmberError, OverflowError):
    """A Python int too large for the tensor's dtype (or for int64)."""


class UnsupportedError(EmberError, NotImplementedError):
    """A PyTorch feature or argument combination ember does not implement; the message says which."""


_BY_BUILTIN = ((IndexError, EmberIndexError), (OverflowError, EmberOverflowError),
               (TypeError, EmberTypeError), (ValueError, EmberValueError),
               (NotImplementedError, UnsupportedError), (RuntimeError, EmberRuntimeError))


def ember_class(err):
    """The ember error class matching the builtin class of ``err`` (EmberRuntimeError otherwise)."""
    for builtin, cls in _BY_BUILTIN:
        if isinstance(err, builtin):
            return cls
    return EmberRuntimeError


def named(name, message):
    """``message`` prefixed with ``name: `` unless it already starts with that name."""
    if message.startswith(name) and message[len(name):len(name) + 1] in (":", "(", " ", ""):
        return message
    return f"{name}: {message}"
