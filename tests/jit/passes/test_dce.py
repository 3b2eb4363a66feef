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


def test_dce_keeps_referenced_constants_and_drops_the_rest():
    """A constant stays while a constant node names it or an ArrayRef in a node's arguments or
    attributes (nested in lists and tuples) refers to it; the others are dropped, and a graph
    without constants is left as it is."""
    from ember.jit.ir import ArrayRef
    g = jit.trace(lambda x: x + 1, (ember.randn(3),)).graph.copy()
    x = g.inputs[0]
    g.constants.clear()
    g.constants.update({k: np.zeros(2) for k in ("node", "arg", "nested", "attr", "unused")})
    c = g.add_node("constant", (), {"name": "node"}, [(np.float64, (2,))]).output
    g.add_node("copy_", [x, x, [1, (ArrayRef("nested"),)], ArrayRef("arg")],
               {"w": [ArrayRef("attr")], "n": 3}, [(np.float32, (3,))])
    g.add_node("copy_", [c, c], {}, [(np.float64, (2,))])
    passes.dce(g)
    assert sorted(g.constants) == ["arg", "attr", "nested", "node"]
    for n in [n for n in g.nodes if n.kind == "copy_"][:1]:
        n.args[2:] = []
        n.attrs.pop("w")
    passes.dce(g)
    assert sorted(g.constants) == ["node"]
    empty = jit.trace(lambda x: x * 2, (ember.randn(3),)).graph.copy()
    empty.constants.clear()
    assert passes.dce(empty) is empty and kinds(empty) == ["mul"]
