"""Concatenations in inference plans (ember.jit.plan_concat): a batch of one's ``cat`` is a view
of a buffer its operands' convolutions write into; results equal eager's in every mode."""
import re
import warnings

import numpy as np
import pytest

import ember
import ember.jit as jit
import ember.jit.plan as plan_module
import ember.nn as nn
import ember.nn.functional as F

pytest.importorskip("numba")


class _Dense(nn.Module):
    """DenseNet's block: each layer reads the concatenation of every earlier output (a list
    that grows by one), its norm and ReLU first; a transition pools the block's result."""

    def __init__(self, c0=4, growth=3, layers=3):
        super().__init__()
        self.stem = nn.Conv2d(2, c0, 3, padding=1)
        self.norms = nn.ModuleList(nn.BatchNorm2d(c0 + i * growth) for i in range(layers))
        self.convs = nn.ModuleList(nn.Conv2d(c0 + i * growth, growth, 3, padding=1, bias=False)
                                   for i in range(layers))
        self.head = nn.Conv2d(c0 + layers * growth, 5, 1)

    def forward(self, x):
        feats = [F.avg_pool2d(self.stem(x), 2)]   # not a convolution step: copied in
        for norm, conv in zip(self.norms, self.convs):
            feats.append(conv(F.relu(norm(ember.cat(feats, 1)))))
        return F.avg_pool2d(self.head(ember.cat(feats, 1)), 2)


class _Branches(nn.Module):
    """Inception / Fire: parallel convolutions with ReLU concatenated; a value in two
    concatenations that do not extend one another; a graph input concatenated."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 4, 1)
        self.b = nn.Conv2d(3, 5, 3, padding=1)
        self.c = nn.Conv2d(3, 2, 3, padding=1)
        self.d = nn.Conv2d(9, 3, 1)
        self.e = nn.Conv2d(9, 3, 1)

    def forward(self, x):
        a, b, c = F.relu(self.a(x)), F.relu(self.b(x)), self.c(x)
        y = ember.cat([a, b], 1)
        z = ember.cat([a, c, x], 1)
        return self.d(y) + self.e(z)


class _Wide(nn.Module):
    """Branches the convolution engine runs with its epilogue inside the kernel (``direct``:
    at least 16 filters, more taps than the thin kernels take)."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(20, 16, 3, padding=1)
        self.b = nn.Conv2d(20, 16, 3, padding=1)
        self.c = nn.Conv2d(32, 4, 1)

    def forward(self, x):
        return self.c(ember.cat([F.relu(self.a(x)), self.b(x)], 1))


def _fast(model, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return jit.optimize(jit.trace(model.eval(), (x,)))


def _plan(fast):
    (p,) = fast._planner.plans().values()
    return p


def _randomise_norms(model):
    with ember.no_grad():
        for mod in model.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.copy_(ember.randn(mod.running_mean.shape) * 0.1)
                mod.running_var.copy_(ember.rand(mod.running_var.shape) + 0.5)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("build,shape", [(_Dense, (2, 10, 12)), (_Branches, (3, 7, 9)),
                                         (_Wide, (20, 6, 7))])
def test_concatenation_in_place_equals_eager(build, shape, dtype):
    ember.manual_seed(0)
    model = build().to(getattr(ember, dtype))
    _randomise_norms(model)
    model.eval()
    x = ember.randn((1,) + shape, dtype=getattr(ember, dtype))
    fast = _fast(model, x)
    tol = 1e-5 if dtype == "float32" else 1e-12
    with ember.no_grad():
        fast(x)
        p = _plan(fast)
        assert any(st.placed for st in p._steps)
        for st in p._steps:   # every mode writes the placed step's slice
            for mode in st.modes():
                st.mode = mode
                # a new input each call: the buffers are reused, a slice left from the call
                # before would be wrong
                xb = ember.randn((1,) + shape, dtype=getattr(ember, dtype))
                np.testing.assert_allclose(fast(xb).numpy(), model(xb).numpy(), rtol=tol,
                                           atol=tol)


def test_dense_block_concatenations_share_one_buffer():
    """A block's cats are prefixes of its last: one buffer; only the first operand (a pool's
    result) is copied, once."""
    ember.manual_seed(0)
    model = _Dense()
    x = ember.randn(1, 2, 10, 12)
    fast = _fast(model, x)
    with ember.no_grad():
        fast(x)
    p = _plan(fast)
    assert len(p._cat_arrays) == 1 and p._cat_arrays[0].shape == (1, 4 + 3 * 3, 5, 6)
    assert sum(st.placed for st in p._steps) == 3
    lines = [line.strip() for line in p.source.splitlines()]
    bound = r"k(?:_\d+)?"   # a global the plan binds
    assert sum(bool(re.fullmatch(rf"v\d+ = {bound}", ln)) for ln in lines) == 4   # bound views
    assert sum(bool(re.fullmatch(rf"{bound}\({bound}, v\d+\)", ln)) for ln in lines) == 1  # copy


def test_returned_concatenation_is_not_a_buffer():
    """A cat returned by the graph, or a view of a buffer returned, does not change under the
    caller at the next call."""
    ember.manual_seed(0)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Conv2d(2, 3, 1), nn.Conv2d(2, 3, 3, padding=1)

        def forward(self, x):
            y = ember.cat([self.a(x), self.b(x)], 1)
            return y.flatten(1), ember.cat([self.b(x), x], 1)

    model = M().eval()
    x1, x2 = ember.randn(1, 2, 5, 5), ember.randn(1, 2, 5, 5)
    fast = _fast(model, x1)
    with ember.no_grad():
        fast(x1)
        r1 = [t.numpy().copy() for t in fast(x1)]
        keep = fast(x1)
        fast(x2)
        for got, want in zip(keep, r1):
            np.testing.assert_array_equal(got.numpy(), want)
        for got, want in zip(fast(x2), model(x2)):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


def test_batch_of_two_keeps_the_kernel():
    """Channel slices of a batch of two are not contiguous: no buffer, the same results."""
    ember.manual_seed(0)
    model = _Branches().eval()
    x = ember.randn(2, 3, 7, 9)
    fast = _fast(model, x)
    with ember.no_grad():
        np.testing.assert_allclose(fast(x).numpy(), model(x).numpy(), rtol=1e-5, atol=1e-6)
        p = _plan(fast)
    assert not p._cat_arrays and not any(st.placed for st in p._steps)


def test_switch_off(monkeypatch):
    monkeypatch.setattr(plan_module, "CONCAT_BUFFERS", False)
    model = _Dense().eval()
    x = ember.randn(1, 2, 10, 12)
    fast = _fast(model, x)
    with ember.no_grad():
        np.testing.assert_allclose(fast(x).numpy(), model(x).numpy(), rtol=1e-5, atol=1e-6)
    assert not _plan(fast)._cat_arrays
