"""torch's legacy tensor types: ``FloatTensor``, ``DoubleTensor``, ``HalfTensor``,
``LongTensor``, ``IntTensor``, ``ShortTensor``, ``CharTensor``, ``ByteTensor``, ``BoolTensor``.

Each is a constructor as in torch (``FloatTensor(2, 3)`` an uninitialised tensor of that shape,
``FloatTensor([1, 2])`` one from data, ``FloatTensor()`` an empty one) and works with
``isinstance`` (a tensor of that dtype). ``Tensor.type()`` names them (``"ember.FloatTensor"``)
and ``Tensor.type("torch.FloatTensor")`` / ``type(ember.FloatTensor)`` casts to them.
"""
from ember import _dtype
from ember.tensor import Tensor, new_tensor

_TYPES = (("FloatTensor", _dtype.float32), ("DoubleTensor", _dtype.float64),
          ("HalfTensor", _dtype.float16), ("LongTensor", _dtype.int64),
          ("IntTensor", _dtype.int32), ("ShortTensor", _dtype.int16),
          ("CharTensor", _dtype.int8), ("ByteTensor", _dtype.uint8),
          ("BoolTensor", _dtype.bool_))
NAME_OF = {d: n for n, d in _TYPES}


class _LegacyMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.dtype == cls.dtype

    def __call__(cls, *args, device=None):
        return new_tensor(args, cls.dtype, f"ember.{cls.__name__}", device)

    def __repr__(cls):
        return f"<class 'ember.{cls.__name__}'>"


def _make_type(name, dt):
    return _LegacyMeta(name, (), {"dtype": dt, "__module__": "ember",
                                  "__doc__": f"Legacy constructor of {dt} tensors (as "
                                             f"torch.{name})."})


LEGACY = {name: _make_type(name, dt) for name, dt in _TYPES}


def dtype_of_type_name(name):
    """The dtype a ``Tensor.type`` argument names ("torch.FloatTensor", "ember.LongTensor",
    "FloatTensor", a legacy class), or None when it names none."""
    if isinstance(name, _LegacyMeta):
        return name.dtype
    if isinstance(name, str):
        short = name.rpartition(".")[2]
        for n, dt in _TYPES:
            if n == short and name in (n, "torch." + n, "ember." + n):
                return dt
    return None
