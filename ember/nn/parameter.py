"""``Parameter``: a Tensor that a Module registers as one of its parameters, ``Buffer``, and
the lazy modules' placeholders ``UninitializedParameter`` / ``UninitializedBuffer``."""
import numpy as np

from ember.tensor import Tensor


class Parameter(Tensor):
    """A leaf Tensor that requires grad by default; assigning one to a Module attribute registers
    it. ``Parameter(t)`` shares ``t``'s memory."""

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            arr = np.empty((0,), np.float32)
        elif isinstance(data, Tensor):
            arr = data._data
        else:
            arr = np.asarray(data)
        p = cls._make(arr)
        if isinstance(data, Tensor):
            p._vc = data._get_vc()
        if requires_grad:
            p.requires_grad_(True)
        return p

    def __init__(self, data=None, requires_grad=True):
        pass

    @classmethod
    def _from_tensor(cls, t):
        p = cls._make(t._data)
        p._requires_grad = t._requires_grad
        p.grad = t.grad
        return p

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()


class Buffer(Tensor):
    """Marks a tensor to be registered as a buffer when assigned to a Module attribute."""

    def __new__(cls, data=None, *, persistent=True):
        arr = np.empty((0,), np.float32) if data is None else (
            data._data if isinstance(data, Tensor) else np.asarray(data))
        b = Tensor._make(arr)
        b._buffer_persistent = persistent
        return b


class _Uninitialized:
    """A placeholder whose shape is not known yet (a lazy module's, before its first call)."""
    __slots__ = ()

    def materialize(self, value):
        """Take the shape, dtype and values of ``value`` in place (the object stays the same,
        so an optimizer holding it sees the real parameter) and become a plain
        Parameter / Tensor."""
        self.data = value
        self.__class__ = self.cls_to_become

    def __repr__(self):
        return f"<{type(self).__name__}>"


class UninitializedParameter(_Uninitialized, Parameter):
    """A parameter whose shape is not known yet (see ember.nn.modules.lazy)."""
    __slots__ = ()
    cls_to_become = Parameter


class UninitializedBuffer(_Uninitialized, Tensor):
    """A buffer whose shape is not known yet (see ember.nn.modules.lazy)."""
    __slots__ = ()
    cls_to_become = Tensor

    def __new__(cls, requires_grad=False):
        return cls._make(np.empty((0,), np.float32))
