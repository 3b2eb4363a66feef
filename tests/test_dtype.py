"""Dtypes (ember/_dtype.py) against torch: the default floating dtype and the complex one that
follows it, what Python scalars become, NumPy dtypes both ways, names, and the errors naming an
unsupported dtype."""
import numpy as np
import pytest

import ember
from ember._dtype import from_numpy_dtype, to_numpy_dtype
from ember.errors import EmberTypeError

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("name", ["float32", "float64"])
def test_default_dtype_as_torch(name):
    before_e, before_t = ember.get_default_dtype(), torch.get_default_dtype()
    try:
        ember.set_default_dtype(getattr(ember, name))
        torch.set_default_dtype(getattr(torch, name))
        for v in (1.5, 2, True, 1 + 2j):
            e, t = ember.tensor(v), torch.tensor(v)
            assert str(e.dtype).split(".")[1] == str(t.dtype).split(".")[1], v
        assert str(ember.ones(2).dtype) == "ember." + name
    finally:
        ember.set_default_dtype(before_e)
        torch.set_default_dtype(before_t)


def test_only_floating_defaults_are_accepted():
    with pytest.raises((TypeError, ValueError)):
        torch.set_default_dtype(torch.int64)
    with pytest.raises((TypeError, ValueError)):
        ember.set_default_dtype(ember.int64)


@pytest.mark.parametrize("np_dtype", [np.float16, np.float32, np.float64, np.complex64,
                                      np.complex128, np.int8, np.int16, np.int32, np.int64,
                                      np.uint8, np.bool_])
def test_numpy_dtypes_both_ways(np_dtype):
    d = from_numpy_dtype(np.dtype(np_dtype))
    assert to_numpy_dtype(d) == np.dtype(np_dtype)
    assert to_numpy_dtype(d.__repr__().split(".")[1]) == np.dtype(np_dtype)
    assert str(d) == "ember." + str(torch.from_numpy(np.zeros(1, np_dtype)).dtype).split(".")[1]


def test_python_types_and_errors():
    assert to_numpy_dtype(float) == np.float32 and to_numpy_dtype(int) == np.int64
    assert to_numpy_dtype(bool) == np.bool_ and to_numpy_dtype(None) is None
    with pytest.raises(EmberTypeError, match="ember does not support NumPy dtype"):
        from_numpy_dtype(np.dtype("U3"))
    with pytest.raises(EmberTypeError, match="not a dtype"):
        to_numpy_dtype(3.5)
