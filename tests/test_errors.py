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
        assert str(eager.value).startswith("linear: input feature size 5 does not match weight")


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
    assert "(1, 3, 5, 5)" in msg and "(4, 2, 3, 3)" in msg


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
