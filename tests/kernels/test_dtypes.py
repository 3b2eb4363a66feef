"""Type promotion (ember.kernels.dtypes, ember.autograd.bfloat16) against torch.result_type."""
import itertools

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
    assert not wrong
