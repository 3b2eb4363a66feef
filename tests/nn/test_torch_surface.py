"""The nn surface torch programs reach: nn.Transformer and its decoder,
MultiheadAttention laid out as torch's, torch's module paths, DataParallel on the CPU, every
module hook, module surgery on containers."""
import importlib
import warnings

import numpy as np
import pytest

import ember
import ember.nn as nn

torch = pytest.importorskip("torch")


def _load_from_torch(em, tm):
    tsd, esd = tm.state_dict(), em.state_dict()
    assert list(tsd) == list(esd)
    assert all(tuple(tsd[k].shape) == tuple(esd[k].shape) for k in tsd)
    em.load_state_dict({k: v.numpy() for k, v in tsd.items()})


@pytest.mark.parametrize("extra", [{}, {"batch_first": True, "norm_first": True,
                                        "activation": "gelu"}])
def test_transformer_matches_torch_forward_and_backward(extra):
    torch.manual_seed(0)
    kw = dict(d_model=16, nhead=4, num_encoder_layers=2, num_decoder_layers=2,
              dim_feedforward=32, dropout=0.0, **extra)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tm = torch.nn.Transformer(**kw)
    em = nn.Transformer(**kw)
    _load_from_torch(em, tm)
    rs = np.random.RandomState(1)
    S, T, N = 5, 4, 3
    shape = (lambda L: (N, L, 16)) if extra else (lambda L: (L, N, 16))
    src, tgt = rs.randn(*shape(S)).astype("float32"), rs.randn(*shape(T)).astype("float32")
    mask = nn.Transformer.generate_square_subsequent_mask(T)
    np.testing.assert_array_equal(
        mask.numpy(), torch.nn.Transformer.generate_square_subsequent_mask(T).numpy())
    kpm = np.zeros((N, S), bool)
    kpm[0, -2:] = True
    ts, tt = (torch.tensor(a, requires_grad=True) for a in (src, tgt))
    es, et = (ember.tensor(a, requires_grad=True) for a in (src, tgt))
    to = tm(ts, tt, tgt_mask=torch.tensor(mask.numpy()), src_key_padding_mask=torch.tensor(kpm),
            memory_key_padding_mask=torch.tensor(kpm))
    eo = em(es, et, tgt_mask=mask, src_key_padding_mask=ember.tensor(kpm),
            memory_key_padding_mask=ember.tensor(kpm))
    np.testing.assert_allclose(eo.detach().numpy(), to.detach().numpy(), atol=1e-5)
    (to ** 2).sum().backward()
    (eo ** 2).sum().backward()
    for a, b in [(es, ts), (et, tt)] + list(zip(em.parameters(), tm.parameters())):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), atol=1e-4, rtol=1e-4)


def test_decoder_layer_alone_and_its_errors():
    torch.manual_seed(1)
    tl = torch.nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0)
    el = nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0)
    _load_from_torch(el, tl)
    x, mem = np.random.RandomState(2).randn(2, 3, 4, 8).astype("float32")
    np.testing.assert_allclose(el(ember.tensor(x), ember.tensor(mem)).detach().numpy(),
                               tl(torch.tensor(x), torch.tensor(mem)).detach().numpy(),
                               atol=1e-5)
    dec = nn.TransformerDecoder(el, 2, norm=nn.LayerNorm(8))
    assert list(dec.state_dict()) == list(torch.nn.TransformerDecoder(
        tl, 2, norm=torch.nn.LayerNorm(8)).state_dict())
    with pytest.raises(RuntimeError, match="d_model"):
        nn.Transformer(8, 2, 1, 1, 16)(ember.zeros(3, 2, 8), ember.zeros(3, 2, 6))


@pytest.mark.parametrize("kdim", [None, 6])
def test_multihead_attention_layout_is_torchs(kdim):
    tm = torch.nn.MultiheadAttention(8, 2, kdim=kdim, vdim=kdim, add_bias_kv=True)
    em = nn.MultiheadAttention(8, 2, kdim=kdim, vdim=kdim, add_bias_kv=True)
    _load_from_torch(em, tm)
    assert em._qkv_same_embed_dim == tm._qkv_same_embed_dim == (kdim is None)
    assert type(em.out_proj).__name__ == "NonDynamicallyQuantizableLinear"
    assert isinstance(em.out_proj, nn.modules.linear.NonDynamicallyQuantizableLinear)
    assert isinstance(em.out_proj, nn.Linear)
    q = np.random.RandomState(3).randn(4, 2, 8).astype("float32")
    kv = np.random.RandomState(4).randn(5, 2, kdim or 8).astype("float32")
    to, tw = tm(torch.tensor(q), torch.tensor(kv), torch.tensor(kv))
    eo, ew = em(ember.tensor(q), ember.tensor(kv), ember.tensor(kv))
    np.testing.assert_allclose(eo.detach().numpy(), to.detach().numpy(), atol=1e-5)
    np.testing.assert_allclose(ew.detach().numpy(), tw.detach().numpy(), atol=1e-5)


_NOT_HERE = {"SyncBatchNorm", "Container", "CrossMapLRN2d", "NLLLoss2d"}


@pytest.mark.parametrize("path", [
    "activation", "linear", "conv", "pixelshuffle", "loss", "batchnorm", "container", "module",
    "transformer", "rnn", "sparse", "dropout", "normalization", "pooling", "flatten", "padding",
    "upsampling", "instancenorm", "distance", "fold", "channelshuffle"])
def test_module_paths_hold_torchs_classes(path):
    t = importlib.import_module("torch.nn.modules." + path)
    e = importlib.import_module("ember.nn.modules." + path)
    names = [k for k, v in vars(t).items() if isinstance(v, type) and
             issubclass(v, torch.nn.Module) and v.__module__ == t.__name__ and
             not k.startswith(("_", "Lazy")) and k not in _NOT_HERE]
    assert names
    for k in names:
        cls = getattr(e, k)
        assert issubclass(cls, nn.Module) and cls.__name__ == k
    assert nn.modules.batchnorm._BatchNorm is nn.modules.normalization._BatchNorm


def test_data_parallel_runs_the_module_on_the_cpu():
    lin = nn.Linear(3, 2)
    dp = nn.parallel.DataParallel(lin, device_ids=[0])
    assert dp.module is lin and nn.DataParallel is nn.parallel.DataParallel
    assert list(dp.state_dict()) == list(torch.nn.DataParallel(torch.nn.Linear(3, 2))
                                         .state_dict()) == ["module.weight", "module.bias"]
    x = ember.randn(4, 3)
    np.testing.assert_array_equal(dp(x).detach().numpy(), lin(x).detach().numpy())
    np.testing.assert_array_equal(
        nn.parallel.data_parallel(lin, x).detach().numpy(), lin(x).detach().numpy())


def _hooked_run(lib, sd, x_requires_grad):
    m = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Tanh(), lib.nn.Linear(4, 2))
    m.load_state_dict({k: lib.tensor(v) for k, v in sd.items()})
    log = []

    def arr(g):
        return None if g is None else g.detach().numpy().copy()
    m[0].register_full_backward_hook(
        lambda mod, gi, go: log.append([arr(g) for g in gi] + [arr(go[0])]))
    m[2].register_full_backward_pre_hook(lambda mod, go: (go[0] * 2,))
    h = m[2].register_full_backward_hook(lambda mod, gi, go: log.append([arr(gi[0])]))
    x = lib.tensor(np.random.RandomState(0).randn(5, 3).astype("float32"),
                   requires_grad=x_requires_grad)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m(x).sum().backward()
        h.remove()
        m(x).sum().backward()  # the removed hook is not called
    return log + [[arr(m[0].weight.grad)]]


@pytest.mark.parametrize("x_requires_grad", [True, False])
def test_full_backward_hooks_match_torch(x_requires_grad):
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    sd = {k: v.numpy() for k, v in tm.state_dict().items()}
    a, b = _hooked_run(torch, sd, x_requires_grad), _hooked_run(ember, sd, x_requires_grad)
    assert len(a) == len(b) == 4
    for la, lb in zip(a, b):
        assert len(la) == len(lb)
        for p, q in zip(la, lb):
            assert (p is None) == (q is None)
            if p is not None:
                np.testing.assert_allclose(q, p, atol=1e-5)


def test_forward_hooks_kwargs_prepend_always_call_and_global():
    m = nn.Linear(2, 2)
    order = []
    m.register_forward_pre_hook(lambda mod, args: order.append("pre"))
    m.register_forward_pre_hook(lambda mod, args, kw: order.append("pre_first"), prepend=True,
                                with_kwargs=True)
    h = m.register_forward_hook(lambda mod, args, kw, out: out * 0, with_kwargs=True)
    g = nn.modules.module.register_module_forward_hook(lambda mod, a, out: order.append("glob"))
    try:
        assert float(m(ember.ones(1, 2)).abs().sum()) == 0.0
    finally:
        g.remove()
    assert order == ["pre_first", "pre", "glob"]
    h.remove()
    assert float(m(ember.ones(1, 2)).abs().sum()) != 0.0 and order[-1] == "pre"
    called = []
    m.register_forward_hook(lambda mod, args, out: called.append(out), always_call=True)
    with pytest.raises(RuntimeError):
        m(ember.ones(1, 3))
    assert called == [None]


def test_state_dict_hooks():
    m = nn.Linear(2, 2)
    seen = []
    m.register_state_dict_pre_hook(lambda mod, prefix, keep_vars: seen.append(("pre", prefix)))
    m.register_state_dict_post_hook(lambda mod, sd, prefix, meta: seen.append(("post", len(sd))))
    m.state_dict()
    assert seen == [("pre", ""), ("post", 2)]
    sd = {"weight": ember.zeros(2, 2)}  # bias missing
    m.register_load_state_dict_pre_hook(
        lambda mod, sd, prefix, *rest: seen.append(("load_pre", sorted(sd))))

    def forgive(mod, keys):
        keys.missing_keys.clear()
    h = m.register_load_state_dict_post_hook(forgive)
    m.load_state_dict(sd)  # strict, but the post hook cleared the missing key
    assert seen[-1] == ("load_pre", ["weight"]) and float(m.weight.abs().sum()) == 0.0
    h.remove()
    with pytest.raises(RuntimeError, match="Missing key"):
        m.load_state_dict(sd)


def test_sequential_surgery_as_torch():
    for lib in (torch.nn, nn):
        s = lib.Sequential(lib.ReLU(), lib.Tanh(), lib.Sigmoid())
        setattr(s, "1", lib.ELU())  # replaced in place, not moved to the end
        s[2] = lib.SELU()
        names = [type(m).__name__ for m in s]
        assert names == ["ReLU", "ELU", "SELU"] and list(s._modules) == ["0", "1", "2"]
        del s[0]
        s.insert(1, lib.GELU())
        s.append(lib.Tanh())
        s.extend([lib.ReLU()])
        assert [type(m).__name__ for m in s] == ["ELU", "GELU", "SELU", "Tanh", "ReLU"]
        assert list(s[1:3]._modules) == ["1", "2"] and len(s * 2) == 10
        assert type(s.pop(0)).__name__ == "ELU" and list(s._modules) == ["0", "1", "2", "3"]
        lin = lib.Linear(2, 2)
        lin.weight = lib.Parameter(lin.weight.detach() * 0)
        assert list(dict(lin.named_parameters())) == ["weight", "bias"]
        ml = lib.ModuleList([lib.ReLU(), lib.Tanh()])
        ml.insert(0, lib.ELU())
        del ml[1]
        assert [type(m).__name__ for m in ml + lib.ModuleList([lib.ReLU()])] == \
            ["ELU", "Tanh", "ReLU"]
        md = lib.ModuleDict({"a": lib.ReLU()})
        md["b"] = lib.Tanh()
        assert list(md) == ["a", "b"] and type(md.pop("a")).__name__ == "ReLU"
