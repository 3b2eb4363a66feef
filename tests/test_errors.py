"""User errors name the op, the shapes and dtypes, and what was expected; no raw NumPy errors."""
import pytest

import ember


@pytest.mark.parametrize("fn, match", [
    (lambda: ember.ones(3, 4) + ember.ones(5), r"add: shapes \(3, 4\) and \(5,\) cannot be broadcast"),
    (lambda: ember.ones(2, 3) @ ember.ones(4, 5), r"matmul: inner dimensions differ: \(2, 3\) @ \(4, 5\)"),
    (lambda: ember.mm(ember.ones(2), ember.ones(2)), r"mm: expected 2-D tensors"),
    (lambda: ember.ones(2, 3).view(4), r"view: shape '\[4\]' is invalid for input of size 6"),
    (lambda: ember.ones(3, 4).t().view(12), r"view: .*Use .reshape"),
    (lambda: ember.cat([ember.ones(2, 3), ember.ones(2, 4)]), r"cat: sizes of tensors must match"),
    (lambda: ember.ones(2).sum(dim=3), r"sum: dimension 3 out of range"),
    (lambda: ember.ones(2, 3).permute(0), r"permute: number of dims don't match"),
    (lambda: ember.ones(3).expand(2, 4), r"expand: the expanded size"),
    (lambda: ember.where(ember.ones(2), ember.ones(2), ember.ones(2)), r"where expected condition to be a bool"),
    (lambda: ember.gather(ember.ones(2, 2), 1, ember.ones(2, 2)), r"gather\(\): Expected dtype int64"),
    (lambda: ember.nn.functional.layer_norm(ember.ones(2, 3), (4,)), r"layer_norm: Given normalized_shape"),
])
def test_shape_errors_name_op_and_shapes(fn, match):
    with pytest.raises(RuntimeError, match=match):
        fn()


def test_index_errors_are_index_errors():
    with pytest.raises(IndexError, match="index_select"):
        ember.index_select(ember.ones(3), 0, ember.tensor([5]))
    with pytest.raises(IndexError):
        ember.ones(3)[7]


def test_type_errors_name_argument():
    with pytest.raises(TypeError, match=r"matmul\(\): argument 'other' must be a Tensor, not list"):
        ember.matmul(ember.ones(2), [1.0, 2.0])
    with pytest.raises(TypeError, match="cat"):
        ember.cat([ember.ones(2), 3])


def test_no_raw_numpy_exception_escapes():
    for fn in (lambda: ember.ones(2, 3).reshape(5), lambda: ember.ones(2).unsqueeze(5),
               lambda: ember.ones(2, 3).transpose(0, 4), lambda: ember.stack([ember.ones(2), ember.ones(3)])):
        with pytest.raises(RuntimeError) as info:
            fn()
        assert info.type is ember.errors.EmberRuntimeError
        assert info.value.args[0].split(":")[0].split()[0] in ("reshape", "unsqueeze", "transpose",
                                                                "stack")


def test_bad_device_and_dtype():
    with pytest.raises(RuntimeError, match="cpu"):
        ember.zeros(2, device="cuda")
    with pytest.raises(RuntimeError, match="cpu"):
        ember.ones(2).to("cuda")
    with pytest.raises(TypeError, match="not a dtype|does not support"):
        ember.zeros(2, dtype="complex128")


def test_unsupported_features_raise_a_specific_error():
    with pytest.raises(ember.UnsupportedError, match="proj_size"):
        ember.nn.LSTM(4, 8, proj_size=2)
    with pytest.raises(ember.UnsupportedError, match="mode 'bicubic'"):
        ember.nn.functional.interpolate(ember.ones(1, 1, 4, 4), scale_factor=2, mode="bicubic")
    assert issubclass(ember.UnsupportedError, NotImplementedError)
