"""ember.finfo / ember.iinfo against torch.finfo / torch.iinfo, field by field."""
import pytest

import ember
from ember.errors import EmberTypeError

torch = pytest.importorskip("torch")

FLOATS = ["float16", "bfloat16", "float32", "float64", "complex64", "complex128"]
INTS = ["uint8", "int8", "int16", "int32", "int64"]


@pytest.mark.parametrize("name", FLOATS)
def test_finfo_fields_match_torch(name):
    e, t = ember.finfo(getattr(ember, name)), torch.finfo(getattr(torch, name))
    for field in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype"):
        assert getattr(e, field) == getattr(t, field), field
        assert type(getattr(e, field)) is type(getattr(t, field)), field
    assert repr(e) == repr(t)


@pytest.mark.parametrize("name", INTS)
def test_iinfo_fields_match_torch(name):
    e, t = ember.iinfo(getattr(ember, name)), torch.iinfo(getattr(torch, name))
    for field in ("bits", "max", "min", "dtype"):
        assert getattr(e, field) == getattr(t, field), field
        assert type(getattr(e, field)) is type(getattr(t, field)), field
    assert repr(e) == repr(t)


def test_finfo_without_argument_is_the_default_dtype():
    assert ember.finfo() == ember.finfo(ember.float32)
    ember.set_default_dtype(ember.float64)
    try:
        assert ember.finfo().eps == torch.finfo(torch.float64).eps
    finally:
        ember.set_default_dtype(ember.float32)


@pytest.mark.parametrize("fn, arg, match", [
    ("finfo", "int32", "requires a floating point input type"),
    ("finfo", "bool", "requires a floating point input type"),
    ("iinfo", "float32", "requires an integer input type"),
    ("iinfo", "complex64", "requires an integer input type"),
    ("iinfo", "bfloat16", "requires an integer input type"),
    ("iinfo", "bool", "ember.bool is not supported by ember.iinfo"),
    ("finfo", "'float32'", "must be ember.dtype, not str"),
    ("iinfo", "None", "must be ember.dtype, not NoneType"),
])
def test_wrong_kinds_raise_type_errors_as_torch(fn, arg, match):
    def resolve(lib):
        return eval(arg) if arg in ("'float32'", "None") else getattr(lib, arg)
    with pytest.raises(TypeError):
        getattr(torch, fn)(resolve(torch))
    with pytest.raises(EmberTypeError, match=match):
        getattr(ember, fn)(resolve(ember))


def test_fields_are_read_only_and_info_objects_compare_by_dtype():
    f = ember.finfo(ember.float16)
    with pytest.raises(AttributeError):
        f.eps = 1.0
    assert f == ember.finfo(ember.half) and hash(f) == hash(ember.finfo(ember.float16))
    assert ember.iinfo(ember.int64) != ember.iinfo(ember.int32)
    assert ember.finfo(ember.complex64) == ember.finfo(ember.float32)
