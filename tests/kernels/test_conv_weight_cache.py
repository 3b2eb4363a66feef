"""Winograd's weight transform is cached for immutable weights (the JIT's frozen constants) and
recomputed for everything else."""
import gc
import warnings

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.backends import conv as settings
from ember.kernels import conv as C
from ember.kernels.conv import winograd

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
    hit = winograd._cache.get(id(w))
    return hit is not None and hit[0]() is w


def test_immutability_rules():
    a = np.ones((4, 3))
    assert not winograd.immutable(a)
    a.setflags(write=False)
    assert winograd.immutable(a)
    assert winograd.immutable(a.T)                  # read-only view of a read-only owner
    b = np.ones((4, 3))
    v = b.view()
    v.setflags(write=False)
    assert not winograd.immutable(v)                # the owner can still be written
    assert winograd.immutable(np.frombuffer(b"\0" * 16, np.float32))


def test_immutable_weight_transform_is_computed_once(forced_winograd):
    x, w = _problem()
    expected = C.conv2d_forward(x, w, None, 1, 1, 1, 1)
    assert not _cached(w)                           # writeable: recomputed each call
    w.setflags(write=False)
    first = C.conv2d_forward(x, w, None, 1, 1, 1, 1)
    assert _cached(w)
    U = winograd._cache[id(w)][2]
    second = C.conv2d_forward(x, w, None, 1, 1, 1, 1)
    assert winograd._cache[id(w)][2] is U
    np.testing.assert_array_equal(first, expected)
    np.testing.assert_array_equal(second, expected)
    key = id(w)
    del w
    gc.collect()
    assert key not in winograd._cache                # freed with its weight


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
