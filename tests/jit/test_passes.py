"""Each pass on a small graph, plus numerical equality on real traces."""
import numpy as np

import ember
import ember.jit as jit
from ember.jit import passes


def kinds(g):
    return [n.kind for n in g.nodes]


def test_dce_removes_dead_chains_keeps_side_effects():
    g = jit.trace(lambda x: x + 1, (ember.randn(3),)).graph.copy()
    x = g.inputs[0]
    a = g.add_node("exp", [x], {}, [(np.float32, (3,))]).output
    g.add_node("log", [a], {}, [(np.float32, (3,))])
    g.add_node("copy_", [x, a], {}, [(np.float32, (3,))])
    passes.dce(g).lint()
    assert kinds(g) == ["add", "exp", "copy_"]


def test_cse_merges_equal_pure_nodes_not_random_ones():
    def f(x):
        return (x * 2).relu() + (x * 2).relu() + ember.dropout(x, 0.5) + ember.dropout(x, 0.5)
    g = passes.cse(jit.trace(f, (ember.randn(4),), check_trace=False).graph.copy())
    g.lint()
    assert kinds(g).count("mul") == 1 and kinds(g).count("relu") == 1
    assert kinds(g).count("native_dropout") == 2


def test_constant_fold():
    c = ember.arange(4.0)
    t = jit.trace(lambda x: x + (c * 2).exp(), (ember.randn(4),))
    g = passes.constant_fold(t.graph.copy()).lint()
    assert kinds(g) == ["constant", "add"]
    x = ember.randn(4)
    np.testing.assert_allclose(jit.run_forward(g, x)[0]._data, t(x)._data, rtol=1e-6)


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


def test_fold_batchnorm_conv_and_linear():
    from tests.jit.models import LeNetBN, example
    m = LeNetBN().eval()
    t = jit.trace(m, (example(m),))
    for freeze in (False, True):
        g = t.graph.copy()
        state = t.state_tensors()
        if freeze:
            g = passes.freeze(g, state)
            state = []
        g = passes.fold_batchnorm(g).lint()
        assert "native_batch_norm" not in kinds(g)
        if freeze:
            g = passes.constant_fold(g).lint()
            assert set(kinds(g)) <= {"constant", "conv2d", "relu", "max_pool2d_with_indices",
                                      "size", "reshape", "linear"}
        x = example(m, 3, seed=4)
        with ember.no_grad():
            got = jit.run_forward(g, x, *state)[0]
            np.testing.assert_allclose(got._data, m(x)._data, rtol=1e-4, atol=1e-5)


def test_eval_dropout_removed():
    from ember.autograd._generated import functions as G
    t = jit.trace(lambda x: G.native_dropout(x, 0.3, False, ember.default_generator)[0] * 2,
                  (ember.randn(3),))
    g = passes.remove_eval_dropout(t.graph.copy()).lint()
    assert kinds(g) == ["mul"]
    t = jit.trace(lambda x: ember.dropout(x, 0.3, True) * 2, (ember.randn(3),), check_trace=False)
    assert "native_dropout" in kinds(passes.remove_eval_dropout(t.graph.copy()))


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
