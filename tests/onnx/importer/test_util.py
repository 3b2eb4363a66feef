"""The importer's helpers (ember/onnx/importer/_util.py): the allocation guard refusing a shape
beyond the machine's memory before allocating (naming what), negative sizes, int lists and
scalars from tensors, ONNX element types to dtypes, and axis normalisation."""
import numpy as np
import pytest

pytest.importorskip("onnx")

import ember  # noqa: E402
from ember.errors import EmberRuntimeError  # noqa: E402
from ember.onnx.importer import _util as U  # noqa: E402
from onnx import TensorProto  # noqa: E402


def test_alloc_shape_checks_sizes_and_memory():
    assert U.alloc_shape([2, np.int64(3)], np.float32, "x") == (2, 3)
    with pytest.raises(EmberRuntimeError, match="ConstantOfShape: negative size in shape"):
        U.alloc_shape([2, -1], np.float32, "ConstantOfShape")
    with pytest.raises(EmberRuntimeError, match="Expand of shape .* bytes, more than"):
        U.alloc_shape([U.MAX_ALLOC_BYTES], np.float64, "Expand")
    U.check_alloc(U.MAX_ALLOC_BYTES, "just fits")
    with pytest.raises(KeyError):
        U.check_alloc(U.MAX_ALLOC_BYTES + 1, "too big", cls=KeyError)


def test_ints_scalar_and_const():
    assert U.ints(None) is None
    assert U.ints(ember.tensor([[1, 2], [3, -4]])) == [1, 2, 3, -4]
    assert U.scalar(ember.tensor([2.5])) == 2.5 and isinstance(U.scalar(ember.tensor(3)), int)
    c = U.const(np.arange(6).reshape(2, 3).T)
    assert c.tolist() == [[0, 3], [1, 4], [2, 5]]


@pytest.mark.parametrize("elem,np_dtype", [(TensorProto.FLOAT, np.float32),
                                           (TensorProto.DOUBLE, np.float64),
                                           (TensorProto.INT64, np.int64),
                                           (TensorProto.BOOL, np.bool_),
                                           (TensorProto.UINT8, np.uint8)])
def test_element_types(elem, np_dtype):
    assert U.onnx_np_dtype(elem) == np.dtype(np_dtype)
    assert U.ember_dtype(np_dtype).numpy == np.dtype(np_dtype)


def test_norm_axis():
    assert [U.norm_axis(a, 3) for a in (-3, -1, 0, 2)] == [0, 2, 0, 2]
    assert U.norm_axis(0, 0) == 0
    for bad in (3, -4):
        with pytest.raises(EmberRuntimeError, match=f"axis {bad} is out of range for rank 3"):
            U.norm_axis(bad, 3)
