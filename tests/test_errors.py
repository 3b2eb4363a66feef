"""User errors name the op, the shapes and dtypes, and what was expected; no raw NumPy errors."""
import pytest

import ember


@pytest.mark.parametrize("fn, match", [
    (lambda: ember.ones(3, 4) + ember.ones(5),
     r"add: The size of tensor a \(4\) must match the size of tensor b \(5\) at non-singleton "
     r"dimension 1: shapes \(3, 4\) and \(5,\) cannot be broadcast"),
    (lambda: ember.ones(2, 3) @ ember.ones(4, 5),
     r"matmul: mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\): inner dimensions differ: "
     r"\(2, 3\) @ \(4, 5\)"),
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
        assert info.type in (ember.errors.EmberRuntimeError, ember.errors.DimensionError)
        assert info.value.args[0].split(":")[0].split()[0] in ("reshape", "unsqueeze", "transpose",
                                                                "stack")


def test_bad_device_and_dtype():
    with pytest.raises(RuntimeError, match="cpu"):
        ember.zeros(2, device="cuda")
    with pytest.raises(RuntimeError, match="cpu"):
        ember.ones(2).to("cuda")
    with pytest.raises(TypeError, match="not a dtype|does not support"):
        ember.zeros(2, dtype="complex32")


def test_unsupported_features_raise_a_specific_error():
    import ember.multiprocessing as mp
    with pytest.raises(ember.UnsupportedError, match="file_system"):
        mp.set_sharing_strategy("file_system")
    with pytest.raises(ember.UnsupportedError, match="'lanczos'"):
        ember.nn.functional.interpolate(ember.ones(1, 1, 4, 4), scale_factor=2, mode="lanczos",
                                        antialias=True)
    assert issubclass(ember.UnsupportedError, NotImplementedError)


# ---------------------------------------------------------------- known escapes
from ember.errors import EmberError, EmberOverflowError  # noqa: E402
import ember.nn.functional as F  # noqa: E402


@pytest.mark.parametrize("fn", [
    lambda: ember.tensor(2 ** 70),
    lambda: ember.tensor(2 ** 63),  # NumPy makes it uint64; it used to wrap to -2**63 silently
    lambda: ember.tensor([1, 2 ** 64 - 1]),  # NumPy makes it float64; it used to round silently
    lambda: ember.tensor([[1.5, -2 ** 63 - 1]]),
    lambda: ember.ones(2) + 2 ** 70,
    lambda: 2 ** 70 - ember.ones(2),
    lambda: ember.ones(2, dtype=ember.int64) * 2 ** 64,
    lambda: ember.ones(2, dtype=ember.int64).clamp(max=2 ** 70),
    lambda: ember.full((2,), 2 ** 70),
    lambda: ember.full((2,), 2 ** 70, dtype=ember.float32),
])
def test_python_ints_outside_int64_are_an_overflow_error(fn):
    with pytest.raises(EmberOverflowError, match=r"int64|Python int") as info:
        fn()
    # torch raises ValueError from torch.tensor and OverflowError from ops: both clauses work
    assert isinstance(info.value, OverflowError) and isinstance(info.value, ValueError)
    assert ember.tensor(-2 ** 63).item() == -2 ** 63 and ember.tensor(2 ** 63 - 1).item() == 2 ** 63 - 1


@pytest.mark.parametrize("kwargs, match", [
    (dict(scale_factor=0), r"output \[0, 0\]"),
    (dict(scale_factor=0.1), r"output \[0, 0\]"),
    (dict(scale_factor=-1.0), r"output \[-4, -4\]"),
    (dict(size=-2), r"output \[-2, -2\]"),
    (dict(size=0), r"output \[0, 0\]"),
    (dict(size=(4, 0)), r"output \[4, 0\]"),
    (dict(scale_factor=float("nan")), "finite"),
    (dict(scale_factor=float("inf")), "finite"),
    (dict(scale_factor=(2.0, 2.0, 2.0)), "2 finite number"),
])
def test_interpolate_rejects_bad_sizes(kwargs, match):
    with pytest.raises(EmberError, match=r"^interpolate: .*" + match) as info:
        F.interpolate(ember.ones(1, 1, 4, 4), **kwargs)
    assert isinstance(info.value, (RuntimeError, ValueError))


@pytest.mark.parametrize("training", [False, True])
def test_batch_norm_checks_the_channel_count(training):
    x = ember.ones(2, 3, 4)
    with pytest.raises(RuntimeError, match=r"^batch_norm: running_mean should contain 3 elements "
                                           r"not 4 \(input shape \[2, 3, 4\]"):
        F.batch_norm(x, ember.zeros(4), ember.ones(4), training=training)
    with pytest.raises(RuntimeError, match=r"^batch_norm: weight should contain 3 elements not 4"):
        F.batch_norm(x, ember.zeros(3), ember.ones(3), weight=ember.ones(4), training=training)
    with pytest.raises(RuntimeError, match=r"^batch_norm: bias should contain 3 elements not 2"):
        F.batch_norm(x, None, None, bias=ember.ones(2), training=True)
    with pytest.raises(RuntimeError, match=r"batch_norm: running_mean should contain 3"):
        ember.nn.BatchNorm1d(4).eval()(x)


def test_view_dtype_reinterprets_memory():
    x = ember.ones(2, 3)
    v = x.view(ember.int32)
    assert v.dtype == ember.int32 and v.shape == (2, 3) and v[0, 0].item() == 1065353216
    assert x.view(ember.int16).shape == (2, 6) and x.view(ember.uint8).shape == (2, 12)
    assert ember.ones(2, 4).view(ember.float64).shape == (2, 2)
    v[0, 0] = 0  # shares memory (and the version counter) with x
    assert x[0, 0].item() == 0.0 and x._version == v._version
    assert not ember.ones(2, requires_grad=True).view(ember.int32).requires_grad
    for bad, match in ((lambda: ember.ones(2, 3).view(ember.float64), r"size\(-1\) must be divisible by 2"),
                       (lambda: ember.ones(4, 2).t().view(ember.int16), r"stride\(-1\) must be 1"),
                       (lambda: ember.tensor(1.0).view(ember.float64), r"dim\(\) cannot be 0")):
        with pytest.raises(EmberError, match=r"^view\(dtype\): .*" + match + " to view float32 as"):
            bad()


def test_view_dtype_matches_torch():
    torch = pytest.importorskip("torch")
    import numpy as np
    base = np.arange(24, dtype=np.float32).reshape(4, 6) + 0.5
    pick = {"contiguous": lambda t: t, "transposed": lambda t: t.t(), "0-d": lambda t: t[0, 0],
            "sliced": lambda t: t[:, 1:5], "column": lambda t: t[:, :1], "empty": lambda t: t[:0]}
    for name, f in pick.items():
        for dt in ("float32", "int32", "int16", "float64", "uint8", "int64"):
            try:
                r = f(torch.tensor(base)).view(getattr(torch, dt))
                want = (list(r.shape), r.numpy().tobytes())
            except RuntimeError:
                want = "error"
            try:
                r = f(ember.tensor(base)).view(getattr(ember, dt))
                got = (list(r.shape), r.numpy().tobytes())
            except EmberError:
                got = "error"
            assert got == want, (name, dt)


def test_unfold_errors_name_the_users_input_not_an_internal_weight():
    with pytest.raises(RuntimeError) as info:
        F.unfold(ember.ones(1, 2, 3, 3), kernel_size=5)
    msg = str(info.value)
    assert msg.startswith("unfold: given input with spatial size (3, 3), kernel_size=(5, 5)")
    assert "weight" not in msg and "conv2d" not in msg
    for bad in (lambda: F.unfold(ember.ones(3, 3), 2), lambda: F.unfold(ember.ones(1, 1, 4, 4), 0),
                lambda: F.unfold(ember.ones(1, 1, 4, 4, dtype=ember.int64), 2)):
        with pytest.raises(EmberError, match="^unfold: ") as info:
            bad()
        assert "weight" not in str(info.value)


def test_unfold_takes_unbatched_input_like_torch():
    torch = pytest.importorskip("torch")
    import numpy as np
    x = np.random.default_rng(0).random((3, 5, 6), dtype=np.float32)
    for kw in (dict(kernel_size=2), dict(kernel_size=(2, 3), stride=2, padding=1, dilation=(1, 2))):
        want = torch.nn.functional.unfold(torch.tensor(x), **kw).numpy()
        np.testing.assert_array_equal(F.unfold(ember.tensor(x), **kw).numpy(), want)
        want = torch.nn.functional.unfold(torch.tensor(x[None]), **kw).numpy()
        np.testing.assert_array_equal(F.unfold(ember.tensor(x[None]), **kw).numpy(), want)


@pytest.mark.parametrize("optimize", [False, True])
def test_traced_linear_fed_the_wrong_width_fails_like_eager(optimize):
    import ember.jit
    nn = ember.nn
    for model in (nn.Linear(4, 3), nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))):
        with ember.no_grad():
            traced = ember.jit.trace(model, (ember.ones(2, 4),), optimize=optimize)
            with pytest.raises(EmberError) as eager:
                model(ember.ones(2, 5))
            with pytest.raises(EmberError) as trace:
                traced(ember.ones(2, 5))
        assert type(trace.value) is type(eager.value) and str(trace.value) == str(eager.value)
        assert str(eager.value).startswith("linear: mat1 and mat2 shapes cannot be multiplied "
                                           "(2x5 and 4x")


def test_alpha_dropout_p_one_and_out_of_range():
    x = ember.tensor([1.0, -2.0, float("nan")])
    out = F.alpha_dropout(x, p=1.0, training=True)
    assert out.tolist()[:2] == [0.0, 0.0]  # torch: input * 0 (NaN stays NaN)
    assert F.alpha_dropout(x, p=1.0, training=False) is x
    assert ember.nn.AlphaDropout(1.0)(ember.ones(3)).tolist() == [0.0, 0.0, 0.0]
    for p in (2.0, -0.1, float("nan"), "0.5"):
        with pytest.raises(ValueError, match=r"^alpha_dropout: dropout probability has to be "
                                             r"between 0 and 1"):
            F.alpha_dropout(ember.ones(3), p=p, training=True)


def test_alpha_dropout_matches_torch_at_the_edges():
    torch = pytest.importorskip("torch")
    x = [[1.0, -2.0], [0.5, 3.0]]
    for p, training in ((1.0, True), (1.0, False), (0.0, True)):
        want = torch.nn.functional.alpha_dropout(torch.tensor(x), p, training).tolist()
        assert F.alpha_dropout(ember.tensor(x), p, training).tolist() == want


def test_error_messages_name_the_op_once():
    with pytest.raises(RuntimeError) as info:
        F.conv2d(ember.ones(1, 3, 5, 5), ember.ones(4, 2, 3, 3))
    msg = str(info.value)
    assert msg.startswith("conv2d: ") and not msg.startswith("conv2d: conv2d")
    assert "[1, 3, 5, 5]" in msg and "[4, 2, 3, 3]" in msg


def test_autograd_errors_are_ember_errors():
    x = ember.ones(2, requires_grad=True)
    y = (x * 2).sum()
    y.backward()
    with pytest.raises(ember.errors.EmberRuntimeError, match="backward through the graph a second"):
        y.backward()
    with pytest.raises(ember.errors.EmberRuntimeError, match="does not require grad"):
        ember.autograd.backward([ember.ones(2).sum()])
    with pytest.raises(ember.errors.EmberRuntimeError, match="grad: input 0 does not require grad"):
        ember.autograd.grad([(x * 2).sum()], [ember.ones(2)])
    with pytest.raises(ember.errors.EmberRuntimeError, match="scalar outputs"):
        ember.autograd.backward([x * 2])
    with pytest.raises(ember.errors.EmberRuntimeError, match=r"^backward: gradient of shape \[3\]"):
        (x * 2).backward(ember.ones(3))
    with pytest.raises(ember.errors.EmberTypeError, match="argument 'gradient' must be a Tensor"):
        (x * 2).backward([1.0, 1.0])


# ---------------------------------------------------------------- common mistakes, against torch
def _net(T, n):
    class Net(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = T.nn.Linear(4, n)
            self.fc2 = T.nn.Linear(n, 2)
    return Net()


def _no_super(T):
    class Net(T.nn.Module):
        def __init__(self):
            pass

        def forward(self, x):
            return x
    return Net()(T.ones(1))


def _ragged_samples(T):
    class D(T.utils.data.Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return T.ones(i + 1)
    return next(iter(T.utils.data.DataLoader(D(), batch_size=2)))


# (id, fn(T) run with T = torch and T = ember, a regex ember's message must match): ember must
# raise (never succeed where torch raises) an instance of torch's exception class
_MISTAKES = [
    ("linear width", lambda T: T.nn.Linear(784, 10)(T.ones(64, 100)),
     r"^linear: mat1 and mat2 shapes cannot be multiplied \(64x100 and 784x10\)"),
    ("Linear dtype", lambda T: T.nn.Linear(3, 2)(T.ones(2, 3, dtype=T.float64)),
     r"^linear: mat1 and mat2 must have the same dtype, but got float64 and float32"),
    ("Linear long input", lambda T: T.nn.Linear(3, 2)(T.ones(2, 3, dtype=T.long)),
     r"same dtype, but got int64 and float32"),
    ("F.linear dtype", lambda T: T.nn.functional.linear(T.ones(2, 3),
                                                        T.ones(2, 3, dtype=T.float64)),
     r"^linear: mat1 and mat2 must have the same dtype, but got float32 and float64"),
    ("conv channels", lambda T: T.nn.Conv2d(3, 16, 3)(T.ones(8, 1, 28, 28)),
     r"^conv2d: Given groups=1, weight of size \[16, 3, 3, 3\], expected input\[8, 1, 28, 28\] to "
     r"have 3 channels, but got 1 channels instead"),
    ("conv1d channels", lambda T: T.nn.Conv1d(4, 8, 3)(T.ones(2, 3, 10)),
     r"^conv1d: Given groups=1, weight of size \[8, 4, 3\], expected input\[2, 3, 10\] to have 4 "
     r"channels, but got 3"),
    ("max_pool too small", lambda T: T.nn.MaxPool2d(4)(T.ones(1, 3, 2, 2)),
     r"^max_pool2d: input \(1, 3, 2, 2\) is too small"),
    ("ce float target", lambda T: T.nn.functional.cross_entropy(T.randn(4, 10), T.rand(4)),
     r"^cross_entropy: expected target dtype to be Long or Byte, but got float32"),
    ("ce int32 target", lambda T: T.nn.functional.cross_entropy(
        T.randn(4, 10), T.tensor([1, 2, 3, 3], dtype=T.int32)), r"Long or Byte .*got int32"),
    ("nll int32 target", lambda T: T.nn.functional.nll_loss(
        T.randn(4, 10), T.tensor([1, 2, 3, 3], dtype=T.int32)), r"^nll_loss: .*got int32"),
    ("ce long probabilities", lambda T: T.nn.functional.cross_entropy(
        T.randn(4, 10), T.zeros(4, 10, dtype=T.long)),
     r"^cross_entropy: Expected floating point type for target with class probabilities, got "
     r"int64"),
    ("ce batch size", lambda T: T.nn.functional.cross_entropy(
        T.randn(4, 10), T.zeros(5, dtype=T.long)),
     r"^cross_entropy: Expected input batch_size \(4\) to match target batch_size \(5\)\.$"),
    ("ce 1-d input", lambda T: T.nn.functional.cross_entropy(T.randn(10), T.tensor([3, 4])),
     r"For 1D input, 1D target must have size 1, but got target size: 2"),
    ("ce target out of bounds", lambda T: T.nn.CrossEntropyLoss()(
        T.randn(4, 10), T.tensor([1, 2, 10, 3])), r"^cross_entropy: Target 10 is out of bounds"),
    ("bce_with_logits long target", lambda T: T.nn.BCEWithLogitsLoss()(
        T.rand(4), T.ones(4, dtype=T.long)), r"got int64"),
    ("std of ints", lambda T: T.tensor([1, 2, 3]).std(),
     r"^std: std and var only support floating point and complex dtypes, got int64"),
    ("float of many", lambda T: float(T.ones(3)),
     r"^float: only one element tensors can be converted to Python scalars, got a Tensor of "
     r"shape \[3\]"),
    ("int of many", lambda T: int(T.ones(3)), r"^int: only one element tensors"),
    ("sum dim", lambda T: T.ones(2, 3).sum(dim=2),
     r"^sum: dimension 2 out of range \(expected to be in range of \[-2, 1\]\)"),
    ("softmax dim", lambda T: T.nn.functional.softmax(T.ones(2, 3), dim=2), r"\[-2, 1\]"),
    ("unsqueeze dim", lambda T: T.ones(2, 3).unsqueeze(4), r"\[-3, 2\]"),
    ("size dim", lambda T: T.ones(2, 3).size(2), r"^size: dimension 2 out of range .*\[-2, 1\]"),
    ("cat dim", lambda T: T.cat([T.ones(2, 3), T.ones(2, 3)], dim=2), r"^cat: dimension 2"),
    ("cat empty", lambda T: T.cat([]), r"^cat: expected a non-empty list of Tensors"),
    ("cat(a, b)", lambda T: T.cat(T.ones(2, 3), T.ones(2, 3)),
     r"^cat: argument 'dim' must be int, not Tensor: pass the tensors as one list"),
    ("cat ranks", lambda T: T.cat([T.ones(2, 3), T.ones(3)]),
     r"^cat: Tensors must have same number of dimensions: got 2 and 1"),
    ("broadcast", lambda T: T.ones(5, 3) * T.ones(4, 1),
     r"^mul: The size of tensor a \(5\) must match the size of tensor b \(4\) at non-singleton "
     r"dimension 0"),
    ("tensor of tensors", lambda T: T.tensor([T.ones(2), T.ones(2)]),
     r"^tensor: only one element tensors can be converted to Python scalars, got an element of "
     r"shape \[2\]; to join tensors into one use ember.stack"),
    ("ragged list", lambda T: T.tensor([[1, 2], [3]]),
     r"^tensor: expected sequence of length 2 at dim 1 \(got 1\)"),
    ("ragged list deep", lambda T: T.tensor([[[1, 2], [3, 4]], [[1, 2], [3]]]),
     r"expected sequence of length 2 at dim 2 \(got 1\)"),
    ("None in list", lambda T: T.tensor([1, None]), r"^tensor: Could not infer dtype of NoneType"),
    ("dict data", lambda T: T.tensor({"a": 1}), r"^tensor: Could not infer dtype of dict"),
    ("strings", lambda T: T.tensor(["a", "b"]), r"too many dimensions 'str'"),
    ("full of str", lambda T: T.full((2,), "a"),
     r"^full\(\): argument 'fill_value' must be Number, not str"),
    ("no super().__init__()", _no_super,
     r"Module.__init__\(\) was not called; call super\(\).__init__\(\) first thing in Net"),
    ("missing and unexpected keys", lambda T: _net(T, 3).load_state_dict(
        {"fc1.weight": T.ones(3, 4), "fc1.bias": T.ones(3), "out.weight": T.ones(2, 3)}),
     r"^Error\(s\) in loading state_dict for Net:\n\tMissing key\(s\) in state_dict: "
     r"\"fc2.weight\", \"fc2.bias\". \n\tUnexpected key\(s\) in state_dict: \"out.weight\". $"),
    ("DataParallel keys", lambda T: _net(T, 3).load_state_dict(
        {"module." + k: v for k, v in _net(T, 3).state_dict().items()}),
     r"prefixed 'module.'"),
    ("ragged samples", _ragged_samples,
     r"^stack expects each tensor to be equal size, but got \[1\] at entry 0 and \[2\] at "
     r"entry 1"),
    ("to cuda", lambda T: T.ones(2).to("cuda"), r"^to\(\): ember runs only on the CPU"),
    ("module cuda", lambda T: T.nn.Linear(2, 2).cuda(), r"runs only on the CPU"),
    ("unknown device", lambda T: T.zeros(2, device="gpu"),
     r"^zeros: unknown device type 'gpu' in 'gpu': expected one of cpu, cuda"),
    ("load a directory", lambda T: T.load("/"), r"is a directory"),
]


@pytest.mark.parametrize("fn, match", [m[1:] for m in _MISTAKES], ids=[m[0] for m in _MISTAKES])
def test_common_mistakes_fail_as_in_torch(fn, match):
    torch = pytest.importorskip("torch")
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(Exception) as want:
            fn(torch)
        with pytest.raises(want.type, match=match):
            fn(ember)


def test_tensor_of_one_element_tensors_is_a_list_of_numbers_as_in_torch():
    torch = pytest.importorskip("torch")
    for data in (lambda T: [T.ones(1), T.ones(1)], lambda T: [T.tensor(1.0), 2.5],
                 lambda T: [T.ones(1, dtype=T.long), T.ones(1)], lambda T: [[T.tensor(3), 4]],
                 lambda T: [T.tensor(3, dtype=T.float64), 2.5]):
        want, got = torch.tensor(data(torch)), ember.tensor(data(ember))
        assert list(got.shape) == list(want.shape) and str(got.dtype)[6:] == str(want.dtype)[6:]
        assert got.tolist() == want.tolist()
    assert ember.cat([ember.ones(2)], dim=ember.tensor(0)).shape == (2,)


def test_dimension_errors_are_index_and_runtime_errors():
    from ember.errors import DimensionError
    with pytest.raises(DimensionError) as info:
        ember.ones(2, 3).mean(-3)
    assert isinstance(info.value, IndexError) and isinstance(info.value, RuntimeError)


def test_cuda_errors_are_assertion_errors_as_torch_without_cuda():
    from ember.errors import DeviceUnavailableError
    with pytest.raises(AssertionError) as info:
        ember.ones(2).cuda()
    assert isinstance(info.value, DeviceUnavailableError) and isinstance(info.value, RuntimeError)
    with pytest.raises(ember.UnsupportedError, match="the mps device 'mps' is not available"):
        ember.ones(2).to("mps")
