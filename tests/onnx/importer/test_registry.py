"""The importer registry (ember/onnx/importer/registry.py): the version of an op's importer in
force at an opset, custom-domain importers, what is registered, and attribute checks at load
time."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402

import ember  # noqa: E402
import ember.onnx  # noqa: E402
from ember.onnx.importer import UnsupportedOnnxError, registry  # noqa: E402
from tests.onnx.models import tiny_model, vi  # noqa: E402


def test_lookup_picks_the_highest_since_not_above_the_opset():
    since = registry.versions("Softmax")
    assert since == sorted(since) and 13 in since and since[0] < 13
    assert registry.lookup("Softmax", 12).since < 13 and registry.lookup("Softmax", 13).since == 13
    assert registry.lookup("Softmax", 21).since == since[-1]
    assert registry.lookup("Softmax", 13, domain="ai.onnx") is registry.lookup("Softmax", 13)
    assert registry.lookup("NoSuchOp", 17) is None and registry.versions("NoSuchOp") == []


def test_registered_importers_and_string_ops():
    reg = registry.registered_importers()
    assert ("", "Conv") in reg and ("", "LSTM") in reg
    assert all(v == sorted(v) for v in reg.values())
    strings = registry.registered_string_ops()
    assert "StringNormalizer" in strings and "Add" not in strings


def test_opset_specific_importers():
    """Softmax before opset 13 flattens to 2-d at `axis`; from 13 it is per axis."""
    x = np.arange(8, dtype=np.float32).reshape(2, 2, 2)
    for opset in (11, 13):
        m = tiny_model([helper.make_node("Softmax", ["x"], ["y"], axis=1)], [vi("x", [2, 2, 2])],
                       [vi("y", [2, 2, 2])], opset=opset)
        y = ember.onnx.load_model(m)(ember.tensor(x)).numpy()
        if opset == 11:
            e = np.exp(x.reshape(2, 4) - x.reshape(2, 4).max(1, keepdims=True))
            want = (e / e.sum(1, keepdims=True)).reshape(2, 2, 2)
        else:
            e = np.exp(x - x.max(1, keepdims=True))
            want = e / e.sum(1, keepdims=True)
        np.testing.assert_allclose(y, want, rtol=1e-6)


def test_an_attribute_check_refuses_a_value_at_load(monkeypatch):
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))

    @registry.importer("Scale", domain="com.example.ember_check", attrs={"k": 1.0},
                       check=lambda a, node: ("k", "must not be 0") if a["k"] == 0 else None)
    def scale(a, x):
        return x * a["k"]

    def model(k):
        node = helper.make_node("Scale", ["x"], ["y"], domain="com.example.ember_check", k=k,
                                name="s")
        g = helper.make_graph([node], "g", [vi("x", [2])], [vi("y", [2])])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid("com.example.ember_check",
                                                                       1)])
    assert ember.onnx.load_model(model(2.0))(ember.tensor([1.0, 3.0])).tolist() == [2.0, 6.0]
    with pytest.raises(UnsupportedOnnxError, match="at node 's': attribute 'k' must not be 0"):
        ember.onnx.load_model(model(0.0))


def test_custom_domain_importer_and_subgraph_errors():
    from ember.onnx.importer import importer

    @importer("TimesK", since=1, domain="com.example.ember_test", attrs={"k": 2.0})
    def times_k(a, x):
        return x * a["k"]

    node = helper.make_node("TimesK", ["x"], ["y"], domain="com.example.ember_test", k=3.0)
    g = helper.make_graph([node], "g", [vi("x", [2])], [vi("y", [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("com.example.ember_test", 1)])
    assert ember.onnx.load_model(m)(ember.tensor([1.0, 2.0])).tolist() == [3.0, 6.0]
    # an unsupported op inside an If branch is found at load time, named by its node
    bad = helper.make_graph([helper.make_node("NoSuchOp", ["x"], ["z"], name="deep")], "then",
                            [], [vi("z", [2])])
    ok = helper.make_graph([helper.make_node("Identity", ["x"], ["z"])], "else", [],
                           [vi("z", [2])])
    cond = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    m = tiny_model([helper.make_node("If", ["c"], ["y"], then_branch=bad, else_branch=ok)],
                   [cond, vi("x", [2])], [vi("y", [2])])
    with pytest.raises(UnsupportedOnnxError, match="'NoSuchOp' \\(opset 17\\) at node 'deep'"):
        ember.onnx.load_model(m)

