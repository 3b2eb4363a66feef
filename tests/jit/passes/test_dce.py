"""The dead-code pass (ember/jit/passes/dce.py)."""
import numpy as np

import ember
import ember.jit as jit
from ember.jit import passes
from tests.jit.passes.helpers import kinds


def test_dce_removes_dead_chains_keeps_side_effects():
    g = jit.trace(lambda x: x + 1, (ember.randn(3),)).graph.copy()
    x = g.inputs[0]
    a = g.add_node("exp", [x], {}, [(np.float32, (3,))]).output
    g.add_node("log", [a], {}, [(np.float32, (3,))])
    g.add_node("copy_", [x, a], {}, [(np.float32, (3,))])
    passes.dce(g).lint()
    assert kinds(g) == ["add", "exp", "copy_"]
