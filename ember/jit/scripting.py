"""TorchScript's names for eager code: model files call ``torch.jit.is_scripting()``, decorate
methods with ``@torch.jit.ignore`` / ``@torch.jit.unused`` / ``@torch.jit.export``, annotate with
``Final`` and ``annotate``, run ``fork``/``wait`` and ``script`` whole models.

ember has no TorchScript compiler: ``script`` returns the function or module itself, which runs
as Python (the same results; TorchScript's static type checks and its serialised form are not
reproduced: ``ember.jit.trace`` records a graph that ``ember.jit.save`` writes), and
``is_scripting()`` is always False.
"""
import builtins
import typing
from typing import Final  # noqa: F401 - torch.jit.Final

from ember.autograd.state import STATE

__all__ = ["script", "is_scripting", "is_tracing", "ignore", "unused", "export", "Final",
           "annotate", "interface", "script_if_tracing", "fork", "wait", "Future", "isinstance"]


def script(obj, optimize=None, _frames_up=0, _rcb=None, example_inputs=None):
    """The function or module ``obj`` itself, run as Python (see the module docstring)."""
    return obj


def is_scripting():
    """False: nothing runs as TorchScript in ember."""
    return False


def is_tracing():
    """Whether ``ember.jit.trace`` is recording now (not ``ember.compile``'s capture, as torch's
    is False under ``torch.compile``)."""
    t = STATE.tracer
    return t is not None and getattr(t, "jit_trace", False)


def _modifier(fn, what):
    fn._torchscript_modifier = what
    return fn


def ignore(drop=False, **kwargs):
    """Decorator (``@ignore`` or ``@ignore(drop=...)``): the function stays a Python call."""
    if callable(drop):
        return _modifier(drop, "ignore")
    return lambda fn: _modifier(fn, "unused" if drop else "ignore")


def unused(fn):
    """Decorator: a method TorchScript would replace by a raise; in eager code, the method."""
    return _modifier(fn, "unused")


def export(fn):
    """Decorator: a method TorchScript would compile besides forward; the method."""
    return _modifier(fn, "export")


def annotate(the_type, the_value):
    """``the_value`` (TorchScript reads ``the_type`` from it)."""
    return the_value


def interface(obj):
    """Decorator of a TorchScript interface class: the class."""
    return obj


def script_if_tracing(fn):
    """Decorator: ``fn`` (scripted only while tracing in torch)."""
    return fn


class Future:
    """The result of ``fork``: ``wait()`` / ``value()`` return it (ember runs the call at once,
    in the calling thread)."""

    def __init__(self, value):
        self._value = value

    def wait(self):
        return self._value

    def value(self):
        return self._value

    def done(self):
        return True


def fork(func, *args, **kwargs):
    """``func(*args, **kwargs)`` as a ``Future`` (computed before ``fork`` returns)."""
    return Future(func(*args, **kwargs))


def wait(future):
    """The value of a ``fork``'s ``Future``."""
    return future.wait()


def isinstance(obj, target_type):
    """``builtins.isinstance`` that also checks the element types of ``List[...]``,
    ``Dict[..., ...]``, ``Tuple[...]``, ``Optional[...]`` and ``Union[...]`` targets, as
    torch.jit.isinstance does."""
    origin, args = typing.get_origin(target_type), typing.get_args(target_type)
    if origin is None:
        return builtins.isinstance(obj, target_type)
    if origin is typing.Union:
        return any(isinstance(obj, a) for a in args)
    if origin is list:
        return builtins.isinstance(obj, list) and all(isinstance(v, args[0]) for v in obj)
    if origin is dict:
        return builtins.isinstance(obj, dict) and all(
            isinstance(k, args[0]) and isinstance(v, args[1]) for k, v in obj.items())
    if origin is tuple:
        # (``Tuple[int, ...]`` matches no tuple, as torch's)
        return builtins.isinstance(obj, tuple) and len(obj) == len(args) and \
            all(isinstance(v, a) for v, a in zip(obj, args))
    return builtins.isinstance(obj, origin)
