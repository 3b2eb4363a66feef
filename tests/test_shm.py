"""Shared-memory blocks (ember/_shm.py) behind Tensor.share_memory_(): data moved in place with
view semantics, strides and empty tensors kept, a view's base moved, Module.share_memory, and
the blocks freed (no file left in /dev/shm) when no process needs them."""
import gc
import os
import sys
import time

import numpy as np
import pytest

import ember
import ember.multiprocessing as mp
from ember import nn
from tests.multiprocessing.processes import METHODS, TIMEOUT, run_children


def test_share_memory_moves_data_in_place_and_keeps_view_semantics():
    t = ember.arange(12.0).reshape(3, 4)
    assert not t.is_shared()
    version = t._version
    assert t.share_memory_() is t
    assert t.is_shared() and t._version == version
    assert t.tolist() == np.arange(12.0).reshape(3, 4).tolist()
    for v in (t[1], t.t(), t.view(-1), t[:, ::2], t.detach()):
        assert v.is_shared()
    v = t[1]
    v.add_(100)
    assert t[1].tolist() == [104.0, 105.0, 106.0, 107.0]
    assert t._version == v._version == version + 1  # one counter for a tensor and its views
    assert t.share_memory_() is t and t.is_shared()  # already shared: nothing moves


def test_share_memory_keeps_strides_and_handles_empty():
    t = ember.from_numpy(np.asfortranarray(np.arange(6, dtype=np.float64).reshape(2, 3)))
    strides = t.stride()
    t.share_memory_()
    assert t.stride() == strides and t.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    e = ember.zeros(0, 3).share_memory_()
    assert e.is_shared() and e.shape == (0, 3)


def test_share_memory_of_a_view_moves_its_base():
    x = ember.zeros(5)
    v = x[1:3]
    v.share_memory_()
    assert v.is_shared() and x.is_shared()
    v.fill_(7)
    assert x.tolist() == [0.0, 7.0, 7.0, 0.0, 0.0]


def test_module_share_memory_shares_parameters_and_buffers_not_grads():
    model = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    model(ember.randn(4, 3)).sum().backward()
    assert model.share_memory() is model
    for name, p in model.named_parameters():
        assert p.is_shared(), name
        assert p.grad is not None and not p.grad.is_shared(), name
    assert model[1].running_mean.is_shared()
    model.zero_grad()
    model(ember.randn(4, 3)).sum().backward()
    assert not any(p.grad.is_shared() for p in model.parameters())


def _memfd_state():
    """(mappings, open descriptors) of ember's shared blocks in this process."""
    with open("/proc/self/maps") as f:
        maps = sum("ember-shared-tensor" in line for line in f)
    fds = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            fds += "ember-shared-tensor" in os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass
    return maps, fds


def _memfd_state_settles_to(expected, wait=3.0):
    """Whether ``_memfd_state()`` reaches ``expected`` within ``wait`` seconds (collecting
    garbage between looks): a descriptor another test's finishing thread still holds for a
    moment is not this test's leak, a leaked one stays."""
    deadline = time.monotonic() + wait
    while True:
        state = _memfd_state()
        if state == expected or time.monotonic() > deadline:
            return state == expected
        gc.collect()
        time.sleep(0.05)


def _touch(i, t, q):
    t += 1
    q.put(t.is_shared())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc and /dev/shm")
def test_shared_blocks_are_freed_when_no_process_needs_them():
    gc.collect()
    shm_before = set(os.listdir("/dev/shm"))
    base = _memfd_state()
    for _ in range(20):   # a steady starting point (see _memfd_state_settles_to)
        time.sleep(0.05)
        gc.collect()
        base, last = _memfd_state(), base
        if base == last:
            break
    for method in METHODS:
        ctx = mp.get_context(method)
        t = ember.zeros(1000).share_memory_()
        q = ctx.Queue()
        assert _memfd_state_settles_to((base[0] + 1, base[1] + 1)), (_memfd_state(), base)
        run_children(ctx, _touch, t, q)
        q.put(ember.ones(10))  # a second block, sent to nobody: its descriptor is handed on
        assert q.get(timeout=TIMEOUT) is True and q.get(timeout=TIMEOUT).tolist() == [1.0] * 10
        assert t.sum().item() == 1000.0
        del t, q
    gc.collect()
    assert _memfd_state_settles_to(base), (_memfd_state(), base)
    # ember's blocks have no name: nothing of theirs is ever left in /dev/shm
    assert not [n for n in set(os.listdir("/dev/shm")) - shm_before if "ember" in n]
