"""result_dtype against torch.result_type."""
import itertools

import numpy as np
import pytest
import torch

from ember.kernels.pointwise import result_dtype

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"]
SCALARS = [True, 3, 2.5]


def _torch(x):
    if isinstance(x, np.ndarray):
        return torch.from_numpy(x)
    return x


def _example(dtype, zero_dim):
    return np.zeros(() if zero_dim else (2,), dtype)


@pytest.mark.parametrize("a_zero_dim, b_zero_dim", [(False, False), (False, True), (True, True)])
def test_two_arrays_match_torch(a_zero_dim, b_zero_dim):
    for a, b in itertools.product(DTYPES, DTYPES):
        x, y = _example(a, a_zero_dim), _example(b, b_zero_dim)
        expected = torch.result_type(_torch(x), _torch(y))
        assert result_dtype(x, y) == np.dtype(str(expected).replace("torch.", "")), (x, y)


@pytest.mark.parametrize("zero_dim", [False, True])
def test_array_and_python_scalar_match_torch(zero_dim):
    for a, s in itertools.product(DTYPES, SCALARS):
        x = _example(a, zero_dim)
        expected = torch.result_type(_torch(x), s)
        assert result_dtype(x, s) == np.dtype(str(expected).replace("torch.", "")), (a, s)


def test_examples():
    assert result_dtype(np.float32, np.int64) == np.float32  # NumPy says float64
    assert result_dtype(np.float16, np.int64) == np.float16
    assert result_dtype(np.uint8, np.int8) == np.int16
    assert result_dtype(np.int32, 2.5) == np.float32
    assert result_dtype(np.bool_, 1) == np.int64
    assert result_dtype(np.float32, np.float64) == np.float64
    assert result_dtype(np.ones(3, np.float32), np.float64(1.0)) == np.float32
    assert result_dtype(float) == np.float32 and result_dtype(int) == np.int64


def test_rejects_unsupported():
    with pytest.raises(TypeError, match="unsupported dtype"):
        result_dtype(np.complex64)
    with pytest.raises(TypeError, match="unsupported dtype"):
        result_dtype(np.uint16)
    with pytest.raises(ValueError):
        result_dtype()
