"""``ember.nn.modules.module.tree_epoch``, the module-tree change counter that ember.compile's
module guard trusts between checks: every change of what that guard reads advances it; a
forward, attribute reads and traversals do not."""
from collections import OrderedDict

import pytest

import ember
import ember.nn as nn
from ember.nn.modules import module as module_mod


def _epoch():
    return module_mod.tree_epoch


def _model():
    m = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3), nn.Linear(3, 2))
    m[0].register_buffer("extra", ember.zeros(3))
    return m


def _p():
    return nn.Parameter(ember.zeros(3))


def _hook(mod, args, out):
    return None


def _registered_then_removed(m):
    h = m[0].register_forward_hook(_hook)
    before = _epoch()
    h.remove()
    return before


CHANGES = {
    # parameters
    "parameters-setitem": lambda m: m[0]._parameters.__setitem__("w2", _p()),
    "parameters-delitem": lambda m: m[0]._parameters.__delitem__("bias"),
    "parameters-pop": lambda m: m[0]._parameters.pop("bias"),
    "parameters-popitem": lambda m: m[0]._parameters.popitem(),
    "parameters-clear": lambda m: m[0]._parameters.clear(),
    "parameters-update": lambda m: m[0]._parameters.update(bias=_p()),
    "parameters-setdefault": lambda m: m[0]._parameters.setdefault("w2", _p()),
    "parameters-move_to_end": lambda m: m[0]._parameters.move_to_end("weight"),
    "parameters-ior": lambda m: m[0]._parameters.__ior__({"w2": _p()}),
    "register_parameter": lambda m: m[0].register_parameter("w2", _p()),
    "setattr-parameter": lambda m: setattr(m[0], "bias", _p()),
    "setattr-parameter-none": lambda m: setattr(m[0], "bias", None),
    "delattr-parameter": lambda m: delattr(m[0], "bias"),
    # buffers
    "buffers-setitem": lambda m: m[0]._buffers.__setitem__("extra", ember.ones(3)),
    "buffers-pop": lambda m: m[0]._buffers.pop("extra"),
    "register_buffer": lambda m: m[0].register_buffer("b2", ember.ones(3)),
    "setattr-buffer": lambda m: setattr(m[0], "extra", ember.ones(3)),
    # children
    "modules-setitem": lambda m: m._modules.__setitem__("1", nn.Identity()),
    "modules-delitem": lambda m: m._modules.__delitem__("1"),
    "modules-move_to_end": lambda m: m._modules.move_to_end("0"),
    "add_module": lambda m: m.add_module("3", nn.ReLU()),
    "setattr-module": lambda m: setattr(m, "1", nn.Identity()),
    "sequential-insert": lambda m: m.insert(0, nn.ReLU()),
    "sequential-delitem": lambda m: m.__delitem__(0),
    "sequential-append": lambda m: m.append(nn.ReLU()),
    # training flag
    "train": lambda m: m.train(),
    "eval": lambda m: m.eval(),
    "setattr-training": lambda m: setattr(m[1], "training", False),
    # hooks
    "register_forward_hook": lambda m: m[0].register_forward_hook(_hook),
    "register_forward_pre_hook": lambda m: m[0].register_forward_pre_hook(
        lambda mod, a: None),
    "register_full_backward_hook": lambda m: m[0].register_full_backward_hook(
        lambda mod, gi, go: None),
    "register_full_backward_pre_hook": lambda m: m[0].register_full_backward_pre_hook(
        lambda mod, go: None),
    "hook-dict-setitem": lambda m: m[0]._forward_hooks.__setitem__(7, _hook),
    "hook-dict-replaced": lambda m: setattr(m[0], "_forward_hooks", OrderedDict()),
    # the module's own fields
    "setattr-class": lambda m: setattr(m[0], "__class__", nn.LazyLinear.cls_to_become),
    "setattr-dict": lambda m: setattr(m[0], "__dict__", dict(m[0].__dict__)),
    "dict-setitem-training": lambda m: m[0].__dict__.__setitem__("training", False),
    "dict-setitem-modules": lambda m: m.__dict__.__setitem__("_modules", OrderedDict()),
    "dict-delitem": lambda m: m[0].__dict__.__delitem__("_backward_hooks"),
    "dict-pop": lambda m: m[0].__dict__.pop("_backward_hooks"),
    "dict-popitem": lambda m: m[0].__dict__.popitem(),
    "dict-clear": lambda m: m[0].__dict__.clear(),
    "dict-update": lambda m: m[0].__dict__.update(training=False),
    "dict-setdefault": lambda m: m[0].__dict__.setdefault("training", False),
    "dict-ior": lambda m: m[0].__dict__.__ior__({"training": False}),
    "delattr-plain": lambda m: delattr(m[0], "training"),
    "setstate": lambda m: m[0].__setstate__({"training": False}),
    "init-again": lambda m: nn.Module.__init__(m[0]),
}


@pytest.mark.parametrize("change", list(CHANGES.values()), ids=list(CHANGES))
def test_change_advances_the_counter(change):
    m = _model()
    before = _epoch()
    change(m)
    assert _epoch() > before


def test_hook_removal_advances_the_counter():
    m = _model()
    before = _registered_then_removed(m)
    assert _epoch() > before


@pytest.mark.parametrize("register", [
    module_mod.register_module_forward_pre_hook,
    module_mod.register_module_forward_hook,
    module_mod.register_module_full_backward_pre_hook,
    module_mod.register_module_full_backward_hook,
], ids=["forward_pre", "forward", "backward_pre", "backward"])
def test_global_hooks_advance_the_counter(register):
    before = _epoch()
    h = register(lambda *a: None)
    try:
        assert _epoch() > before
    finally:
        between = _epoch()
        h.remove()
    assert _epoch() > between


def test_reads_and_forward_leave_the_counter():
    """What a training or inference loop does to a module between compiled calls without
    changing its tree: calls (batch norm's running statistics updated), an optimizer step,
    in-place writes into parameters and buffers, attribute reads, traversals, state_dict."""
    m = _model().train()
    opt = ember.optim.SGD(m.parameters(), lr=0.1)
    x = ember.randn(4, 3)

    def step():
        opt.zero_grad()
        m(x).sum().backward()
        opt.step()
        with ember.no_grad():
            m[0].weight.mul_(0.5)
            m[0].extra.add_(1.0)
            m(x)
    step()
    before = _epoch()
    step()
    _ = (m[0].weight, m[1].running_mean, m[0].training, list(m.parameters()),
         list(m.named_modules()), m.state_dict(), repr(m), m[0].extra)
    assert _epoch() == before


def test_modules_carry_the_counting_dicts():
    m = _model()
    for mod in m.modules():
        d = mod.__dict__
        assert type(d) is module_mod._ModuleAttrs
        for field in ("_parameters", "_buffers", "_modules", "_forward_hooks",
                      "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks"):
            assert type(d[field]) is module_mod._TrackedDict
    # attributes a subclass sets before Module.__init__ are kept
    rnn = nn.RNN(3, 4, nonlinearity="relu")
    assert rnn.nonlinearity == "relu" and type(rnn.__dict__) is module_mod._ModuleAttrs


# ---- Module.__call__ trusts "no hooks" while the counter stands still ------------------------
def _doubling(mod, args, out):
    return out * 2.0


@pytest.mark.parametrize("add", [
    lambda m: m.register_forward_hook(_doubling),
    lambda m: m.register_forward_pre_hook(lambda mod, a: (a[0] * 2.0,)),
    lambda m: m._forward_hooks.__setitem__(99, _doubling),
    lambda m: m._forward_hooks.update({99: _doubling}),
    lambda m: module_mod.register_module_forward_hook(_doubling),
], ids=["register_forward_hook", "register_forward_pre_hook", "dict-setitem", "dict-update",
        "global"])
def test_hook_added_after_calls_runs(add):
    m = nn.Linear(3, 3, bias=False)
    x = ember.randn(2, 3)
    want = m(x).detach().numpy() * 2.0
    m(x)   # "no hooks" remembered
    h = add(m)
    try:
        assert (m(x).detach().numpy() == want).all()
    finally:
        if h is not None:
            h.remove()
        m._forward_hooks.pop(99, None)
    assert (m(x).detach().numpy() * 2.0 == want).all()


def test_hooks_in_an_uncounted_dict_run():
    """A plain dict assigned as a hook dict is not counted: the module then reads its hook
    dicts at every call, and a hook written into that dict later runs."""
    m = nn.Linear(3, 3)
    x = ember.randn(2, 3)
    want = m(x).detach().numpy() * 2.0
    hooks = OrderedDict()
    m._forward_hooks = hooks
    m(x)
    hooks[99] = _doubling
    assert (m(x).detach().numpy() == want).all()
