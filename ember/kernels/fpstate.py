"""NumPy's floating-point error state set to "ignore" around a kernel's NumPy evaluation, at a
fraction of ``np.errstate``'s cost: log(0) = -inf, sqrt(-1) = nan, exp(100) = inf are the values
(torch warns of none of them). ``token = quiet()`` then ``restore(token)`` in a ``finally``.

On NumPy 2 the state is a context variable (per thread and task, as ``np.errstate``); setting a
prebuilt "ignore" value skips ``np.errstate``'s construction of it on every entry (0.4 against
1.4 us, most of a 256-element kernel's time). NumPy 1 sets it with ``np.seterr``."""
import numpy as np

try:
    from numpy._core._ufunc_config import _extobj_contextvar, _make_extobj
    _IGNORE = _make_extobj(all="ignore")
except (ImportError, AttributeError, TypeError):   # NumPy 1: no context variable
    _extobj_contextvar = None


if _extobj_contextvar is not None:
    def quiet():
        """Ignore floating-point errors until ``restore(token)``; returns the token."""
        return _extobj_contextvar.set(_IGNORE)

    restore = _extobj_contextvar.reset
else:
    def quiet():
        """Ignore floating-point errors until ``restore(token)``; returns the token."""
        return np.seterr(all="ignore")

    def restore(token):
        """The error state before ``quiet`` returned ``token``."""
        np.seterr(**token)
