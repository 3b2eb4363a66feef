"""Exceptions of ember's own.

Every error ember raises for a user's mistake is an ``EmberError``. Each concrete class also
subclasses the Python builtin PyTorch raises in the same situation, so torch-style
``except RuntimeError`` / ``except TypeError`` clauses keep working:

=====================  =======================  ==============================================
class                  builtin base             raised for
=====================  =======================  ==============================================
``EmberRuntimeError``  ``RuntimeError``         shapes that do not fit, values out of range
``LinAlgError``        (``EmberRuntimeError``)  a singular / not positive-definite matrix
``EmberTypeError``     ``TypeError``            an argument of the wrong type or dtype
``EmberValueError``    ``ValueError``           an argument value torch rejects with ValueError
``EmberIndexError``    ``IndexError``           an index or dimension out of range
``DimensionError``     (``EmberIndexError``,    a ``dim`` argument out of range (torch raises
                       ``RuntimeError``)        IndexError; ember raised RuntimeError before)
``EmberKeyError``      ``KeyError``             a name that is invalid or already taken
``EmberOverflowError`` ``OverflowError``,       a Python int that does not fit int64 (one
                       ``ValueError``           that does wraps into a narrower operand dtype)
``UnsupportedError``   ``NotImplementedError``  a PyTorch feature ember does not implement
``DeviceUnavailable``  (``UnsupportedError``,   a CUDA device (ember runs only on the CPU;
``Error``              ``AssertionError``)      torch without CUDA raises AssertionError)
=====================  =======================  ==============================================

``MissingDependencyError`` (a ``ModuleNotFoundError`` and a ``RuntimeError``) is raised for an
optional feature whose package is not installed; its message names the feature and the extra
to install.

Messages start with the name of the op or function (``conv2d: ...``), exactly once.
"""


class EmberError(Exception):
    """Base class of every error ember raises for a user's mistake."""


class EmberRuntimeError(EmberError, RuntimeError):
    """Arguments that do not fit together (shapes, sizes, values out of range)."""


class LinAlgError(EmberRuntimeError):
    """A matrix that is singular or not positive-definite where the linear-algebra op needs it
    to be, or a decomposition that did not converge (``ember.linalg.LinAlgError``, as
    ``torch.linalg.LinAlgError``, a RuntimeError)."""


class EmberTypeError(EmberError, TypeError):
    """An argument of the wrong type or dtype."""


class EmberValueError(EmberError, ValueError):
    """An argument value rejected where PyTorch raises ValueError."""


class EmberIndexError(EmberError, IndexError):
    """An index or dimension out of range."""


class DimensionError(EmberIndexError, EmberRuntimeError):
    """A ``dim`` argument outside ``[-ndim, ndim)``: an IndexError, as torch's "Dimension out of
    range", and a RuntimeError, as the shape errors around it."""


class EmberKeyError(EmberError, KeyError):
    """A name that is invalid or taken (Module.register_* and the like, where torch raises
    KeyError); prints its message unquoted."""

    def __str__(self):
        return str(self.args[0]) if self.args else ""


class EmberOverflowError(EmberError, OverflowError, ValueError):
    """A Python int too large for int64 (torch raises ValueError from ``torch.tensor`` and
    OverflowError from ops, so this is both). Within int64, an operand wraps into a narrower
    integer tensor's dtype and a stored value out of the dtype's range is an EmberRuntimeError,
    as torch."""


class UnsupportedError(EmberError, NotImplementedError):
    """A PyTorch feature or argument combination ember does not implement; the message says which."""


class DeviceUnavailableError(UnsupportedError, AssertionError):
    """A CUDA device asked of ember, which runs only on the CPU: an UnsupportedError, and an
    AssertionError as torch's "Torch not compiled with CUDA enabled"."""


class MissingDependencyError(EmberError, ModuleNotFoundError, RuntimeError):
    """An optional feature used without its package installed; the message names the feature
    and what to install (``pip install 'ember[onnx]'``). Raised by ``ember._optional.require``;
    a ModuleNotFoundError, and a RuntimeError as torch raises for a backend it was built
    without."""


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
    if message.startswith(name):
        rest = message[len(name):]
        if rest[:1] in (":", "(", "") or rest.startswith((" expects", " expected")):
            return message
        end = rest.find(": ")
        if rest[:1] == "_" and end > 1 and rest[1:end].replace("_", "").isalnum():
            # the op a public function runs, named after it (max_pool2d_with_indices under
            # max_pool2d, cross_entropy_loss under cross_entropy): the user knows only the one
            return named(name, rest[end + 2:])
    return f"{name}: {message}"


# whatever ember's Python code (or NumPy, Numba, ctypes below it) raises when handed an argument
# it cannot use is converted; ember's own bugs pass through unchanged
_BUGS = (RecursionError, NameError, AssertionError, SyntaxError, ImportError, SystemError,
         Warning)  # a warning raised as an error (-W error) stays what it is


def _describe_args(fn, args, kwargs):
    """{parameter name: value} for the call, or positional names where binding fails."""
    import inspect
    try:
        return dict(inspect.signature(fn).bind(*args, **kwargs).arguments)
    except (TypeError, ValueError):
        return {f"args[{i}]": a for i, a in enumerate(args)} | kwargs


def _shape_of(value):
    data = getattr(value, "_data", None)
    shape = getattr(data, "shape", None)
    return None if shape is None else f"{data.dtype}{list(shape)}"


def convert(name, err, fn, args, kwargs):
    """ember's error for a builtin exception ``err`` raised inside public function ``name``
    called as ``fn(*args, **kwargs)``: the message names the function once, the argument at
    fault where it can be told, and the shapes and dtypes of the tensor arguments."""
    bound = _describe_args(fn, args, kwargs)
    if isinstance(err, AttributeError) and getattr(err, "name", None) is not None:
        for pname, value in bound.items():  # an attribute lookup on an argument failed
            if value is err.obj and _shape_of(value) is None:
                return EmberTypeError(f"{name}(): argument '{pname}' must be a Tensor, not "
                                      f"{type(value).__name__}")
        err.ember_bug = True  # on no argument: more likely ember's bug, keep it as the cause
    if isinstance(err, AttributeError):
        cls = EmberTypeError
    elif isinstance(err, KeyError):
        cls = EmberValueError
    elif isinstance(err, (MemoryError, ArithmeticError)) and not isinstance(err, OverflowError):
        cls = EmberRuntimeError
    else:
        cls = ember_class(err)
    msg = f"invalid value {err}" if isinstance(err, KeyError) else (str(err) or type(err).__name__)
    shapes = ", ".join(f"{k}: {s}" for k, s in ((k, _shape_of(v)) for k, v in bound.items())
                       if s is not None)
    return cls(named(name, msg) + (f" ({shapes})" if shapes and shapes not in msg else ""))


def needs_public(fn):
    """Whether ``fn`` is a plain Python function not yet wrapped by ``public``."""
    import types
    return isinstance(fn, types.FunctionType) and not hasattr(fn, "__wrapped_public__")


_NAMED = None


def _names_an_op(message):
    global _NAMED
    if _NAMED is None:
        import re
        _NAMED = re.compile(r"^[\w.]+(\(\w*\))?: ")
    return _NAMED.match(message) is not None


def public(fn, name=None, prefix="always"):
    """Wrap public function ``fn`` so that whatever it raises for a bad argument is an ember error
    whose message names ``name`` (default ``fn.__name__``) once: a builtin exception from inside
    is converted (see ``convert``), an ember error from an op it calls gets ``name: `` in front;
    with ``prefix="unnamed"`` (a layer's forward) only a message that names no op gets it.
    ``name="class"`` names a method by its instance's class."""
    import functools
    name = name or fn.__name__

    @functools.wraps(fn)
    def checked(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except EmberError as e:
            if e.args and isinstance(e.args[0], str) and (
                    prefix == "always" or not _names_an_op(e.args[0])):
                n = type(args[0]).__name__ if name == "class" else name
                e.args = (named(n, e.args[0]),) + e.args[1:]
            raise
        except _BUGS:
            raise
        except Exception as e:  # noqa: BLE001 - converted to ember's error (see convert)
            n = type(args[0]).__name__ if name == "class" else name
            converted = convert(n, e, fn, args, kwargs)
            raise converted from (e if getattr(e, "ember_bug", False) else None)
    checked.__wrapped_public__ = fn
    return checked
