"""The symbolic registry (ember/onnx/registry.py): registration by starting opset, lookup of the
version in force, overriding, the opset range check, and that every registered op is exported by
the test file of its symbolic family."""
import os

import pytest

pytest.importorskip("onnx")

import ember  # noqa: E402
import ember.onnx  # noqa: E402
from ember.onnx import registry  # noqa: E402
from tests.onnx.symbolics.op_export import NO_SAMPLES, REGISTERED, family  # noqa: E402


def test_registry_is_covered():
    """Every registered op either has spec samples (exported by its family's test) or is covered
    by the factory test, the model tests (lstm_step/gru_step/lstm_layer, batch norm, size) or is
    random."""
    covered = {"arange", "empty", "eye", "full", "linspace", "ones", "rand", "randn", "size",
               "zeros", "normal"}
    assert set(NO_SAMPLES) <= covered, sorted(set(NO_SAMPLES) - covered)


def test_every_symbolic_family_has_its_export_test_file():
    here = os.path.join(os.path.dirname(__file__), "symbolics")
    families = {family(op) for op in REGISTERED}
    missing = sorted(f for f in families
                     if not os.path.isfile(os.path.join(here, f"test_{f}.py")))
    assert not missing, missing


def test_lookup_picks_the_highest_since_not_above_the_opset(monkeypatch):
    monkeypatch.setattr(registry, "_REGISTRY", {})
    monkeypatch.setattr(registry, "_LOADED", True)
    first, later = object(), object()
    registry.register("op_a", first)
    registry.symbolic("op_a", since=16)(later)
    assert registry.lookup("op_a", 13) is first and registry.lookup("op_a", 15) is first
    assert registry.lookup("op_a", 16) is later and registry.lookup("op_a", 21) is later
    assert registry.lookup("op_b", 21) is None
    replacement = object()
    registry.register("op_a", replacement, since=16)   # same op and since: replaces
    assert registry.registered_ops() == {"op_a": [13, 16]}
    assert registry.lookup("op_a", 17) is replacement


@pytest.mark.parametrize("opset", [registry.MIN_OPSET, 17, registry.MAX_OPSET])
def test_check_opset_accepts_the_supported_range(opset):
    assert registry.check_opset(opset) == opset


@pytest.mark.parametrize("bad", [registry.MIN_OPSET - 1, registry.MAX_OPSET + 1, True, 17.0, "17",
                                 None])
def test_check_opset_refuses_what_is_outside_it(bad):
    with pytest.raises(ValueError, match=f"opset_version {registry.MIN_OPSET} to "
                                         f"{registry.MAX_OPSET}"):
        registry.check_opset(bad)


def test_registered_symbolic_overrides(monkeypatch):
    from ember.onnx import registry
    monkeypatch.setitem(registry._REGISTRY, "relu", list(registry._REGISTRY["relu"]))
    ember.onnx.register("relu", lambda g, node, x: g.op("LeakyRelu", x, alpha=0.0), since=16)
    x = (ember.randn(2, 3),)
    assert [n.op_type for n in ember.onnx.build_model(lambda t: t.relu(), x,
                                                      opset_version=15).graph.node] == ["Relu"]
    assert [n.op_type for n in ember.onnx.build_model(lambda t: t.relu(), x,
                                                      opset_version=16).graph.node] == \
        ["LeakyRelu"]

