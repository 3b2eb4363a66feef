"""Algebraic and reshape/transpose simplification (ember/jit/passes/simplify.py)."""
import numpy as np

import ember
import ember.jit as jit
from ember.jit import passes
from tests.jit.passes.helpers import kinds


def test_simplify_identities_and_reshapes():
    def f(x):
        y = (x * 1 + 0 - 0) / 1
        y = y.reshape(6, 2).reshape(3, 4).view(12)
        z = x.transpose(0, 1).transpose(1, 0) + x.t().t()
        return y, z, x.permute(1, 0, 2).permute(1, 0, 2) if x.ndim == 3 else x
    t = jit.trace(f, (ember.randn(3, 4),))
    g = passes.simplify(t.graph.copy()).lint()
    assert "mul" not in kinds(g) and "div" not in kinds(g) and "transpose" not in kinds(g)
    assert "t" not in kinds(g) and kinds(g).count("reshape") + kinds(g).count("view") == 1
    x = ember.randn(3, 4)
    for a, b in zip(jit.run_forward(g, x), t(x)):
        np.testing.assert_allclose(a._data, b._data)
    # an int tensor times 1.0 changes dtype: kept
    t2 = jit.trace(lambda x: x * 1.0, (ember.arange(3),))
    assert kinds(passes.simplify(t2.graph.copy())) == ["mul"]


def test_permute_composition():
    t = jit.trace(lambda x: x.permute(2, 0, 1).permute(2, 1, 0), (ember.randn(2, 3, 4),))
    g = passes.simplify(t.graph.copy()).lint()
    assert kinds(g) == ["permute"]
    x = ember.randn(2, 3, 4)
    np.testing.assert_allclose(jit.run_forward(g, x)[0]._data, t(x)._data)
