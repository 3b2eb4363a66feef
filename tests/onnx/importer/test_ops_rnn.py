"""The recurrent importers (ember/onnx/importer/ops_rnn.py): ONNX LSTM nodes in each direction and
layout, with and without bias, initial state, peepholes and clip, against ONNX's reference
evaluator."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402

import ember  # noqa: E402
import ember.onnx  # noqa: E402


@pytest.mark.parametrize("direction,layout,extras", [
    ("forward", 0, ()), ("reverse", 0, ("B",)), ("bidirectional", 0, ("B", "h0")),
    ("bidirectional", 1, ("B", "h0")), ("forward", 0, ("B", "h0", "P")),
    ("forward", 0, ("B", "clip"))])
def test_lstm_node_runs_one_fused_layer_per_direction(direction, layout, extras, monkeypatch):
    """An ONNX LSTM of the default activations without clip, peepholes or sequence lengths runs
    each direction as one ``lstm_layer`` (gates reordered from ONNX's i, o, f, c); the others run
    the step loop. Both match onnx's reference evaluator, forward and each output."""
    from onnx.reference import ReferenceEvaluator

    from ember.onnx.importer import ops_rnn
    T, B, I, H = 5, 3, 4, 6
    nd = 2 if direction == "bidirectional" else 1
    r = np.random.default_rng(3)
    x_shape = (B, T, I) if layout else (T, B, I)
    feeds = {"X": r.standard_normal(x_shape).astype(np.float32)}
    inits = {"W": r.standard_normal((nd, 4 * H, I)).astype(np.float32) * 0.5,
             "R": r.standard_normal((nd, 4 * H, H)).astype(np.float32) * 0.5}
    names = ["X", "W", "R", "", "", "", "", ""]
    if "B" in extras:
        inits["B"] = r.standard_normal((nd, 8 * H)).astype(np.float32) * 0.5
        names[3] = "B"
    if "h0" in extras:
        s = (B, nd, H) if layout else (nd, B, H)
        inits["h0"] = r.standard_normal(s).astype(np.float32)
        inits["c0"] = r.standard_normal(s).astype(np.float32)
        names[5], names[6] = "h0", "c0"
    if "P" in extras:
        inits["P"] = r.standard_normal((nd, 3 * H)).astype(np.float32) * 0.5
        names[7] = "P"
    while names[-1] == "":
        names.pop()
    attrs = dict(hidden_size=H, direction=direction, layout=layout)
    if "clip" in extras:
        attrs["clip"] = 1e9
    node = helper.make_node("LSTM", names, ["Y", "Y_h", "Y_c"], **attrs)
    out_shapes = [None, None, None]
    graph = helper.make_graph(
        [node], "lstm", [helper.make_tensor_value_info("X", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
         for n, s in zip(("Y", "Y_h", "Y_c"), out_shapes)],
        [onnx.numpy_helper.from_array(v, k) for k, v in inits.items()])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    want = ReferenceEvaluator(proto).run(None, feeds)
    calls = []
    real = ops_rnn._lstm_layers
    monkeypatch.setattr(ops_rnn, "_lstm_layers", lambda *a: calls.append(1) or real(*a))
    got = ember.onnx.load_model(proto)(ember.tensor(feeds["X"]))
    assert bool(calls) == (not {"P", "clip"} & set(extras))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.detach().numpy(), w, rtol=1e-5, atol=1e-5)

