"""Constant folding (ember/jit/passes/fold.py)."""
import numpy as np

import ember
import ember.jit as jit
from ember.jit import passes
from tests.jit.passes.helpers import kinds


def test_constant_fold():
    c = ember.arange(4.0)
    t = jit.trace(lambda x: x + (c * 2).exp(), (ember.randn(4),))
    g = passes.constant_fold(t.graph.copy()).lint()
    assert kinds(g) == ["constant", "add"]
    x = ember.randn(4)
    np.testing.assert_allclose(jit.run_forward(g, x)[0]._data, t(x)._data, rtol=1e-6)
