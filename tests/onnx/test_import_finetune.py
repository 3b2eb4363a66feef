"""Fine-tuning imported models: a CNN and an LSTM exported by torch.onnx.export load into ember,
their gradients match torch's on the same weights, they train, and the trained model re-exports
and runs in onnxruntime with ember's outputs. Subgraph initializers are trainable state."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

import ember  # noqa: E402
import ember.onnx  # noqa: E402
from ember import nn  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _vi(name, shape, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


def _loop_model():
    """h <- h * body.w + x, three times (body.w an initializer of the Loop body)."""
    body = helper.make_graph(
        [helper.make_node("Mul", ["h_in", "body.w"], ["hm"]),
         helper.make_node("Add", ["hm", "x"], ["h_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body", [_vi("i", [], TensorProto.INT64), _vi("cond_in", [], TensorProto.BOOL),
                 _vi("h_in", [3])],
        [_vi("cond_out", [], TensorProto.BOOL), _vi("h_out", [3])],
        [numpy_helper.from_array(np.array([0.5, 2.0, -1.0], np.float32), "body.w")])
    g = helper.make_graph([helper.make_node("Loop", ["n", "", "h0"], ["h"], body=body)], "g",
                          [_vi("x", [3]), _vi("h0", [3])], [_vi("h", [3])],
                          [numpy_helper.from_array(np.array(3, np.int64), "n")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_subgraph_initializers_are_trainable_state():
    mod = ember.onnx.load_model(_loop_model())
    assert set(mod.state_dict()) == {"n", "body.w"} and mod.onnx_names["body.w"] == "body.w"
    w = mod.get_parameter("body.w")
    assert isinstance(w, nn.Parameter)
    x, h0 = ember.tensor([1.0, 1.0, 1.0]), ember.tensor([1.0, 2.0, 3.0])
    mod(x, h0).sum().backward()
    # h3 = w^3 h0 + (w^2 + w + 1) x: dh3/dw = 3 w^2 h0 + (2 w + 1) x
    wn = np.array([0.5, 2.0, -1.0])
    np.testing.assert_allclose(w.grad.numpy(), 3 * wn ** 2 * [1, 2, 3] + 2 * wn + 1, rtol=1e-6)
    # a loaded state dict reaches the body
    mod.load_state_dict({"n": ember.tensor(np.array(3)), "body.w": ember.zeros(3)})
    with ember.no_grad():
        assert mod(x, h0).tolist() == [1.0, 1.0, 1.0]
