"""``ember.compile``'s module-tree guard (``_ModuleTree`` in ember/compiler/frontend.py): a call
trusts the previous check while ``ember.nn.modules.module.tree_epoch`` stands still, so every
way of changing a compiled module between two calls must advance it (or be read at every call,
as parameters' ``requires_grad``). Each case changes the module after three calls (the
previous-call fast path in use) and compares the next compiled call with eager."""
import copy
from collections import OrderedDict

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.compiler.frontend import GraphBreakWarning
from ember.nn.modules import module as module_mod

f64 = ember.float64


class Scaled(nn.Module):
    """A Linear whose output is multiplied by each of its own parameters and shifted by each of
    its own buffers, whatever they are called: adding or removing one changes the result."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.scale = nn.Parameter(ember.full((4,), 2.0))
        self.register_buffer("shift", ember.full((4,), 0.5))

    def forward(self, x):
        out = self.lin(x)
        for p in self._parameters.values():
            if p is not None:
                out = out * p
        for b in self._buffers.values():
            if b is not None:
                out = out + b
        return out


class Doubled(Scaled):
    def forward(self, x):
        return super().forward(x) * 2.0


def _seq():
    return nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Linear(4, 4), Scaled())


def _after(change, grad=False, model=None, x=None, warn=False):
    """Compile ``model`` (default ``_seq()``, float64, eval), call it three times, apply
    ``change(model)``, and compare the next compiled call with eager."""
    ember.manual_seed(0)
    m = (model or _seq()).double().eval()
    x = ember.randn(5, 4, dtype=f64) if x is None else x
    compiled = ember.compile(m)
    ctx = ember.enable_grad if grad else ember.no_grad
    with ctx():
        for _ in range(3):
            compiled(x)
        assert compiled._compiled._hit is not None
        change(m)
        if warn:
            with pytest.warns(GraphBreakWarning):
                got = compiled(x)
        else:
            got = compiled(x)
        want = m(x)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=0,
                                   atol=1e-12)
        # and the call after it (its own previous-call guards) agrees too
        np.testing.assert_allclose(compiled(x).detach().numpy(), m(x).detach().numpy(), rtol=0,
                                   atol=1e-12)
    return compiled, m


def _param(value=3.0):
    return nn.Parameter(ember.full((4,), value, dtype=f64))


def _buf(value=1.5):
    return ember.full((4,), value, dtype=f64)


# ---- every mutator of the parameter, buffer and child dicts --------------------------------
@pytest.mark.parametrize("change", [
    lambda m: m[3]._parameters.__setitem__("extra", _param()),
    lambda m: m[3]._parameters.__delitem__("scale"),
    lambda m: m[3]._parameters.pop("scale"),
    lambda m: m[3]._parameters.popitem(),
    lambda m: m[3]._parameters.clear(),
    lambda m: m[3]._parameters.update(scale=_param()),
    lambda m: m[3]._parameters.setdefault("extra", _param()),
    lambda m: m[3]._parameters.__ior__({"extra": _param()}),
    lambda m: m[3].register_parameter("extra", _param()),
    lambda m: setattr(m[3], "scale", _param()),
    lambda m: delattr(m[3], "scale"),
], ids=["setitem", "delitem", "pop", "popitem", "clear", "update", "setdefault", "ior",
        "register_parameter", "setattr", "delattr"])
def test_parameter_dict_changes(change):
    _after(change)


@pytest.mark.parametrize("change", [
    lambda m: m[3]._buffers.__setitem__("extra", _buf()),
    lambda m: m[3]._buffers.__delitem__("shift"),
    lambda m: m[3]._buffers.pop("shift"),
    lambda m: m[3]._buffers.popitem(),
    lambda m: m[3]._buffers.clear(),
    lambda m: m[3]._buffers.update(shift=_buf()),
    lambda m: m[3]._buffers.setdefault("extra", _buf()),
    lambda m: m[3].register_buffer("extra", _buf()),
    lambda m: setattr(m[3], "shift", _buf()),
], ids=["setitem", "delitem", "pop", "popitem", "clear", "update", "setdefault",
        "register_buffer", "setattr"])
def test_buffer_dict_changes(change):
    _after(change)


@pytest.mark.parametrize("change", [
    lambda m: m._modules.__setitem__("2", nn.Linear(4, 4).double()),
    lambda m: m._modules.__delitem__("2"),
    lambda m: m._modules.pop("2"),
    lambda m: m._modules.popitem(),
    lambda m: m._modules.update({"2": nn.Linear(4, 4).double()}),
    lambda m: m._modules.setdefault("4", nn.Linear(4, 4).double()),
    lambda m: m._modules.move_to_end("0"),
    lambda m: m.add_module("4", nn.Linear(4, 4).double()),
    lambda m: setattr(m, "2", nn.Linear(4, 4).double()),
    lambda m: m.__setitem__(2, nn.Linear(4, 4).double()),
    lambda m: m.append(nn.Linear(4, 4).double()),
    lambda m: m.insert(1, nn.Linear(4, 4).double()),    # renumbers: a new _modules dict
    lambda m: m.__delitem__(2),
    lambda m: m[3].lin._parameters.__setitem__("weight", _param4x4()),
], ids=["setitem", "delitem", "pop", "popitem", "update", "setdefault", "move_to_end",
        "add_module", "setattr", "seq-setitem", "append", "insert", "seq-delitem",
        "grandchild-parameter"])
def test_child_dict_changes(change):
    _after(change)


def _param4x4():
    return nn.Parameter(ember.full((4, 4), 0.25, dtype=f64))


def test_children_dict_replaced_by_a_plain_dict():
    """An assigned plain dict is not counted: the tree then runs its full check at every call,
    and a later write into that dict is still seen."""
    holder = {}

    def change(m):
        holder["d"] = d = OrderedDict(m._modules)
        m._modules = d
    compiled, m = _after(change)
    tree = next(iter(compiled._compiled._trees.values()))
    assert not tree.tracked
    x = ember.randn(5, 4, dtype=f64)
    holder["d"]["2"] = nn.Linear(4, 4).double()
    with ember.no_grad():
        np.testing.assert_allclose(compiled(x).numpy(), m(x).numpy(), rtol=0, atol=1e-12)


# ---- training flag, class, __dict__ --------------------------------------------------------
@pytest.mark.parametrize("change", [
    lambda m: m.train(),
    lambda m: m[1].train(),
    lambda m: setattr(m[1], "training", True),
    lambda m: m[1].__dict__.__setitem__("training", True),
    lambda m: m[1].__dict__.update(training=True),
    lambda m: m[1].__setstate__({"training": True}),
    lambda m: setattr(m[3], "__class__", Doubled),
    lambda m: setattr(m[1], "__dict__", dict(m[1].__dict__, training=True)),
    lambda m: m[3].__dict__.pop("_buffers") and m[3].__dict__.__setitem__(
        "_buffers", module_mod._TrackedDict()),
], ids=["train", "train-submodule", "setattr-training", "dict-setitem", "dict-update",
        "setstate", "class", "dict-replaced", "dict-pop"])
def test_module_field_changes(change):
    _after(change)


def test_class_swap_of_the_root():
    _after(lambda m: setattr(m, "__class__", Doubled), model=Scaled())


# ---- hooks ---------------------------------------------------------------------------------
def _hook(mod, args, out):
    return out * 2.0


@pytest.mark.parametrize("change", [
    lambda m: m[2].register_forward_hook(_hook),
    lambda m: m[2].register_forward_pre_hook(lambda mod, args: (args[0] * 2.0,)),
    lambda m: m[2]._forward_hooks.__setitem__(12345, _hook),
    lambda m: m[2]._forward_hooks.setdefault(12345, _hook),
    lambda m: m[2]._forward_hooks.update({12345: _hook}),
    lambda m: setattr(m[2], "_forward_hooks", OrderedDict({12345: _hook})),
    lambda m: m[2].__dict__.__setitem__("_forward_hooks", OrderedDict({12345: _hook})),
], ids=["register_forward_hook", "register_forward_pre_hook", "setitem", "setdefault",
        "update", "setattr", "dict-setitem"])
def test_hook_changes(change):
    _after(change, warn=True)


def test_backward_hook_registration():
    _after(lambda m: m[2].register_full_backward_hook(lambda mod, gi, go: None), grad=True,
           warn=True)


def test_hook_removal_compiles_again():
    """A removed hook takes the module back to its compiled trace (the removal counted: with
    the hook's presence in the stale key the call would stay eager)."""
    m = _seq().double().eval()
    h = m[2].register_forward_hook(_hook)
    compiled = ember.compile(m)
    x = ember.randn(5, 4, dtype=f64)
    with ember.no_grad(), pytest.warns(GraphBreakWarning):
        for _ in range(3):
            compiled(x)
    assert compiled._compiled._last.traced is None    # eager while the hook is there
    h.remove()
    with ember.no_grad():
        for _ in range(2):
            np.testing.assert_allclose(compiled(x).numpy(), m(x).numpy(), rtol=0, atol=1e-12)
    assert compiled._compiled._last.traced is not None


def test_global_hook_registration_and_removal():
    handles = []

    def change(m):
        handles.append(module_mod.register_module_forward_hook(
            lambda mod, a, out: out * 2.0 if isinstance(mod, nn.Linear) else None))
    try:
        compiled, m = _after(change, warn=True)
    finally:
        for h in handles:
            h.remove()
    x = ember.randn(5, 4, dtype=f64)
    with ember.no_grad():
        np.testing.assert_allclose(compiled(x).numpy(), m(x).numpy(), rtol=0, atol=1e-12)
    assert compiled._compiled._last.traced is not None


# ---- parameters' requires_grad (read at every call) -----------------------------------------
class Frozen(nn.Module):
    """Reads its weight's ``requires_grad`` in Python: the trace holds the branch taken."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x) * (2.0 if self.lin.weight.requires_grad else 3.0)


@pytest.mark.parametrize("change", [
    lambda m: m.lin.weight.requires_grad_(False),
    lambda m: setattr(m.lin.weight, "requires_grad", False),
    lambda m: m.lin.weight.detach_(),
    lambda m: m.requires_grad_(False),
], ids=["requires_grad_", "setter", "detach_", "module-requires_grad_"])
def test_parameter_requires_grad_changes(change):
    compiled, m = _after(change, grad=True, model=Frozen())
    x = ember.randn(5, 4, dtype=f64)
    out = compiled(x)
    assert out.requires_grad == m(x).requires_grad
    if out.requires_grad:
        m.zero_grad()
        out.sum().backward()
        assert m.lin.weight.grad is None and m.lin.bias.grad is not None


def test_parameter_requires_grad_turned_on():
    m = Frozen().requires_grad_(False)
    compiled, m = _after(lambda m: m.lin.weight.requires_grad_(True), grad=True, model=m)
    out = compiled(ember.randn(5, 4, dtype=f64))
    assert out.requires_grad
    out.sum().backward()
    assert m.lin.weight.grad is not None and m.lin.bias.grad is None


def test_parameter_requires_grad_set_by_autograd():
    """An in-place op with a differentiable operand makes a frozen parameter require grad
    (autograd writes the flag itself, no setter runs)."""
    m = Frozen().requires_grad_(False)

    def change(m):
        with ember.enable_grad():
            m.lin.weight.add_(ember.zeros(4, 4, dtype=f64, requires_grad=True))
    _after(change, grad=True, model=m)


# ---- utilities that rewrite a module -------------------------------------------------------
class _Half(nn.Module):
    def forward(self, w):
        return w * 0.5


def test_register_parametrization():
    from ember.nn.utils import parametrize
    _after(lambda m: parametrize.register_parametrization(m[0], "weight", _Half()))


def test_remove_parametrization():
    from ember.nn.utils import parametrize
    m = _seq()
    parametrize.register_parametrization(m[0], "weight", _Half())
    _after(lambda m: parametrize.remove_parametrizations(m[0], "weight",
                                                         leave_parametrized=False),
           model=m)


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_legacy_weight_norm():   # deletes the parameter, adds two and a forward pre-hook
    from ember.nn.utils import weight_norm
    _after(lambda m: weight_norm(m[2]).weight_g.data.mul_(3.0), warn=True)


def test_legacy_spectral_norm():
    from ember.nn.utils import spectral_norm
    _after(lambda m: spectral_norm(m[2]), warn=True)


def test_parametrizations_weight_norm():
    from ember.nn.utils.parametrizations import weight_norm
    _after(lambda m: weight_norm(m[2]).parametrizations.weight.original0.data.mul_(3.0))


def test_load_state_dict_and_dtype_change():
    def change(m):
        sd = {k: v * 2.0 for k, v in m.state_dict().items()}
        m.load_state_dict(sd)
    _after(change)
    compiled, m = _after(lambda m: m.load_state_dict(
        {k: v * 3.0 for k, v in m.state_dict().items()}, assign=True))
    m.float()
    x = ember.randn(5, 4)
    with ember.no_grad():
        np.testing.assert_allclose(compiled(x).numpy(), m(x).numpy(), rtol=1e-6, atol=1e-6)


# ---- modules built without Module.__init__ --------------------------------------------------
@pytest.mark.parametrize("make", [copy.deepcopy, copy.copy], ids=["deepcopy", "copy"])
def test_copied_and_unpickled_modules_are_counted(make):
    m = make(_seq().double())
    assert type(m.__dict__) is module_mod._ModuleAttrs
    compiled, _ = _after(lambda mm: mm._modules.pop("2"), model=m)
    assert next(iter(compiled._compiled._trees.values())).tracked


@pytest.mark.parametrize("change", [lambda m: m.insert(1, nn.ReLU()), lambda m: m.__delitem__(1)],
                         ids=["insert", "delitem"])
def test_a_renumbered_sequential_stays_counted(change):
    """Sequential's insert and del renumber their children into a new dict: a counted one, so
    the tree keeps its cheap guard (a plain dict would run the full check at every call)."""
    compiled, m = _after(change)
    assert type(m._modules) is module_mod._TrackedDict
    assert next(iter(compiled._compiled._trees.values())).tracked


def test_module_with_a_plain_dict_is_checked_at_every_call():
    """A module whose ``__dict__`` the counter does not watch (one made without ``__init__``
    or ``__setstate__``, say): its tree runs the full check at every call, which sees a write
    that bypasses every counter."""
    m = _seq()
    object.__setattr__(m[1], "__dict__", dict(m[1].__dict__))
    compiled, _ = _after(lambda mm: dict.__setitem__(mm[1].__dict__, "training", True),
                         model=m)
    assert not next(iter(compiled._compiled._trees.values())).tracked
