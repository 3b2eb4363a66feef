"""torch.utils.hooks.RemovableHandle: the handle of every register_*_hook, usable by a program's
own hook registry, as torch's."""
import pickle
from collections import OrderedDict

import pytest
import torch

import ember
from ember.utils.hooks import RemovableHandle


@pytest.mark.parametrize("m", [torch, ember], ids=["torch", "ember"])
def test_a_programs_own_registry_removes_hooks_and_their_flags(m):
    hooks, flags = OrderedDict(), OrderedDict()
    a = m.utils.hooks.RemovableHandle(hooks, extra_dict=flags)
    hooks[a.id] = "first"
    flags[a.id] = True
    with m.utils.hooks.RemovableHandle(hooks, extra_dict=[flags]) as b:
        hooks[b.id] = "second"
        assert b.id != a.id and list(hooks.values()) == ["first", "second"]
    assert list(hooks.values()) == ["first"]
    a.remove()
    a.remove()                    # a second remove does nothing
    assert not hooks and not flags


@pytest.mark.parametrize("m", [torch, ember], ids=["torch", "ember"])
def test_module_hooks_return_removable_handles(m):
    lin = m.nn.Linear(2, 2)
    calls = []
    h = lin.register_forward_hook(lambda mod, args, out: calls.append(1), with_kwargs=False)
    assert isinstance(h, m.utils.hooks.RemovableHandle)
    lin(m.ones(1, 2))
    h.remove()
    lin(m.ones(1, 2))
    assert calls == [1]


def test_handle_survives_a_pickle_round_trip_of_its_registry():
    hooks = OrderedDict()
    h = RemovableHandle(hooks)
    hooks[h.id] = "hook"
    hooks2, h2 = pickle.loads(pickle.dumps((hooks, h)))
    h2.remove()
    assert not hooks2 and list(hooks.values()) == ["hook"]


def test_handle_keeps_no_registry_alive():
    hooks = OrderedDict()
    h = RemovableHandle(hooks)
    del hooks
    h.remove()        # the registry is gone: nothing to remove, no error
