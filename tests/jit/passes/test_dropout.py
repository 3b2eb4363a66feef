"""Removal of eval-mode dropout (ember/jit/passes/dropout.py)."""
import ember
import ember.jit as jit
from ember.jit import passes
from tests.jit.passes.helpers import kinds


def test_eval_dropout_removed():
    from ember.autograd._generated import functions as G
    t = jit.trace(lambda x: G.native_dropout(x, 0.3, False, ember.default_generator)[0] * 2,
                  (ember.randn(3),))
    g = passes.remove_eval_dropout(t.graph.copy()).lint()
    assert kinds(g) == ["mul"]
    t = jit.trace(lambda x: ember.dropout(x, 0.3, True) * 2, (ember.randn(3),), check_trace=False)
    assert "native_dropout" in kinds(passes.remove_eval_dropout(t.graph.copy()))
