"""Importers of the neural-network ONNX ops (ember/onnx/importer/ops_nn.py) against onnxruntime
and the ONNX operator definitions."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import ember  # noqa: E402
import ember.onnx  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402


def _lrn_model(shape, **attrs):
    node = helper.make_node("LRN", ["x"], ["y"], **attrs)
    g = helper.make_graph([node], "lrn", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                        list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def _lrn_spec(x, size, alpha=1e-4, beta=0.75, bias=1.0):
    """The ONNX definition, channel by channel in float64: the window of channel c runs from
    c - floor((size-1)/2) to c + ceil((size-1)/2)."""
    x = x.astype(np.float64)
    c = x.shape[1]
    y = np.empty_like(x)
    for i in range(c):
        lo, hi = max(0, i - (size - 1) // 2), min(c - 1, i + -(-(size - 1) // 2))
        s = (x[:, lo:hi + 1] ** 2).sum(axis=1)
        y[:, i] = x[:, i] / (bias + alpha / size * s) ** beta
    return y


@pytest.mark.parametrize("shape,size,alpha,beta,bias", [
    ((1, 7, 5, 6), 5, 1e-4, 0.75, 1.0),       # the zoo's Inception v1 setting
    ((2, 6, 4, 3), 4, 0.3, 0.75, 2.0),        # even size: the window is not centred
    ((2, 3, 4, 4), 6, 0.5, 0.75, 1.0),        # window wider than the channels
    ((1, 5, 9), 3, 2e-2, 0.5, 2.0),           # rank 3, another beta
    ((1, 4, 3, 2, 2), 2, 0.7, 1.3, 0.5),      # rank 5
    ((2, 8), 1, 0.9, 0.75, 1.5),              # rank 2, size 1
])
def test_lrn_matches_onnxruntime_and_the_definition(shape, size, alpha, beta, bias):
    x = (np.random.default_rng(size).standard_normal(shape) * 3).astype(np.float32)
    model = _lrn_model(shape, size=size, alpha=alpha, beta=beta, bias=bias)
    got = ember.onnx.load_model(model.SerializeToString())(ember.tensor(x)).numpy()
    want = _lrn_spec(x, size, alpha, beta, bias)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)
    if size % 2 and len(shape) == 4:   # onnxruntime: odd sizes, rank 4 only
        sess = ort.InferenceSession(model.SerializeToString(),
                                    providers=["CPUExecutionProvider"])
        np.testing.assert_allclose(got, sess.run(None, {"x": x})[0], rtol=2e-6, atol=1e-6)


def test_lrn_traced_equals_eager_and_gradient_matches_torch():
    torch = pytest.importorskip("torch")
    import ember.jit
    shape = (1, 6, 4, 5)
    x = (np.random.default_rng(3).standard_normal(shape) * 2).astype(np.float32)
    m = ember.onnx.load_model(_lrn_model(shape, size=5, alpha=0.1, beta=0.75, bias=1.0)
                              .SerializeToString())
    xt = ember.tensor(x)
    with ember.no_grad():
        opt = ember.jit.optimize(ember.jit.trace(m, (xt,)))
        np.testing.assert_allclose(opt(xt).numpy(), m(xt).numpy(), rtol=1e-6, atol=1e-7)
    # odd size: ONNX's window is torch's, so the gradients compare in float64
    x64 = x.astype(np.float64)
    xe = ember.tensor(x64, requires_grad=True)
    from ember.onnx.importer.ops_nn import lrn
    y = lrn({"size": 5, "alpha": 0.1, "beta": 0.75, "bias": 1.0}, xe)
    g = np.random.default_rng(4).standard_normal(shape)
    y.backward(ember.tensor(g))
    xt64 = torch.tensor(x64, requires_grad=True)
    yt = torch.nn.functional.local_response_norm(xt64, 5, alpha=0.1, beta=0.75, k=1.0)
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(xe.grad.numpy(), xt64.grad.numpy(), rtol=1e-10, atol=1e-12)


def _bn_relu_model(c, after):
    """``after`` (Relu or Conv) -> BatchNormalization -> Relu, with generated statistics."""
    from onnx import numpy_helper
    rng = np.random.default_rng(c)
    inits = [numpy_helper.from_array(v.astype(np.float32), n) for n, v in (
        ("scale", rng.standard_normal(c)), ("bias", rng.standard_normal(c)),
        ("mean", rng.standard_normal(c)), ("var", rng.random(c) + 0.2),
        ("w", rng.standard_normal((c, c, 1, 1)) * 0.3))]
    first = (helper.make_node("Conv", ["x", "w"], ["h"]) if after == "Conv" else
             helper.make_node("Relu", ["x"], ["h"]))
    nodes = [first, helper.make_node("BatchNormalization", ["h", "scale", "bias", "mean", "var"],
                                     ["n"], epsilon=1e-3),
             helper.make_node("Relu", ["n"], ["y"])]
    g = helper.make_graph(nodes, "bn", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                      [2, c, 5, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)])


@pytest.mark.parametrize("after", ["Relu", "Conv"])
def test_batch_norm_matches_onnxruntime_traced_and_eager(after):
    import ember.jit
    model = _bn_relu_model(6, after)
    x = np.random.default_rng(1).standard_normal((2, 6, 5, 4)).astype(np.float32)
    m = ember.onnx.load_model(model.SerializeToString())
    xt = ember.tensor(x)
    with ember.no_grad():
        got = m(xt).numpy()
        opt = ember.jit.optimize(ember.jit.trace(m, (xt,)))
        np.testing.assert_allclose(opt(xt).numpy(), got, rtol=1e-6, atol=1e-6)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(got, sess.run(None, {"x": x})[0], rtol=1e-5, atol=1e-6)


def test_batch_norm_gradients_match_torch_and_spare_the_statistics():
    """Fine-tuning an imported model: x, scale and bias get torch's eval-mode gradients, the
    running mean and variance none."""
    torch = pytest.importorskip("torch")
    from ember.onnx.importer.ops_nn import batch_norm
    rng = np.random.default_rng(2)
    x, scale, bias, mean = (rng.standard_normal(s) for s in ((2, 3, 4, 2), 3, 3, 3))
    var = rng.random(3) + 0.2
    g = rng.standard_normal((2, 3, 4, 2))
    e = [ember.tensor(v, requires_grad=True) for v in (x, scale, bias, mean, var)]
    y = batch_norm({"training_mode": 0, "epsilon": 1e-3, "momentum": 0.9, "_src": "Relu"}, *e)
    y.backward(ember.tensor(g))
    t = [torch.tensor(v, requires_grad=i < 3) for i, v in enumerate((x, scale, bias, mean, var))]
    yt = torch.nn.functional.batch_norm(t[0], t[3], t[4], t[1], t[2], training=False, eps=1e-3)
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-12, atol=1e-13)
    for a, b in zip(e[:3], t[:3]):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-12)
    assert e[3].grad is None and e[4].grad is None


@pytest.mark.parametrize("attrs,c_shape", [
    ({"transB": 1}, (4,)),               # nn.Linear as exporters write it: F.linear
    ({"transB": 1}, None),               # no bias: F.linear
    ({"transB": 1}, (1, 4)),             # a C of another shape: the general form
    ({"transB": 1, "alpha": 0.5}, (4,)),
    ({"transB": 1, "beta": 2.0}, (4,)),
    ({}, (4,)),                          # w not transposed
    ({"transA": 1, "transB": 1}, (3, 4)),
])
def test_gemm_forms_match_the_reference(attrs, c_shape):
    from tests.onnx.importer.reference import same_as_reference
    rng = np.random.default_rng(5)
    x = rng.standard_normal((5, 3) if attrs.get("transA") else (3, 5)).astype(np.float32)
    w = rng.standard_normal((4, 5) if attrs.get("transB") else (5, 4)).astype(np.float32)
    feeds = {"x": x, "w": w}
    if c_shape is not None:
        feeds["c"] = rng.standard_normal(c_shape).astype(np.float32)
    node = helper.make_node("Gemm", list(feeds), ["y"], **attrs)
    same_as_reference([node], feeds, ["y"], rtol=1e-5, atol=1e-6)


def test_gemm_of_a_linear_layer_traces_as_linear():
    """An exported ``nn.Linear`` (Gemm, transB=1, a bias per column) imports as ``F.linear``:
    an inference plan takes it as a linear step, as the model traced by ember."""
    import ember.jit
    import ember.nn as nn
    import io
    lin = nn.Linear(6, 3)
    x = ember.randn(2, 6)
    buf = io.BytesIO()
    ember.onnx.export(lin, (x,), buf)
    imported = ember.onnx.load_model(buf.getvalue())
    traced = ember.jit.trace(imported, (x,))
    kinds = [n.kind for n in traced.graph.nodes]
    assert "linear" in kinds and "matmul" not in kinds
    with ember.no_grad():
        np.testing.assert_allclose(imported(x).numpy(), lin(x).numpy(), rtol=1e-6, atol=1e-6)
