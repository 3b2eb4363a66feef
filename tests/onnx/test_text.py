"""The human-readable form of an ONNX model (ember/onnx/text.py): the summary (opsets, inputs and
outputs, initializer bytes, op histogram), ONNX's text syntax with large initializers elided, and
the round trip of exported models through the text form."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import ember  # noqa: E402
import ember.onnx  # noqa: E402
from ember.errors import EmberTypeError  # noqa: E402
from ember.onnx.text import load_model, summary, to_text  # noqa: E402
from tests.jit import models as jit_models  # noqa: E402
from tests.onnx.models import NN_MODELS  # noqa: E402


def _model():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 20])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 20])
    w = numpy_helper.from_array(np.arange(20, dtype=np.float32), "w")        # 80 bytes
    b = numpy_helper.from_array(np.ones(2, np.float64), "b")                  # 16 bytes
    nodes = [helper.make_node("Add", ["x", "w"], ["t"]), helper.make_node("Relu", ["t"], ["u"]),
             helper.make_node("Add", ["u", "w"], ["y"])]
    g = helper.make_graph(nodes, "tiny", [x], [y], [w, b])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_summary_lists_io_initializer_bytes_and_ops_by_count():
    lines = summary(_model()).splitlines()
    assert lines[1] == "opsets: ai.onnx=17"
    assert lines[2:] == ["inputs:", "  x: float32[N, 20]", "outputs:", "  y: float32[N, 20]",
                         "initializers: 2 (96 bytes)", "nodes: 3", "ops: Add x2, Relu x1"]


def test_to_text_elides_large_initializers_only_in_the_text(tmp_path):
    m = _model()
    text = to_text(m)
    assert text.startswith("# model: tiny") and "<elided>" in text
    body = to_text(m, with_summary=False, elide_initializers=False)
    assert not body.startswith("#") and "<elided>" not in body
    assert numpy_helper.to_array(m.graph.initializer[0]).sum() == 190   # the model is untouched
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    assert to_text(str(path)) == text == to_text(m.SerializeToString())
    with open(path, "rb") as fh:
        assert load_model(fh).graph.name == "tiny"


def test_load_model_refuses_other_types():
    with pytest.raises(EmberTypeError, match="got int"):
        load_model(3)


@pytest.mark.parametrize("name", sorted(jit_models.MODELS) + sorted(NN_MODELS))
def test_text_round_trip(name, tmp_path):
    """export -> serialise -> parse back (load, and onnx.parser on the printed text) -> print."""
    from onnx import parser, printer
    if name in NN_MODELS:
        m = NN_MODELS[name]().eval()
        ex = m.example(2)
    else:
        m = jit_models.MODELS[name]().eval()
        ex = jit_models.example(m)
    ex = ex if isinstance(ex, tuple) else (ex,)
    path = tmp_path / "m.onnx"
    mp = ember.onnx.export(m, ex, str(path))
    loaded = onnx.load(str(path))
    text = printer.to_text(loaded)
    reparsed = parser.parse_model(text)
    assert printer.to_text(reparsed) == text
    assert printer.to_text(mp) == text
    shown = ember.onnx.to_text(str(path))
    assert "opsets: ai.onnx=17" in shown and "initializers:" in shown and "ops:" in shown
    onnx.checker.check_model(reparsed, full_check=True)

