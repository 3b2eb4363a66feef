"""Type promotion (ember.kernels.dtypes, ember.autograd.bfloat16) against torch.result_type;
integer scalar operands and stored values against torch."""
import itertools

import pytest
import torch

import ember

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
          "float64", "complex64", "complex128"]
# an operand: a tensor of 1 or 0 dimensions, or a Python scalar
FORMS = ["1-d", "0-d"]
SCALARS = {"bool": True, "int64": 2, "float32": 1.5, "complex64": 1 + 2j}


def _make(lib, dtype, form):
    if form == "scalar":
        return SCALARS[dtype]
    shape = (2,) if form == "1-d" else ()
    return lib.ones(shape, dtype=getattr(lib, dtype))


def _operands():
    tensors = [(d, f) for d in DTYPES for f in FORMS]
    return tensors + [(d, "scalar") for d in SCALARS]


PAIRS = [(a, b) for a, b in itertools.product(_operands(), repeat=2)
         if not (a[1] == "scalar" and b[1] == "scalar")]


def _name(d):
    """The dtype's name; torch's complex32 is ember's complex64 (docs/unsupported.md)."""
    name = repr(d).split(".")[-1]
    return "complex64" if name == "complex32" else name


def test_binary_op_result_dtype_is_torch_result_type():
    """``mul`` (which every dtype pair may take) gives ``torch.result_type``'s dtype for every
    pair of dtypes, each a 1-d tensor, a 0-d tensor or a Python scalar (0-d bfloat16 with 0-d
    float32 is float32, 0-d float16 with 0-d bfloat16 float32, ...)."""
    wrong = []
    for a, b in PAIRS:
        want = _name(torch.result_type(_make(torch, *a), _make(torch, *b)))
        got = _name(ember.mul(_make(ember, *a), _make(ember, *b)).dtype)
        if got != want:
            wrong.append((a, b, got, want))
        got = _name(ember.result_type(_make(ember, *a), _make(ember, *b)))
        if got != want:
            wrong.append(("result_type", a, b, got, want))
    assert not wrong


def test_promote_types_and_can_cast_as_torch():
    wrong = []
    for a, b in itertools.product(DTYPES, repeat=2):
        ta, tb, ea, eb = getattr(torch, a), getattr(torch, b), getattr(ember, a), getattr(ember, b)
        if _name(ember.promote_types(ea, eb)) != _name(torch.promote_types(ta, tb)):
            wrong.append(("promote_types", a, b))
        if ember.can_cast(ea, eb) != torch.can_cast(ta, tb):
            wrong.append(("can_cast", a, b))
    assert not wrong


def _setitem(t, key, value):
    t[key] = value
    return t


# integer scalars: operands wrap into the tensor's dtype; stored values are range-checked
INTEGER_SCALARS = [
    "i8 + 300", "i8 * 300", "i8 - 300", "300 - i8", "i8 < 300", "i8 == 300", "u8 > -1",
    "u8 + (-1)", "u8 - 2", "i8 // 300", "i8 % 300", "u8 & 300", "u8 | -1", "i8.add(300, alpha=2)",
    "m.ones(2, dtype=m.uint8) * -1", "m.tensor([1], dtype=m.int16) + 70000",
    "m.ones(3, dtype=m.int32) + (2 ** 40 + 5)", "i8 + m.tensor(300)",
    "u8.clone().add_(300)", "u8.clone().add_(m.tensor([300, 1]))", "u8.clone().sub_(m.tensor([3]))",
    "u8.clone().mul_(200)", "i8.clone().add_(1.5)", "u8.clone().add_(m.tensor([1.5]))",
    "_setitem(u8.clone(), 0, -1)", "_setitem(u8.clone(), 0, -255)", "_setitem(u8.clone(), 0, 256)",
    "_setitem(i8.clone(), 0, -129)", "_setitem(i8.clone(), 0, 2.5e3)",
    "_setitem(i8.clone(), 0, 127.9)", "_setitem(i8.clone(), 0, -128)",
    "m.full((2,), -1, dtype=m.uint8)", "m.full((2,), 300, dtype=m.uint8)",
    "m.full((2,), -129, dtype=m.int8)", "u8.clone().fill_(-1)", "u8.clone().fill_(300)",
    "u8.clone().masked_fill_(u8 > 0, -1)", "u8.clone().masked_fill_(u8 > 0, 256)",
    "u8.clone().index_fill_(0, m.tensor([0]), -1)", "m.scatter(u8, 0, m.tensor([0]), -1)",
    "m.where(i8 > 0, i8, 300)", "m.where(u8 > 1, u8, -1)", "m.clamp(i8, max=300)",
    "m.clamp(i8, min=-1)", "i8.pow(300)", "i8.pow(2)",
    "m.tensor([300], dtype=m.uint8)", "m.tensor([-1], dtype=m.uint8)",
    "m.tensor([[-255, 255]], dtype=m.uint8)", "m.tensor([1.5], dtype=m.int8)",
    "m.zeros(2, dtype=m.int8).new_full((2,), 300)",
]


@pytest.mark.parametrize("expr", INTEGER_SCALARS)
def test_integer_scalars_wrap_or_raise_as_torch(expr):
    """``int8 + 300`` wraps 300 into int8 (was an OverflowError), ``u8[0] = -1`` stores 255,
    ``uint8.add_(int64 tensor)`` wraps (was refused); fill-type ops refuse what torch's checked
    conversion refuses, as a RuntimeError."""
    out = []
    for m in (torch, ember):
        i8, u8 = m.tensor([1, 100], dtype=m.int8), m.tensor([1, 2], dtype=m.uint8)
        try:
            r = eval(expr, {"m": m, "i8": i8, "u8": u8, "_setitem": _setitem})
            out.append((repr(r.dtype).split(".")[-1], r.tolist()))
        except RuntimeError:
            out.append(RuntimeError)
    assert out[1] == out[0]


# complex scalars stored into real or integer tensors: torch refuses (it never drops the
# imaginary part); into complex tensors, or as an operand that promotes, they are kept
COMPLEX_SCALARS = [
    "f64.clone().fill_(1.5 + 0.5j)", "m.full((2,), 1j, dtype=m.float64)",
    "f64.new_full((2,), 1j)", "f64.clone().masked_fill_(f64 > 0, 1 + 1j)",
    "f64.clone().index_fill_(0, m.tensor([0]), 1j)", "m.scatter(f64, 0, m.tensor([0]), 1j)",
    "_setitem(f64.clone(), 0, 2j)", "u8.clone().fill_(1j)", "m.full((2,), 1j)",
    "m.zeros(2, dtype=m.complex64).fill_(1 - 2j)", "f64 + 1j", "m.where(f64 > 1, f64, 0.5j)",
    "m.where(f64 > 1, 0.5j, f64)",
]


@pytest.mark.parametrize("expr", COMPLEX_SCALARS)
def test_complex_scalars_are_refused_by_real_tensors_as_torch(expr):
    """``float64.fill_(1.5+0.5j)`` stored 1.5 and ``full((2,), 1j, dtype=float64)`` zeros,
    silently: torch raises RuntimeError ('cannot be converted ... without overflow')."""
    out = []
    for m in (torch, ember):
        f64, u8 = m.tensor([0.5, 2.0], dtype=m.float64), m.tensor([1, 2], dtype=m.uint8)
        try:
            r = eval(expr, {"m": m, "f64": f64, "u8": u8, "_setitem": _setitem})
            out.append((repr(r.dtype).split(".")[-1], r.tolist()))
        except RuntimeError:
            out.append(RuntimeError)
    assert out[1] == out[0]


def test_scalar_and_cpp_names_are_torchs():
    """torch names dtypes two ways in its errors: ScalarType ("Long") and C++ ("long int")."""
    import numpy as np
    from ember.kernels.dtypes import cpp_name, scalar_name
    for t, np_dt in ((torch.float64, np.float64), (torch.int64, np.int64),
                     (torch.uint8, np.uint8), (torch.int16, np.int16), (torch.bool, np.bool_)):
        with pytest.raises(RuntimeError) as e:
            torch.dot(torch.ones(2), torch.ones(2, dtype=t))
        assert str(e.value).endswith(f"Float and {scalar_name(np.dtype(np_dt))}")
        with pytest.raises(RuntimeError) as e:
            torch.mm(torch.ones(2, 2), torch.ones(2, 2, dtype=t))
        assert str(e.value).endswith(f"float != {cpp_name(np.dtype(np_dt))}")
