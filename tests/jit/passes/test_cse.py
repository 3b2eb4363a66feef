"""Common-subexpression elimination (ember/jit/passes/cse.py)."""
import ember
import ember.jit as jit
from ember.jit import passes
from tests.jit.passes.helpers import kinds


def test_cse_merges_equal_pure_nodes_not_random_ones():
    def f(x):
        return (x * 2).relu() + (x * 2).relu() + ember.dropout(x, 0.5) + ember.dropout(x, 0.5)
    g = passes.cse(jit.trace(f, (ember.randn(4),), check_trace=False).graph.copy())
    g.lint()
    assert kinds(g).count("mul") == 1 and kinds(g).count("relu") == 1
    assert kinds(g).count("native_dropout") == 2
