"""Constant folding at export (ember/onnx/folding.py): a node computable from initializers and
constants alone becomes an initializer; random nodes, nodes reading a graph input and results
far larger than their inputs are kept."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import helper  # noqa: E402

import ember  # noqa: E402
import ember.onnx  # noqa: E402
from ember.onnx.context import GraphContext  # noqa: E402
from ember.onnx.folding import fold_constants  # noqa: E402
from tests.jit import models as jit_models  # noqa: E402


def test_fold_constants_evaluates_initializer_only_nodes():
    g = GraphContext(17, helper)
    w = g.initializer(np.arange(6, dtype=np.float32).reshape(2, 3), name="w")
    t = g.op("Transpose", w, perm=[1, 0])
    s = g.op("Mul", t, g.const(2.0))
    y = g.op("MatMul", "x", s)                       # reads a graph input: kept
    r = g.op("RandomNormalLike", w)                  # random: never folded
    big = g.op("Expand", g.const(1.0), g.const(np.array([2048, 1024], np.int64)))
    assert fold_constants(g, 17) == 2
    kinds = [n.op_type for n in g.nodes]
    assert "Transpose" not in kinds and "Mul" not in kinds
    assert {"MatMul", "RandomNormalLike", "Expand"} <= set(kinds)
    np.testing.assert_array_equal(g.initializers[s], np.arange(6).reshape(2, 3).T * 2)
    assert y not in g.initializers and r not in g.initializers and big not in g.initializers


def test_protected_initializers_are_not_folded():
    g = GraphContext(17, helper)
    w = g.initializer(np.ones(3, np.float32), name="w")
    n = g.op("Neg", w)
    assert fold_constants(g, 17, protected={"w"}) == 0
    assert [x.op_type for x in g.nodes] == ["Neg"] and n not in g.initializers


def test_constant_folding_of_initializer_only_subgraphs():
    m = jit_models.MODELS["lstm_lm"]().eval()
    x = (jit_models.example(m),)
    folded = ember.onnx.build_model(m, x, do_constant_folding=True)
    unfolded = ember.onnx.build_model(m, x, do_constant_folding=False)
    assert len(folded.graph.node) < len(unfolded.graph.node)
    params = {i.name for i in folded.graph.initializer}
    for n in folded.graph.node:   # no node reads only initializers
        ins = [i for i in n.input if i]
        assert not ins or not all(i in params for i in ins) or n.op_type == "Constant", n
    ort = pytest.importorskip("onnxruntime")
    feeds = {folded.graph.input[0].name: x[0].numpy()}
    a = ort.InferenceSession(folded.SerializeToString()).run(None, feeds)
    b = ort.InferenceSession(unfolded.SerializeToString()).run(None, feeds)
    for u, v in zip(a, b):
        np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-6)

