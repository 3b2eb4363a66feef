"""The pass pipeline (ember/jit/passes/__init__.py): registering a pass in a slot; each pass
has its own file in tests/jit/passes/."""
import ember
import ember.jit as jit
from ember.jit import passes


def test_register_pass_slot_for_fusion():
    seen = []

    def fake_fusion(g):
        seen.append(len(g.nodes))
        return g
    passes.register_pass(fake_fusion, before="cse")
    try:
        names = [n for n, _ in passes.PIPELINE]
        assert names.index("fake_fusion") == names.index("cse") - 1
        jit.optimize(jit.trace(lambda x: x + 1, (ember.randn(2),)))
        assert seen
    finally:
        passes.PIPELINE[:] = [p for p in passes.PIPELINE if p[0] != "fake_fusion"]
