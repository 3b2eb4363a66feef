"""Tensor type conversions (ember/ops/tensor_types.py): the memory-format objects the casts and
``Tensor.to`` take, ``to``'s positional flags."""
import numpy as np

import ember


def test_memory_format_objects_accepted_by_casts_and_to():
    x = ember.arange(24.0).reshape(1, 2, 3, 4)
    for fmt in (ember.contiguous_format, ember.preserve_format, ember.channels_last):
        assert isinstance(fmt, ember.memory_format)
        assert x.double(memory_format=fmt).dtype == ember.float64
        assert x.int(memory_format=fmt).dtype == ember.int32
        y = x.to(ember.float64, False, True, memory_format=fmt)
        assert y.dtype == ember.float64 and y.is_contiguous()
        np.testing.assert_array_equal(y.numpy(), x.numpy())
    assert repr(ember.channels_last) == "ember.channels_last"
    assert repr(ember.strided) == "ember.strided"


def test_to_positional_copy_flag():
    x = ember.ones(3, dtype=ember.float64)
    assert x.to(ember.float64, False, False) is x
    y = x.to(ember.float64, False, True)
    assert y is not x
    y.add_(1.0)
    assert float(x[0]) == 1.0


def test_type_names_every_dtype_in_torchs_spelling():
    torch = __import__("pytest").importorskip("torch")
    for name in ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8",
                 "uint8", "bool", "complex64", "complex128"):
        ours = ember.zeros(2, dtype=getattr(ember, name)).type()
        assert ours == torch.zeros(2, dtype=getattr(torch, name)).type(), name
        assert ember.zeros(2).type(ours).dtype == getattr(ember, name)   # and back
    assert ember.ones(2).type() == "torch.FloatTensor"    # as `x.type() == 'torch.FloatTensor'`
