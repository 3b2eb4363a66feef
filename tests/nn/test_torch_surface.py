"""The nn surface torch programs reach: torch's module paths and every module hook."""
import importlib
import warnings

import numpy as np
import pytest

import ember
import ember.nn as nn

torch = pytest.importorskip("torch")


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


