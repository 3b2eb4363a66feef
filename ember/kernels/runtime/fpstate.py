"""NumPy's floating-point error state set to "ignore" while ember's kernels run: log(0) = -inf,
sqrt(-1) = nan, inf - inf = nan, exp(100) = inf are the values, and torch warns of none of them
(NumPy's default warns: "divide by zero encountered", "invalid value encountered", and a
``-W error`` program would stop there). The caller's own state is back when ember returns.

Where: around every kernel call in ``autograd.dispatch`` (forward ops, in-place writes),
around each backward node's evaluation in ``autograd.engine``, and in the kernels other code
calls directly (``quiet``); the workers of ``runtime.threadpool`` take their caller's state
(a new thread starts with NumPy's default). A boundary sets the state with ``token = enter(IGNORE)`` and puts
the caller's back with ``leave(token)``, in a ``finally``.

On NumPy 2 the state is a context variable (per thread and task, as ``np.errstate``):
``enter``/``leave`` are its own ``set``/``reset`` with a prebuilt "ignore" value, two C calls
(0.15-0.2 us together on the shared 2-core VM, where ``np.errstate``, which builds its state
object on every entry, took 1.4 us).
NumPy 1 sets it with ``np.seterr`` (a few us)."""
import numpy as np

try:
    from numpy._core._ufunc_config import _extobj_contextvar, _make_extobj
    IGNORE = _make_extobj(all="ignore")
except (ImportError, AttributeError, TypeError):   # NumPy 1: no context variable
    _extobj_contextvar = None


if _extobj_contextvar is not None:
    enter = _extobj_contextvar.set
    leave = _extobj_contextvar.reset
    current = _extobj_contextvar.get   # this thread's state, for ``enter`` in another thread
    _current = current

    def quiet():
        """Ignore floating-point errors until ``restore(token)``; returns the token (None when
        they are already ignored: inside a dispatched kernel this costs one read)."""
        if _current() is IGNORE:
            return None
        return enter(IGNORE)

    def restore(token):
        """The error state before ``quiet`` returned ``token``."""
        if token is not None:
            leave(token)
else:
    IGNORE = {"all": "ignore"}
    current = np.geterr

    def enter(state):
        """Set NumPy's error state to ``state`` (keyword arguments of ``np.seterr``); returns
        the token that ``leave`` takes."""
        return np.seterr(**state)

    def leave(token):
        """The error state before ``enter`` returned ``token``."""
        np.seterr(**token)

    def quiet():
        """Ignore floating-point errors until ``restore(token)``; returns the token."""
        return np.seterr(all="ignore")

    def restore(token):
        """The error state before ``quiet`` returned ``token``."""
        if token is not None:
            np.seterr(**token)
