"""The device API a CPU-only framework answers: cpu devices accepted everywhere, CUDA a clear
UnsupportedError; torch's legacy tensor types and Tensor constructor."""
import numpy as np
import pytest

import ember
from ember.errors import UnsupportedError


def test_cpu_device_objects_and_kwargs():
    d = ember.device("cpu:0")
    assert (d.type, d.index, str(d)) == ("cpu", 0, "cpu:0")
    assert d == "cpu" and d == ember.device("cpu") and ember.device("cpu", 0) == d
    t = ember.zeros(2, device="cpu")
    assert t.to("cpu") is t and t.to(ember.device("cpu")) is t and t.device == "cpu"
    m = ember.nn.Linear(2, 2, device="cpu")
    assert m.to("cpu") is m and m.to(device=d) is m
    assert ember.nn.Linear(2, 2, True, d).weight.shape == (2, 2)
    assert ember.ones_like(t, device="cpu").shape == (2,) and ember.Generator("cpu")


@pytest.mark.parametrize("call", [
    lambda: ember.ones(2).cuda(), lambda: ember.ones(2).to("cuda"),
    lambda: ember.ones(2).to(device="cuda:1"), lambda: ember.zeros(2, device="cuda"),
    lambda: ember.tensor([1.0], device="cuda"), lambda: ember.device("cuda"),
    lambda: ember.nn.Linear(2, 2).cuda(), lambda: ember.nn.Linear(2, 2).to("cuda"),
    lambda: ember.nn.Conv2d(1, 1, 3, device="cuda"),
    lambda: ember.nn.LayerNorm(3, device="cuda"),
    lambda: ember.nn.Linear(2, 2, True, "cuda"),
    lambda: ember.zeros_like(ember.ones(2), device="cuda"),
    lambda: ember.randn_like(ember.ones(2), device="cuda"),
    lambda: ember.ones(2).new_zeros(2, device="cuda"),
    lambda: ember.ones(2).new_tensor([1.0], device="cuda"), lambda: ember.Generator("cuda"),
    lambda: ember.cuda.current_device(), lambda: ember.cuda.synchronize(),
    lambda: ember.accelerator.synchronize()])
def test_cuda_is_a_clear_unsupported_error(call):
    with pytest.raises(UnsupportedError, match="CUDA|accelerator") as e:
        call()
    assert isinstance(e.value, RuntimeError)


def test_legacy_types_construct_check_and_name():
    torch = pytest.importorskip("torch")
    for name in ("FloatTensor", "DoubleTensor", "LongTensor", "IntTensor", "BoolTensor",
                 "ByteTensor", "HalfTensor", "ShortTensor", "CharTensor"):
        E, T = getattr(ember, name), getattr(torch, name)
        a, b = E(2, 3), T(2, 3)
        assert tuple(a.shape) == tuple(b.shape) and str(a.dtype)[6:] == str(b.dtype)[6:]
        a, b = E([1, 0, 2]), T([1, 0, 2])
        np.testing.assert_array_equal(a.numpy(), b.numpy())
        assert a.type() == b.type()      # torch's spelling: programs compare the literal
        assert isinstance(a, E) and E().shape == (0,)
    assert not isinstance(ember.ones(2), ember.LongTensor)
    assert ember.ones(2).type("torch.LongTensor").dtype == ember.int64
    assert ember.ones(2).type(ember.DoubleTensor).dtype == ember.float64
    with pytest.raises(ember.errors.EmberTypeError, match="invalid type"):
        ember.ones(2).type("torch.NoSuchTensor")


def test_tensor_constructor_is_torchs():
    torch = pytest.importorskip("torch")
    for args in [(2, 3), ([1, 2],), ((2, 3),), ([[1, 2], [3, 4]],), (np.array([1, 2]),), ()]:
        a, b = ember.Tensor(*args), torch.Tensor(*args)
        assert tuple(a.shape) == tuple(b.shape) and a.dtype == ember.float32
        if args and not isinstance(args[0], int):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert ember.Tensor(ember.Size([4])).shape == (4,)
    assert ember.Tensor([1.0], requires_grad=True).requires_grad


def test_mkldnn_is_not_available_as_torch_without_it():
    assert ember.backends.mkldnn.is_available() is False
