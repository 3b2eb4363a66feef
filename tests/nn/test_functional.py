"""ember.nn.functional calls against torch.nn.functional that the layer cases do not reach: the
legacy size_average/reduce arguments, scaled_dot_product_attention with its masks and scale,
normalize, one_hot, unfold, linear interpolate, local_response_norm, embedding_bag (float64);
interpolate(antialias=True) through size / scale_factor, on non-contiguous input, with gradients
and a float64 gradcheck."""
import numpy as np
import pytest

import ember
from tests.nn._parity import assert_close

torch = pytest.importorskip("torch")


def test_functional_legacy_reduction_args():
    import ember.nn.functional as F
    x = np.random.default_rng(0).standard_normal((3, 4))
    t = np.random.default_rng(1).standard_normal((3, 4))
    with pytest.warns(UserWarning):
        a = F.mse_loss(ember.tensor(x), ember.tensor(t), size_average=False)
    b = torch.nn.functional.mse_loss(torch.tensor(x), torch.tensor(t), reduction="sum")
    assert_close(a.numpy(), b.numpy())
    with pytest.warns(UserWarning):
        c = F.cross_entropy(ember.tensor(x), ember.tensor([0, 1, 2]), None, None, -100, False)
    assert tuple(c.shape) == (3,)


@pytest.mark.parametrize("size_average,reduce", [(False, None), (None, False), (True, None),
                                                 (False, True), (True, False)])
def test_legacy_reduction_warning_names_the_reduction_as_torch(size_average, reduce):
    # pytorch-tutorial's VAE calls binary_cross_entropy(..., size_average=False): torch warns
    # "please use reduction='sum' instead."
    import warnings
    x = np.random.default_rng(0).uniform(0.1, 0.9, (3, 4)).astype(np.float32)
    messages = []
    for F, lib in ((__import__("ember.nn.functional").nn.functional, ember),
                   (torch.nn.functional, torch)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = F.binary_cross_entropy(lib.tensor(x), lib.tensor(x[::-1].copy()),
                                         size_average=size_average, reduce=reduce)
        messages.append(([str(w.message) for w in caught], np.asarray(out.numpy())))
    assert messages[0][0] == messages[1][0]
    assert_close(messages[0][1], messages[1][1])


def test_attention_normalize_one_hot_unfold_interpolate_lrn_embedding_bag_vs_torch():
    import ember.nn.functional as F
    import torch.nn.functional as TF
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 3, 5, 4)) for _ in range(3))
    mask = rng.random((5, 5)) > 0.3
    np.fill_diagonal(mask, True)
    for kw in [{}, {"is_causal": True}, {"attn_mask": mask}, {"scale": 0.3}]:
        ekw = {kk: (ember.tensor(vv) if isinstance(vv, np.ndarray) else vv)
               for kk, vv in kw.items()}
        tkw = {kk: (torch.tensor(vv) if isinstance(vv, np.ndarray) else vv)
               for kk, vv in kw.items()}
        a = F.scaled_dot_product_attention(*(ember.tensor(t) for t in (q, k, v)), **ekw)
        b = TF.scaled_dot_product_attention(*(torch.tensor(t) for t in (q, k, v)), **tkw)
        assert_close(a.numpy(), b.numpy())
    x = rng.standard_normal((2, 3, 4, 4))
    assert_close(F.normalize(ember.tensor(x), dim=1).numpy(),
                 TF.normalize(torch.tensor(x), dim=1).numpy())
    assert_close(F.one_hot(ember.tensor([0, 2, 1]), 4).numpy(),
                 TF.one_hot(torch.tensor([0, 2, 1]), 4).numpy())
    assert_close(F.unfold(ember.tensor(x), 2, padding=1, stride=2).numpy(),
                 TF.unfold(torch.tensor(x), 2, padding=1, stride=2).numpy())
    assert_close(F.interpolate(ember.tensor(x[0]), scale_factor=2, mode="linear").numpy(),
                 TF.interpolate(torch.tensor(x[0]), scale_factor=2, mode="linear").numpy())
    assert_close(F.local_response_norm(ember.tensor(x), 3).numpy(),
                 TF.local_response_norm(torch.tensor(x), 3).numpy())
    assert_close(F.embedding_bag(ember.tensor([[0, 2], [1, 3]]), ember.tensor(x[0, 0])).numpy(),
                 TF.embedding_bag(torch.tensor([[0, 2], [1, 3]]), torch.tensor(x[0, 0])).numpy())



EMPTY_BATCH_CASES = {   # name -> (input shape, module or function of the library)
    "conv2d": ((0, 3, 8, 8), lambda L: L.nn.Conv2d(3, 4, 3, padding=1)),
    "conv_transpose2d": ((0, 3, 8, 8), lambda L: L.nn.ConvTranspose2d(3, 4, 3, stride=2)),
    "max_pool2d": ((0, 3, 8, 8), lambda L: L.nn.MaxPool2d(2)),
    "max_pool2d_indices": ((0, 3, 8, 8), lambda L: lambda x: L.nn.functional.max_pool2d(
        x, 2, return_indices=True)[0]),
    "adaptive_max_pool2d": ((0, 3, 8, 8), lambda L: L.nn.AdaptiveMaxPool2d(2)),
    "max_pool1d": ((0, 3, 10), lambda L: L.nn.MaxPool1d(2)),
    "avg_pool2d": ((0, 3, 8, 8), lambda L: L.nn.AvgPool2d(2)),
    "batch_norm_train": ((0, 3, 8, 8), lambda L: L.nn.BatchNorm2d(3)),
    "batch_norm_eval": ((0, 3, 8, 8), lambda L: L.nn.BatchNorm2d(3).eval()),
    "batch_norm1d_train": ((0, 3), lambda L: L.nn.BatchNorm1d(3)),
    "instance_norm": ((0, 3, 8, 8), lambda L: L.nn.InstanceNorm2d(3)),
    "group_norm": ((0, 4, 8, 8), lambda L: L.nn.GroupNorm(2, 4)),
    "layer_norm": ((0, 5), lambda L: L.nn.LayerNorm(5)),
    "linear": ((0, 5), lambda L: L.nn.Linear(5, 3)),
    "lstm": ((5, 0, 4), lambda L: L.nn.LSTM(4, 6)),
    "transformer_layer": ((0, 3, 8), lambda L: L.nn.TransformerEncoderLayer(
        8, 2, 16, dropout=0.0, batch_first=True)),
}


@pytest.mark.parametrize("case", sorted(EMPTY_BATCH_CASES))
def test_an_empty_batch_runs_forward_and_backward_as_torch(case):
    """A batch of zero samples (a data loader's empty last batch, a filtered batch): the
    output's shape, the input's gradient, the parameters' (zero) gradients and the running
    statistics as torch gives them."""
    shape, make = EMPTY_BATCH_CASES[case]
    res = {}
    for L in (torch, ember):
        L.manual_seed(0)
        m = make(L)
        x = L.zeros(shape, requires_grad=True)
        y = m(x)
        y = y[0] if isinstance(y, tuple) else y
        y.sum().backward()
        params = list(m.named_parameters()) if isinstance(m, L.nn.Module) else []
        buffers = list(m.named_buffers()) if isinstance(m, L.nn.Module) else []
        res[L] = (tuple(y.shape), tuple(x.grad.shape),
                  {n: None if p.grad is None else p.grad.detach().numpy() for n, p in params},
                  {n: b.detach().numpy() for n, b in buffers})
    (ts, tg, tp, tb), (es, eg, ep, eb) = res[torch], res[ember]
    assert (es, eg) == (ts, tg)
    assert ep.keys() == tp.keys() and eb.keys() == tb.keys()
    for n in tp:
        assert (ep[n] is None) == (tp[n] is None), n
        if tp[n] is not None:
            np.testing.assert_array_equal(ep[n], tp[n])
    for n in tb:
        np.testing.assert_array_equal(eb[n], tb[n])


_INPLACE_ACTIVATIONS = {   # name -> (function, its arguments after the input)
    "silu": ("silu", ()), "relu6": ("relu6", ()), "hardswish": ("hardswish", ()),
    "hardsigmoid": ("hardsigmoid", ()), "mish": ("mish", ()), "selu": ("selu", ()),
    "celu": ("celu", (0.7,)), "threshold": ("threshold", (0.1, -2.0)),
    "rrelu eval": ("rrelu", (1 / 8, 1 / 3, False)), "elu": ("elu", ()),
    "leaky_relu": ("leaky_relu", (0.2,)), "hardtanh": ("hardtanh", (-0.5, 0.5)),
}


@pytest.mark.parametrize("name", sorted(_INPLACE_ACTIVATIONS))
def test_inplace_activations_on_a_graph_value_differentiate_as_torch(name):
    """An in-place activation of an intermediate (MobileNet's ReLU6/Hardswish(inplace=True),
    EfficientNet's SiLU(inplace=True)): the result is written into its input and the backward
    sees the values before the write (silu, relu6, hardswish, mish, selu raised 'modified by an
    inplace operation'). Compared with torch's out-of-place function; celu's and hardsigmoid's
    gradients with their derivatives (torch's float64 backwards of those two use
    float32-rounded constants, 1/alpha and 1/6: 2e-7 and 3e-8 off)."""
    torch = pytest.importorskip("torch")
    fn, args = _INPLACE_ACTIVATIONS[name]
    rng = np.random.default_rng(0)
    data = rng.standard_normal((3, 5)) * 3
    outs = []
    for m, inplace in ((torch, False), (ember, True)):
        x = m.tensor(data, requires_grad=True)
        h = x * 1.5
        y = getattr(m.nn.functional, fn)(h, *args, inplace=inplace)
        assert (y is h) == inplace
        (y * m.tensor(data)).sum().backward()
        outs.append((y.detach().numpy(), x.grad.numpy()))
    np.testing.assert_allclose(outs[1][0], outs[0][0], rtol=1e-12, atol=1e-15)
    h = data * 1.5
    exact = {"celu": lambda: np.where(h > 0, 1.0, np.exp(h / 0.7)),
             "hardsigmoid": lambda: np.where((h > -3) & (h < 3), 1 / 6, 0.0)}.get(name)
    expected = outs[0][1] if exact is None else exact() * data * 1.5
    np.testing.assert_allclose(outs[1][1], expected, rtol=1e-12, atol=1e-15)


def test_losses_of_two_float_dtypes_compute_in_torchs_dtype():
    """binary_cross_entropy_with_logits computes in the target's dtype, huber_loss in the
    input's (torch's kernels write into a tensor of that dtype): float64 logits with a float32
    target give a float32 loss. (float32 logits with a float64 target: torch's float64 loss
    takes log_sigmoid in float32, 2e-8 off; compared with the formula.)"""
    torch = pytest.importorskip("torch")
    out = []
    for m in (torch, ember):
        F = m.nn.functional
        x64 = m.tensor([0.3, -1.2, 2.7], dtype=m.float64, requires_grad=True)
        t32 = m.tensor([1.0, 0.0, 0.3])
        bce = F.binary_cross_entropy_with_logits(x64, t32)
        bce.backward()
        bce_up = F.binary_cross_entropy_with_logits(x64.detach().float(), t32.double())
        hub = F.huber_loss(x64.detach().float(), t32.double(), delta=0.5)
        hub_up = F.huber_loss(x64.detach(), t32, delta=0.5)
        out.append([(v.item(), str(v.dtype).split(".")[-1]) for v in (bce, bce_up, hub, hub_up)]
                   + [x64.grad.numpy(), str(x64.grad.dtype).split(".")[-1]])
    assert [d for _, d in out[1][:4]] == [d for _, d in out[0][:4]]
    assert [out[1][i] for i in (0, 2, 3, 5)] == [out[0][i] for i in (0, 2, 3, 5)]
    x = np.array([0.3, -1.2, 2.7], np.float32).astype(np.float64)
    t = np.array([1.0, 0.0, 0.3], np.float32).astype(np.float64)
    exact = np.mean((1 - t) * x + np.log1p(np.exp(-x)))
    assert out[1][1][0] == pytest.approx(exact, rel=1e-15)
    np.testing.assert_allclose(out[1][4], out[0][4], rtol=1e-6)   # (a float32 loss's gradient)


AA_CALLS = [  # (input (H, W), interpolate keywords)
    ((17, 23), {"size": (5, 7)}),
    ((8, 8), {"size": (3, 5)}),
    ((5, 5), {"size": (12, 9)}),
    ((20, 27), {"scale_factor": 0.37}),
    ((20, 27), {"scale_factor": 0.37, "recompute_scale_factor": True}),
    ((6, 9), {"scale_factor": (1.7, 0.45)}),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("align_corners", [None, False, True])
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("call", AA_CALLS, ids=[f"{c[0]}-{c[1]}" for c in AA_CALLS])
def test_interpolate_antialias_vs_torch(call, mode, align_corners, dtype):
    import ember.nn.functional as F
    shape, kw = call
    x = np.random.default_rng(3).standard_normal((2, 3) + shape).astype(dtype)
    tol = dict(rtol=1e-5, atol=2e-6) if dtype == "float32" else dict(rtol=1e-12, atol=1e-12)
    xe = ember.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    ye = F.interpolate(xe, mode=mode, align_corners=align_corners, antialias=True, **kw)
    yt = torch.nn.functional.interpolate(xt, mode=mode, align_corners=align_corners,
                                         antialias=True, **kw)
    assert ye.dtype == getattr(ember, dtype) and tuple(ye.shape) == tuple(yt.shape)
    np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), **tol)
    g = np.random.default_rng(4).standard_normal(tuple(yt.shape)).astype(dtype)
    ye.backward(ember.tensor(g))
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), **tol)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_interpolate_antialias_on_a_non_contiguous_input(mode):
    import ember.nn.functional as F
    x = np.random.default_rng(5).standard_normal((3, 2, 23, 17)).astype(np.float32)
    xe = ember.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    ye = F.interpolate(xe.permute(1, 0, 3, 2)[:, :, ::2], size=(5, 4), mode=mode, antialias=True)
    yt = torch.nn.functional.interpolate(xt.permute(1, 0, 3, 2)[:, :, ::2], size=(5, 4),
                                         mode=mode, antialias=True)
    np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), rtol=1e-5, atol=2e-6)
    ye.sum().backward()
    yt.sum().backward()
    np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("mode, align_corners, kw", [
    ("bilinear", False, {"size": (3, 4)}),
    ("bicubic", True, {"size": (3, 4)}),
    ("bicubic", False, {"size": (9, 5)}),
    ("bilinear", True, {"scale_factor": 0.37}),
])
def test_interpolate_antialias_gradcheck(mode, align_corners, kw):
    import ember.nn.functional as F
    from ember.autograd import gradcheck
    x = ember.tensor(np.random.default_rng(6).standard_normal((1, 2, 8, 11)), requires_grad=True)
    assert gradcheck(lambda t: F.interpolate(t, mode=mode, align_corners=align_corners,
                                             antialias=True, **kw), (x,))


def test_interpolate_antialias_errors():
    import ember.nn.functional as F
    with pytest.raises(ValueError, match="anti-alias option is restricted to bilinear and bicubic"):
        F.interpolate(ember.ones(1, 1, 4, 4), scale_factor=2, mode="nearest", antialias=True)
    with pytest.raises(ValueError, match="anti-alias"):
        F.interpolate(ember.ones(1, 1, 4), scale_factor=2, mode="linear", antialias=True)
    with pytest.raises(RuntimeError, match="'linear' needs a floating-point input, got uint8"):
        F.interpolate(ember.ones(1, 1, 4, 4, dtype=ember.uint8), size=(2, 2), mode="bilinear",
                      antialias=True)


@pytest.mark.parametrize("need_weights", [False, True])
def test_attention_of_a_query_that_sees_no_key_as_torch(need_weights):
    """MultiheadAttention's slow path (training): with need_weights=False torch attends through
    scaled_dot_product_attention, whose softmax gives a fully masked query zeros; with weights
    the explicit softmax gives NaN. Outputs and input gradients compared with torch."""
    torch = pytest.importorskip("torch")
    q = np.random.default_rng(0).standard_normal((2, 3, 4))
    out = []
    for m in (torch, ember):
        mha = m.nn.MultiheadAttention(4, 2, batch_first=True).double()
        with m.no_grad():
            for p in mha.parameters():
                p.copy_(m.tensor(np.linspace(-1, 1, p.numel()).reshape(p.shape)))
        x = m.tensor(q, requires_grad=True)
        kpm = m.tensor([[True, True, True], [False, True, False]])
        o, w = mha(x, x, x, key_padding_mask=kpm, need_weights=need_weights)
        if not need_weights:
            o.sum().backward()
        out.append((o.detach().numpy(), None if w is None else w.detach().numpy(),
                    None if x.grad is None else x.grad.numpy()))
    for a, b in zip(out[1], out[0]):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)   # (NaN where torch's)


@pytest.mark.parametrize("call, text", [
    (lambda F, x: F.upsample(x, scale_factor=2), "`nn.functional.upsample` is deprecated"),
    (lambda F, x: F.upsample_nearest(x, scale_factor=2), "upsample_nearest` is deprecated"),
    (lambda F, x: F.upsample_bilinear(x, scale_factor=2), "upsample_bilinear` is deprecated"),
    (lambda F, x: F.log_softmax(x), "Implicit dimension choice for log_softmax"),
    (lambda F, x: F.softmin(x), "Implicit dimension choice for softmin"),
    (lambda F, x: F.softmax(x), "Implicit dimension choice for softmax")])
def test_deprecations_warn_as_torch_at_the_callers_line(call, text):
    import warnings
    torch = pytest.importorskip("torch")
    for m in (torch, ember):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            call(m.nn.functional, m.ones(1, 1, 2, 2))
        assert [text in str(w.message) for w in seen] == [True], m.__name__
        assert seen[0].filename == __file__, (m.__name__, seen[0].filename)


def test_one_hot_checks_as_torch():
    """Only int64 indices; a negative class, a class not below num_classes and an empty tensor
    with num_classes=-1 raise torch's messages."""
    F = ember.nn.functional
    assert F.one_hot(ember.tensor([[0, 3], [2, 1]])).shape == (2, 2, 4)
    assert F.one_hot(ember.tensor([], dtype=ember.long), 3).shape == (0, 3)
    for bad, n, msg in [(ember.tensor([0, 1], dtype=ember.int32), 3, "only applicable to index "
                         "tensor of type LongTensor"),
                        (ember.tensor([0, -1]), 3, "Class values must be non-negative"),
                        (ember.tensor([0, -1]), -1, "Class values must be non-negative"),
                        (ember.tensor([0, 3]), 2, "Class values must be smaller than num_classes"),
                        (ember.tensor([], dtype=ember.long), -1,
                         "Can not infer total number of classes from empty tensor")]:
        with pytest.raises(RuntimeError, match=msg):
            F.one_hot(bad, n)
        with pytest.raises(RuntimeError, match=msg):
            torch.nn.functional.one_hot(torch.from_numpy(bad.numpy()), n)


@pytest.mark.parametrize("shape,n", [((32, 64), 1000), ((), 5), ((7,), 7), ((2, 0), 3)])
def test_one_hot_eager_and_traced_forms_equal_torchs(shape, n):
    """Eager writes ones into zeros; a trace records the shape-free comparison: both give
    torch's int64 one-hot, the traced one also at another batch size."""
    F = ember.nn.functional
    r = np.random.default_rng(0)
    idx = r.integers(0, n, shape)
    want = torch.nn.functional.one_hot(torch.from_numpy(np.asarray(idx)), n).numpy()
    got = F.one_hot(ember.tensor(idx), n)
    assert got.dtype == ember.int64 and not got.requires_grad
    np.testing.assert_array_equal(got.numpy(), want)
    if len(shape) == 2 and shape[1]:
        traced = ember.jit.trace(lambda t: F.one_hot(t, n), (ember.tensor(idx),))
        np.testing.assert_array_equal(traced(ember.tensor(idx)).numpy(), want)
        other = r.integers(0, n, (3, shape[1]))
        np.testing.assert_array_equal(
            traced(ember.tensor(other)).numpy(),
            torch.nn.functional.one_hot(torch.from_numpy(other), n).numpy())


@pytest.mark.parametrize("low", ["bfloat16", "float16"])
def test_norm_layers_keep_a_reduced_input_dtype_with_float32_parameters(low):
    """torch's CPU batch/layer/group/instance norm take a float16/bfloat16 input with float32
    weights and statistics ("mixed dtype") and return the input's dtype, computed in float32
    and rounded once: Linear -> BatchNorm1d inside a bfloat16 autocast region stays bfloat16."""
    x = np.random.default_rng(3).standard_normal((6, 4)).astype(np.float32)

    def run(m):
        rng = np.random.default_rng(4)
        dt = getattr(m, low)
        m.manual_seed(0)
        out = {}
        for name, mod, inp in (("bn", m.nn.BatchNorm1d(4), x), ("ln", m.nn.LayerNorm(4), x),
                               ("gn", m.nn.GroupNorm(2, 4), x),
                               ("in", m.nn.InstanceNorm1d(4, affine=True, track_running_stats=True),
                                np.repeat(x[:, :, None], 3, 2))):
            with m.no_grad():
                for p in mod.parameters():
                    p.copy_(m.from_numpy(rng.standard_normal(tuple(p.shape)).astype(np.float32)))
            t = m.from_numpy(inp).to(dt).requires_grad_()
            y = mod(t)
            c = np.linspace(-1.0, 2.0, y.numel(), dtype=np.float32).reshape(tuple(y.shape))
            (y.float() * m.from_numpy(c)).sum().backward()
            out[name] = (str(y.dtype).split(".")[1], y.float().detach().numpy(),
                         str(t.grad.dtype).split(".")[1], t.grad.float().numpy(),
                         [str(p.grad.dtype).split(".")[1] for p in mod.parameters()])
            if name == "bn":
                out["stats"] = (str(mod.running_mean.dtype), mod.running_mean.numpy().copy())
                mod.eval()
                out["bn_eval"] = str(mod(t).dtype).split(".")[1]
        with m.autocast(device_type="cpu", dtype=m.bfloat16):
            lin = m.nn.Linear(4, 4)
            out["autocast"] = str(m.nn.BatchNorm1d(4)(lin(m.from_numpy(x))).dtype).split(".")[1]
        return out

    ours, theirs = run(ember), run(torch)
    assert ours["autocast"] == theirs["autocast"] == "bfloat16"
    assert ours["bn_eval"] == theirs["bn_eval"] == low
    np.testing.assert_allclose(ours["stats"][1], theirs["stats"][1], rtol=1e-6)
    for name in ("bn", "ln", "gn", "in"):
        a, b = ours[name], theirs[name]
        assert (a[0], a[2], a[4]) == (b[0], b[2], b[4]) == (low, low, ["float32", "float32"])
        np.testing.assert_allclose(a[1], b[1], rtol=1e-2, atol=1e-2)
        np.testing.assert_allclose(a[3], b[3], rtol=5e-2, atol=5e-2)


def test_sdpa_refuses_mixed_dtypes_as_torch():
    """A float64 key with float32 queries, or an integer mask (a padding mask left as 0/1
    longs), raises torch's RuntimeError instead of computing."""
    F = ember.nn.functional
    q, k = ember.randn(1, 2, 3, 4), ember.randn(1, 2, 5, 4)
    with pytest.raises(RuntimeError, match="Expected query, key, and value to have the same dtype"):
        F.scaled_dot_product_attention(q, k.double(), k)
    with pytest.raises(RuntimeError, match="Expected attn_mask dtype to be bool or float"):
        F.scaled_dot_product_attention(q, k, k, attn_mask=ember.ones(3, 5, dtype=ember.int64))
    out = F.scaled_dot_product_attention(q.double(), k.double(), k.double(),
                                         attn_mask=ember.zeros(3, 5))   # float32 mask: allowed
    assert out.dtype == ember.float64


def test_instance_norm_needs_more_than_one_spatial_element_when_using_input_stats():
    """PyTorch-GAN's pixelda.py at --img_size 16 brings InstanceNorm2d a (16, 512, 1, 1) input:
    torch raises ValueError there (nothing to normalise over), and so does ember; the module in
    eval mode with running statistics, and two spatial elements, work on both."""
    x = np.random.default_rng(0).normal(size=(4, 3, 1, 1)).astype(np.float32)
    for L in (torch, ember):
        with pytest.raises(ValueError, match="Expected more than 1 spatial element when training"):
            L.nn.InstanceNorm2d(3)(L.tensor(x))
        with pytest.raises(ValueError, match="Expected more than 1 spatial element when training"):
            L.nn.functional.instance_norm(L.tensor(x[..., 0]))
        m = L.nn.InstanceNorm2d(3, track_running_stats=True).eval()
        assert tuple(m(L.tensor(x)).shape) == (4, 3, 1, 1)
    two = np.concatenate([x, 2 * x], axis=3)
    assert_close(ember.nn.functional.instance_norm(ember.tensor(two)),
                 torch.nn.functional.instance_norm(torch.tensor(two)))


@pytest.mark.parametrize("low", ["bfloat16", "float16"])
def test_group_norm_of_a_reduced_input_with_float32_parameters_computes_in_float32(low):
    """A bfloat16 / float16 input with float32 weight and bias: torch's kernel computes the
    statistics and the gradient in float32 and rounds once. (ember's composite normalised the
    reduced input itself: a gradient of -0.002 came out as 0.005.)"""
    x = np.random.default_rng(3).standard_normal((6, 4)).astype(np.float32)
    c = np.linspace(-1.0, 2.0, 24, dtype=np.float32).reshape(6, 4)
    w = np.array([0.5, -1.2, 0.8, 1.5], np.float32)
    b = np.array([0.1, 0.2, -0.3, 0.4], np.float32)

    def run(m):
        t = m.from_numpy(x).to(getattr(m, low)).requires_grad_()
        y = m.nn.functional.group_norm(t, 2, m.from_numpy(w), m.from_numpy(b), 1e-5)
        (y.float() * m.from_numpy(c)).sum().backward()
        return str(y.dtype).split(".")[1], y.float().detach().numpy(), t.grad.float().numpy()
    (d1, y1, g1), (d2, y2, g2) = run(ember), run(torch)
    assert d1 == d2 == low
    np.testing.assert_allclose(y1, y2, rtol=1e-2, atol=1e-2)
    np.testing.assert_allclose(g1, g2, rtol=1e-2, atol=1e-4)
