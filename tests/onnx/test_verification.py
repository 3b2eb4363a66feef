"""``ember.onnx.verify`` (ember/onnx/verification.py): export, run in onnxruntime and compare
each output with ember; the per-output report, a wrong symbolic detected, and onnxruntime runs
of exported bytes."""
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import ember  # noqa: E402
import ember.onnx  # noqa: E402
from tests.jit import models as jit_models  # noqa: E402
from tests.onnx.models import mlp  # noqa: E402


def test_verify_reports_per_output_difference():
    m = jit_models.MODELS["lstm_lm"]().eval()
    res = ember.onnx.verify(m, (jit_models.example(m),), opset_version=13)
    assert res.ok and len(res.max_abs_diff) == 5
    assert all(d < 1e-4 for d in res.max_abs_diff)
    assert "max |onnxruntime - ember|" in res.report()


def test_verify_detects_a_wrong_symbolic(monkeypatch):
    from ember.onnx import registry
    monkeypatch.setitem(registry._REGISTRY, "relu",
                        [(13, lambda g, node, x: g.op("Sigmoid", x))])
    res = ember.onnx.verify(mlp(), (ember.randn(3, 4),))
    assert not res.ok and "MISMATCH" in res.report()


def test_raise_on_mismatch_and_other_inputs(monkeypatch):
    from ember.onnx import registry
    x = ember.randn(3, 4)
    res = ember.onnx.verify(mlp(), (x,), input_names=["x"], dynamic_axes={"x": [0]},
                            check_args=(ember.randn(5, 4),))
    assert res.ok and [list(s) for s in res.shapes] == [[5, 3]] and bool(res)
    monkeypatch.setitem(registry._REGISTRY, "relu", [(13, lambda g, node, x: g.op("Neg", x))])
    with pytest.raises(AssertionError, match="DIFFERS"):
        ember.onnx.verify(mlp(), (x,), raise_on_mismatch=True)
