"""Pointwise composites and operators (ember/ops/pointwise.py): nan_to_num, isclose/allclose,
equal, clamp_min/max, floor_divide, reflected and in-place operators, integer powers."""
import numpy as np
import pytest

import ember
from ember.errors import EmberError
from tests.ops.helpers import t_of, onnx_roundtrip


def test_nan_to_num_values_gradient_and_inplace():
    a = np.array([np.nan, np.inf, -np.inf, 1.5], np.float32)
    out = ember.nan_to_num(t_of(a))
    f = np.finfo(np.float32)
    assert out.tolist() == [0.0, float(f.max), float(f.min), 1.5]
    assert ember.nan_to_num(t_of(a), nan=1.0, posinf=2.0, neginf=-2.0).tolist() == [1, 2, -2, 1.5]
    x = t_of(a, grad=True)
    x.nan_to_num().sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0, 1.0]
    y = t_of(a)
    assert y.nan_to_num_(nan=3.0) is y and y[0].item() == 3.0


def test_isclose_allclose():
    a = t_of(np.array([1.0, np.nan, 2.0]))
    b = t_of(np.array([1.0 + 1e-9, np.nan, 2.1]))
    assert ember.isclose(a, b).tolist() == [True, False, False]
    assert ember.isclose(a, b, equal_nan=True).tolist() == [True, True, False]
    assert ember.allclose(a, a, equal_nan=True) is True and ember.allclose(a, b) is False
    with pytest.raises(EmberError, match="same dtype"):
        ember.isclose(a, t_of(np.array([1.0, 2.0, 3.0], np.float32)))


def test_equal_matches_torch():
    torch = pytest.importorskip("torch")
    cases = [([1, 2], [1.0, 2.0]), ([float("nan")], [float("nan")]), ([1, 2], [1, 3]),
             ([[1, 2]], [1, 2]), ([], [])]
    for a, b in cases:
        want = torch.equal(torch.tensor(a), torch.tensor(b))
        assert ember.equal(ember.tensor(a), ember.tensor(b)) is want
        assert ember.tensor(a).equal(ember.tensor(b)) is want
    for bad in ([1, 2], 1.0, None):
        with pytest.raises(TypeError, match="equal.*must be Tensor"):
            ember.equal(ember.tensor([1, 2]), bad)
    with pytest.raises(TypeError, match="equal.*must be Tensor"):
        ember.equal([1, 2], ember.tensor([1, 2]))


def test_clamp_min_max_inplace_and_floor_divide():
    x = t_of(np.array([-2.0, 0.5, 3.0]))
    assert ember.clamp_min(x, 0.0).tolist() == [0.0, 0.5, 3.0]
    assert x.clamp_max(1.0).tolist() == [-2.0, 0.5, 1.0]
    assert x.clone().clamp_min_(0.0).tolist() == [0.0, 0.5, 3.0]
    assert ember.floor_divide(x, 2).tolist() == [-1.0, 0.0, 1.0]
    y = x.clone()
    y.floor_divide_(2)
    assert y.tolist() == [-1.0, 0.0, 1.0]


def test_reverse_and_inplace_operators_match_torch():
    torch = pytest.importorskip("torch")
    a = np.array([-3.0, -1.5, 2.0, 5.0])
    x, tx = t_of(a), torch.tensor(a)
    np.testing.assert_array_equal((2 % x).numpy(), (2 % tx).numpy())
    np.testing.assert_array_equal((7 // x).numpy(), (7 // tx).numpy())
    np.testing.assert_array_equal((2 ** x).numpy(), (2 ** tx).numpy())
    y, ty = x.clone(), tx.clone()
    y %= 2
    ty %= 2
    np.testing.assert_array_equal(y.numpy(), ty.numpy())
    y //= 0.75
    ty //= 0.75
    np.testing.assert_array_equal(y.numpy(), ty.numpy())
    i, ti = ember.tensor([1, 2, 3]), torch.tensor([1, 2, 3])
    assert (6 & i).tolist() == (6 & ti).tolist() and (6 | i).tolist() == (6 | ti).tolist()
    assert (6 ^ i).tolist() == (6 ^ ti).tolist()


def test_inplace_bitwise_operators_write_into_the_tensor():
    """``eos_reached |= done`` (generation loops) updates the tensor in place, as torch: every
    alias sees it, and a result type the tensor cannot hold raises."""
    done = ember.tensor([False, False, True])
    alias = done
    done |= ember.tensor([True, False, False])
    assert done is alias and alias.tolist() == [True, False, True]
    done &= ember.tensor([True, True, False])
    assert alias.tolist() == [True, False, False]
    done ^= True
    assert alias.tolist() == [False, True, True]
    rows = ember.zeros(2, 3, dtype=ember.bool)
    rows[:, 1] |= ember.tensor([True, False])
    assert rows.tolist() == [[False, True, False], [False, False, False]]
    with pytest.raises(EmberError, match="can't be cast"):
        done |= ember.tensor([1, 2, 3])


def test_int_pow_with_negative_tensor_exponents_matches_torch():
    torch = pytest.importorskip("torch")
    b, e = [2, 1, -1, -1, 0, 3], [-1, -3, -3, -2, -1, 2]
    assert (ember.tensor(b) ** ember.tensor(e)).tolist() == \
        (torch.tensor(b) ** torch.tensor(e)).tolist()
    assert (2 ** ember.tensor([-1, 2])).tolist() == [0, 4]
    with pytest.raises(EmberError, match="negative integer powers"):
        ember.tensor([2]) ** -1


def test_onnx_nan_to_num_and_isclose_with_special_values():
    a = np.array([[np.nan, np.inf, -np.inf, 1.0]], np.float32)
    b = np.array([[np.nan, np.inf, 1.0, 1.0 + 1e-7]], np.float32)
    onnx_roundtrip(lambda x: (ember.nan_to_num(x), ember.nan_to_num(x, 1.0, 2.0, -2.0)), a)
    onnx_roundtrip(lambda x, y: (ember.isclose(x, y), ember.isclose(x, y, equal_nan=True)), a, b)


def test_hardswish_and_hardsigmoid_match_torch_at_the_kinks():
    """torch's hardsigmoid gradient is 0 at x = -3 and 3 (strictly inside only), hardswish's is
    0 at -3 and 1 at 3; hardswish rounds ``x * clamp(x + 3, 0, 6)`` before dividing by 6."""
    torch = pytest.importorskip("torch")
    x = np.concatenate([[-4.0, -3.0, -1.0, 0.0, 3.0, 4.0],
                        np.random.default_rng(0).standard_normal(2000) * 4]).astype(np.float32)
    for name in ("hardswish", "hardsigmoid"):
        xt = torch.from_numpy(x.copy()).requires_grad_()
        want = getattr(torch.nn.functional, name)(xt)
        want.sum().backward()
        xe = ember.from_numpy(x.copy()).requires_grad_()
        got = getattr(ember.nn.functional, name)(xe)
        got.sum().backward()
        np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
        np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "complex64"])
def test_invert_of_a_floating_tensor_is_torchs_type_error(dtype):
    import torch
    with pytest.raises(TypeError) as want:
        ~torch.ones(2, dtype=getattr(torch, dtype))
    with pytest.raises(TypeError) as got:
        ~ember.ones(2, dtype=getattr(ember, dtype))
    assert str(want.value) in str(got.value)
    with pytest.raises(NotImplementedError):      # the function: torch's NotImplementedError
        ember.bitwise_not(ember.ones(2, dtype=getattr(ember, dtype)))
    assert (~ember.tensor([1, -2])).tolist() == (~torch.tensor([1, -2])).tolist()
    assert (~ember.tensor([True, False])).tolist() == [False, True]
