"""Winograd's weight transform is cached for immutable weights (the JIT's frozen constants) and
recomputed for everything else."""
import gc
import threading
import warnings
import weakref

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.backends import conv as settings
from ember.kernels import conv as C
from ember.kernels.conv import winograd
from ember.kernels.runtime.memory import frozen_copy

rng = np.random.default_rng(0)


@pytest.fixture
def forced_winograd():
    settings.algorithm = "winograd"
    yield
    settings.algorithm = None


def _problem():
    x = rng.standard_normal((2, 8, 10, 10)).astype(np.float32)
    w = rng.standard_normal((6, 8, 3, 3)).astype(np.float32)
    return x, w


def _cached(w):
    hit = winograd._cache.get((id(w), False))
    return hit is not None and hit[0]() is w


def test_immutability_rules():
    a = np.ones((4, 3))
    assert not winograd.immutable(a)
    a.setflags(write=False)
    assert not winograd.immutable(a)                # it owns its memory: can be re-flagged
    assert not winograd.immutable(a.T)
    frozen = frozen_copy(np.arange(12.0).reshape(4, 3))
    assert winograd.immutable(frozen) and winograd.immutable(frozen.T[1:])
    np.testing.assert_array_equal(frozen, np.arange(12.0).reshape(4, 3))
    with pytest.raises(ValueError):
        frozen.setflags(write=True)                  # NumPy refuses: bytes own the memory
    b = np.ones((4, 3))
    v = b.view()
    v.setflags(write=False)
    assert not winograd.immutable(v)                # the owner can still be written
    assert winograd.immutable(np.frombuffer(b"\0" * 16, np.float32))
    assert not winograd.immutable(np.frombuffer(bytearray(16), np.float32))


def test_frozen_copy_keeps_shape_dtype_and_values():
    for a in (np.float32(2.5), np.zeros((0, 3), np.int64), np.arange(6, dtype=">f8")[::2],
              np.array([True, False])):
        f = frozen_copy(a)
        assert f.shape == np.shape(a) and f.dtype == np.asarray(a).dtype and not f.flags.writeable
        np.testing.assert_array_equal(f, a)


def test_immutable_weight_transform_is_computed_once(forced_winograd):
    x, w = _problem()
    expected = C.conv2d_forward(x, w, None, 1, 1, 1, 1)
    assert not _cached(w)                           # writeable: recomputed each call
    w = frozen_copy(w)
    first = C.conv2d_forward(x, w, None, 1, 1, 1, 1)
    assert _cached(w)
    U = winograd._cache[(id(w), False)][2]
    second = C.conv2d_forward(x, w, None, 1, 1, 1, 1)
    assert winograd._cache[(id(w), False)][2] is U
    np.testing.assert_array_equal(first, expected)
    np.testing.assert_array_equal(second, expected)
    key = (id(w), False)
    del w
    gc.collect()
    assert key not in winograd._cache                # freed with its weight


def test_reflagged_weight_is_never_served_a_stale_transform(forced_winograd):
    """A read-only weight made writeable again, changed and made read-only once more gets the
    transform of its new values (the old test called it immutable and kept the first one)."""
    x, w = _problem()
    w.setflags(write=False)
    C.conv2d_forward(x, w, None, 1, 1, 1, 1)
    w.setflags(write=True)
    w *= 2
    w.setflags(write=False)
    expected = C.conv2d_forward(x, np.array(w), None, 1, 1, 1, 1)
    np.testing.assert_array_equal(C.conv2d_forward(x, w, None, 1, 1, 1, 1), expected)


def test_weight_freed_by_a_collection_during_caching_does_not_deadlock(forced_winograd,
                                                                       monkeypatch):
    """A cached weight freed by a garbage collection that runs while another weight is being
    cached (any allocation can start one): its weakref callback runs right there."""
    x, w = _problem()
    doomed = frozen_copy(w)
    C.conv2d_forward(x, doomed, None, 1, 1, 1, 1)
    assert _cached(doomed)
    cycle = [doomed]
    cycle.append(cycle)                               # freed only by a collection
    key = (id(doomed), False)
    del doomed, cycle

    class CollectingWeakref:
        @staticmethod
        def ref(obj, callback=None):
            gc.collect()
            return weakref.ref(obj, callback)
    monkeypatch.setattr(winograd, "weakref", CollectingWeakref)
    fresh = frozen_copy(w * 2)
    done = []
    t = threading.Thread(target=lambda: done.append(C.conv2d_forward(x, fresh, None, 1, 1, 1, 1)),
                         daemon=True)
    t.start()
    t.join(timeout=20)
    assert done, "conv2d deadlocked in the weight-transform cache"
    assert key not in winograd._cache and _cached(fresh)
    np.testing.assert_array_equal(done[0], C.conv2d_forward(x, w * 2, None, 1, 1, 1, 1))


def test_view_of_writeable_weight_is_not_cached(forced_winograd):
    x, w = _problem()
    view = w.view()
    view.setflags(write=False)
    C.conv2d_forward(x, view, None, 1, 1, 1, 1)
    assert not _cached(view)
    w[...] = 0                                       # the owner changes: the result must follow
    np.testing.assert_array_equal(C.conv2d_forward(x, view, None, 1, 1, 1, 1), 0)


def test_frozen_jit_model_reuses_the_transform(forced_winograd):
    net = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 4, 3, padding=1)).eval()
    x = ember.tensor(rng.standard_normal((2, 8, 12, 12)).astype(np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fast = ember.jit.optimize(ember.jit.trace(net, (x,)))
    consts = [c for c in fast.graph.constants.values() if c.ndim == 4]
    assert len(consts) == 2 and all(winograd.immutable(c) for c in consts)
    with ember.no_grad():
        y1, y2 = fast(x), fast(x)
        expected = net(x)
    assert all(_cached(c) for c in consts)
    np.testing.assert_allclose(y1.numpy(), expected.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(y1.numpy(), y2.numpy())
