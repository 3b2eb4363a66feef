"""Module system: registration, traversal, modes, state dicts, hooks, repr, to(), containers."""
import copy

import numpy as np
import pytest

import ember
import ember.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.ReLU())
        self.head = nn.Linear(8, 3)
        self.register_buffer("scale", ember.ones(1))
        self.register_buffer("cache", ember.zeros(2), persistent=False)
        self.extra = nn.Parameter(ember.zeros(2))

    def forward(self, x):
        return self.head(self.features(x).flatten(1)[:, :8]) * self.scale


def test_registration_and_traversal():
    m = Net()
    names = [n for n, _ in m.named_parameters()]
    assert names == ["extra", "features.0.weight", "features.0.bias", "features.1.weight",
                     "features.1.bias", "head.weight", "head.bias"]
    assert [n for n, _ in m.named_buffers()] == [
        "scale", "cache", "features.1.running_mean", "features.1.running_var",
        "features.1.num_batches_tracked"]
    assert [n for n, _ in m.named_modules()] == ["", "features", "features.0", "features.1",
                                                 "features.2", "head"]
    assert [n for n, _ in m.named_children()] == ["features", "head"]
    assert list(m.state_dict()) == [
        "extra", "scale", "features.0.weight", "features.0.bias", "features.1.weight",
        "features.1.bias", "features.1.running_mean", "features.1.running_var",
        "features.1.num_batches_tracked", "head.weight", "head.bias"]
    assert m.get_submodule("features.1") is m.features[1]
    with pytest.raises(AttributeError, match=r"^Sequential has no attribute `7`$"):
        m.get_submodule("features.7")          # torch's messages, which LoRA injectors match
    with pytest.raises(AttributeError, match=r"^`weight` is not an nn.Module$"):
        m.get_submodule("head.weight")
    assert m.get_parameter("head.bias") is m.head.bias
    shared = nn.Linear(2, 2)
    s = nn.Sequential(shared, shared)
    assert len(list(s.parameters())) == 2


def test_setattr_rules():
    m = nn.Module()
    m.p = nn.Parameter(ember.zeros(2))
    assert "p" in m._parameters
    with pytest.raises(TypeError):
        m.p = ember.zeros(2)
    m.p = None
    assert m.p is None
    m.sub = nn.Linear(2, 2)
    assert "sub" in m._modules
    del m.sub
    assert not hasattr(m, "sub")
    with pytest.raises(AttributeError):
        m.missing


def test_train_eval_and_requires_grad():
    m = Net()
    m.eval()
    assert not m.training and not m.features[1].training
    m.train()
    assert m.features[0].training
    m.requires_grad_(False)
    assert not any(p.requires_grad for p in m.parameters())


def test_zero_grad_and_apply():
    m = Net()
    m(ember.randn(2, 1, 4, 4)).sum().backward()
    assert m.head.weight.grad is not None
    m.zero_grad(set_to_none=False)
    assert float(m.head.weight.grad.abs().sum()) == 0.0
    m.zero_grad()
    assert m.head.weight.grad is None
    seen = []
    m.apply(lambda mod: seen.append(type(mod).__name__))
    assert seen[-1] == "Net" and "Conv2d" in seen


def test_to_dtype_keeps_parameter_identity():
    m = Net()
    w = m.head.weight
    m.double()
    assert m.head.weight is w and w.dtype == ember.float64
    assert m.features[1].num_batches_tracked.dtype == ember.int64
    m.to(ember.float32)
    assert w.dtype == ember.float32
    with pytest.raises(RuntimeError):
        m.to("cuda")


def test_state_dict_roundtrip_and_strict_errors():
    a, b = Net(), Net()
    b.load_state_dict(a.state_dict())
    for (k, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items()):
        np.testing.assert_array_equal(x.detach().numpy(), y.detach().numpy(), err_msg=k)
    sd = a.state_dict()
    before = b.head.weight.detach().numpy().copy()
    bad = dict(sd)
    bad["head.weight"] = ember.zeros(5, 5)
    bad.pop("head.bias")
    bad["bogus"] = ember.zeros(1)
    bad["features.0.weight"] = ember.zeros_like(sd["features.0.weight"]) + 7
    with pytest.raises(RuntimeError) as e:
        b.load_state_dict(bad)
    msg = str(e.value)
    assert "head.bias" in msg and "bogus" in msg and "size mismatch for head.weight" in msg
    np.testing.assert_array_equal(b.head.weight.detach().numpy(), before)
    assert float(b.features[0].weight.sum()) != float(7 * b.features[0].weight.numel())
    bad.pop("head.weight")
    res = b.load_state_dict(bad, strict=False)
    assert "head.bias" in res.missing_keys and "bogus" in res.unexpected_keys
    assert float(b.features[0].weight.mean()) == 7.0


def test_load_state_dict_result_prints_as_torch():
    """``print(model.load_state_dict(sd, strict=False))``, as checkpoint loaders write it."""
    m = nn.Linear(2, 2)
    res = m.load_state_dict(m.state_dict())
    assert repr(res) == str(res) == "<All keys matched successfully>"
    sd = m.state_dict()
    sd.pop("bias")
    sd["extra"] = ember.zeros(1)
    res = m.load_state_dict(sd, strict=False)
    assert str(res) == "_IncompatibleKeys(missing_keys=['bias'], unexpected_keys=['extra'])"
    assert res == (["bias"], ["extra"]) and res.missing_keys == ["bias"]


def test_load_state_dict_assign_takes_the_given_tensors():
    """``assign=True`` as torch: the module takes the state dict's tensors (their dtype and
    memory; a plain tensor becomes a Parameter sharing it with the old requires_grad, a
    Parameter is taken as is), buffers are the given tensors, and tied weights untie."""
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed, self.head = nn.Embedding(3, 2), nn.Linear(2, 3, bias=False)
            self.head.weight = self.embed.weight
            self.register_buffer("scale", ember.ones(2))

    m = Tied()
    m.embed.weight.requires_grad_(False)
    sd = {k: v.double().clone() for k, v in Tied().state_dict().items()}
    res = m.load_state_dict(sd, assign=True)
    assert res.missing_keys == [] and res.unexpected_keys == []
    w = m.embed.weight
    assert isinstance(w, nn.Parameter) and w.dtype == ember.float64 and not w.requires_grad
    assert w.data_ptr() == sd["embed.weight"].data_ptr() and m.scale is sd["scale"]
    assert m.head.weight is not m.embed.weight and m.head.weight.requires_grad is False
    assert [n for n, _ in m.named_parameters()] == ["embed.weight", "head.weight"]
    p = nn.Parameter(ember.ones(3, 2))
    m2 = Tied()
    m2.load_state_dict({"embed.weight": p}, strict=False, assign=True)
    assert m2.embed.weight is p and m2.head.weight is not p


def test_state_dict_is_detached_and_shares_memory():
    m = nn.Linear(2, 2)
    sd = m.state_dict()
    assert not sd["weight"].requires_grad
    with ember.no_grad():
        m.weight.fill_(3.0)
    assert float(sd["weight"].sum()) == 12.0


def test_hooks():
    m = nn.Linear(3, 2)
    calls = []
    h1 = m.register_forward_pre_hook(lambda mod, args: (args[0] * 0,))
    h2 = m.register_forward_hook(lambda mod, args, out: calls.append(out.shape) or out + 1)
    y = m(ember.randn(4, 3))
    np.testing.assert_allclose(y.detach().numpy(), (m.bias.detach() + 1).detach().numpy()[None]
                               .repeat(4, 0), rtol=1e-6)
    assert calls == [ember.Size([4, 2])]
    h1.remove()
    h2.remove()
    m(ember.randn(1, 3))
    assert len(calls) == 1


def test_repr_like_torch():
    torch = pytest.importorskip("torch")
    src = ("nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(inplace=True), "
           "nn.MaxPool2d(2), nn.BatchNorm2d(6), nn.Flatten(), nn.Linear(10, 3, bias=False), "
           "nn.Dropout(0.25), nn.LSTM(3, 4, num_layers=2), nn.Embedding(5, 2, padding_idx=0), "
           "nn.LayerNorm(4), nn.GELU(), nn.LeakyReLU(0.2), nn.Softmax(dim=1))")
    assert repr(eval(src, {"nn": nn})) == repr(eval(src, {"nn": torch.nn}))


def test_containers():
    ml = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    ml.append(nn.ReLU())
    assert len(ml) == 4 and isinstance(ml[-1], nn.ReLU)
    assert [n for n, _ in ml.named_parameters()][:2] == ["0.weight", "0.bias"]
    md = nn.ModuleDict({"a": nn.Linear(1, 1), "b": nn.ReLU()})
    assert list(md.keys()) == ["a", "b"] and "a.weight" in md.state_dict()
    pl = nn.ParameterList([nn.Parameter(ember.zeros(2)), ember.ones(3)])
    assert [tuple(p.shape) for p in pl] == [(2,), (3,)] and len(list(pl.parameters())) == 2
    seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    assert isinstance(seq[1:], nn.Sequential) and len(seq[1:]) == 2
    assert seq(ember.randn(4, 2)).shape == (4, 1)
    c = copy.deepcopy(seq)
    assert c[0].weight is not seq[0].weight
    np.testing.assert_array_equal(c[0].weight.detach().numpy(), seq[0].weight.detach().numpy())
    assert isinstance(c[0].weight, nn.Parameter)


def test_parameter_basics():
    p = nn.Parameter(ember.ones(2, 2))
    assert p.requires_grad and isinstance(p, ember.Tensor)
    assert "Parameter containing" in repr(p)
    assert not isinstance(p * 2, nn.Parameter)
    q = nn.Parameter(ember.ones(2), requires_grad=False)
    assert not q.requires_grad


def test_batchnorm_eval_uses_running_stats():
    bn = nn.BatchNorm1d(3)
    x = ember.randn(16, 3) * 2 + 5
    bn(x)
    assert int(bn.num_batches_tracked) == 1
    np.testing.assert_allclose(bn.running_mean.numpy(), 0.1 * x.numpy().mean(0), rtol=1e-5)
    bn.eval()
    y = bn(x)
    expect = (x.numpy() - bn.running_mean.numpy()) / np.sqrt(bn.running_var.numpy() + 1e-5)
    np.testing.assert_allclose(y.detach().numpy(), expect, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError):
        nn.BatchNorm1d(3)(ember.randn(1, 3))


def test_embedding_from_pretrained_and_padding_grad():
    w = ember.randn(5, 3)
    e = nn.Embedding.from_pretrained(w)
    assert not e.weight.requires_grad
    e2 = nn.Embedding(5, 3, padding_idx=1)
    assert float(e2.weight[1].abs().sum()) == 0
    e2(ember.tensor([1, 2, 1])).sum().backward()
    assert float(e2.weight.grad[1].abs().sum()) == 0
    assert float(e2.weight.grad[2].sum()) == 3.0


def test_double_backward_through_conv_and_bn():
    x = ember.randn(2, 2, 5, 5, dtype=ember.float64, requires_grad=True)
    m = nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3), nn.Tanh(), nn.MaxPool2d(2)).double()
    y = m(x).pow(2).sum()
    (g,) = ember.autograd.grad(y, [x], create_graph=True)
    g.pow(2).sum().backward()
    assert m[0].weight.grad is not None and float(m[0].weight.grad.abs().sum()) > 0


def test_repr_many_layers_like_torch():
    torch = pytest.importorskip("torch")
    for src in ["nn.BatchNorm2d(6, bias=False)", "nn.LayerNorm(4)", "nn.GroupNorm(2, 4)",
                "nn.InstanceNorm2d(3)", "nn.AvgPool2d(2)", "nn.Upsample(scale_factor=2)",
                "nn.ConvTranspose2d(2, 3, 3, stride=2, output_padding=1)", "nn.Conv1d(2, 3, 3)",
                "nn.PReLU()", "nn.Hardtanh()", "nn.ELU()", "nn.Softplus()", "nn.Identity()",
                "nn.Dropout()", "nn.Bilinear(2, 3, 4)", "nn.PixelShuffle(2)",
                "nn.AdaptiveAvgPool2d(1)", "nn.Threshold(0.1, 2.0)", "nn.CrossEntropyLoss()",
                "nn.MultiheadAttention(4, 2)", "nn.GRU(3, 4, batch_first=True)",
                "nn.LSTMCell(2, 3)", "nn.Conv2d(2, 4, 3, padding='same', groups=2, bias=False)"]:
        assert repr(eval(src, {"nn": nn})) == repr(eval(src, {"nn": torch.nn})), src
