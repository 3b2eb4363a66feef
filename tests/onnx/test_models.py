"""Whole models: exported at opsets 13, 17 and 21 with a dynamic batch axis, checked by
onnx.checker (full) and shape inference, and run in onnxruntime at two batch sizes against
ember (within 1e-4)."""
import io

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import ember  # noqa: E402
import ember.onnx  # noqa: E402
from tests.jit import models as jit_models  # noqa: E402
from tests.onnx.models import NN_MODELS  # noqa: E402

OPSETS = (13, 17, 21)


def _as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


def _flat(out):
    if isinstance(out, ember.Tensor):
        return [out]
    res = []
    for o in out:
        res.extend(_flat(o))
    return res


class _JitModel:
    """Adapts the JIT test models (functional, Net stand-in) to the nn-model test protocol."""

    def __init__(self, name):
        self.model = jit_models.MODELS[name]()
        self.model.eval()
        self.batch_axis = 1 if name == "lstm_lm" else 0

    def example(self, batch):
        return jit_models.example(self.model, batch=batch, seed=batch)


def _make(name):
    if name in NN_MODELS:
        ember.manual_seed(0)
        m = NN_MODELS[name]().eval()
        return m, m, m.batch_axis
    w = _JitModel(name)
    return w.model, w, w.batch_axis


ALL = sorted(jit_models.MODELS) + sorted(NN_MODELS)


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("name", ALL)
def test_model_matches_onnxruntime(name, opset):
    model, factory, batch_axis = _make(name)
    ex = _as_tuple(factory.example(2))
    with ember.no_grad():
        n_out = len(_flat(model(*ex)))
    in_names = [f"input{i}" for i in range(len(ex))]
    out_names = [f"output{i}" for i in range(n_out)]
    # every input and output carries the batch on batch_axis except the LSTM states (axis 1)
    dyn = {n: {batch_axis if (i == 0 or batch_axis == 0 and name != "bilstm") else 1: "batch"}
           for i, n in enumerate(in_names)}
    buf = io.BytesIO()
    mp = ember.onnx.export(model, ex, buf, opset_version=opset, input_names=in_names,
                           output_names=out_names, dynamic_axes=dyn)
    onnx.checker.check_model(mp, full_check=True)
    inferred = onnx.shape_inference.infer_shapes(mp, strict_mode=True)
    assert len(inferred.graph.output) == n_out
    assert mp.graph.input[0].type.tensor_type.shape.dim[batch_axis].dim_param == "batch"
    sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    for batch in (2, 5):
        args = _as_tuple(factory.example(batch))
        with ember.no_grad():
            expected = [t.numpy() for t in _flat(model(*args))]
        got = sess.run(None, {n: a.numpy() for n, a in zip(in_names, args)})
        for i, (a, e) in enumerate(zip(got, expected)):
            assert a.shape == e.shape, f"output {i} at batch {batch}: {a.shape} vs {e.shape}"
            np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-4,
                                       err_msg=f"output {i} at batch {batch}")


def test_opset_changes_the_graph():
    """LayerNormalization from 17, Gelu from 20, ReduceMean axes as input from 18."""
    model, factory, _ = _make("transformer")
    ex = (factory.example(2),)

    def ops(v):
        return {n.op_type for n in ember.onnx.build_model(model, ex, opset_version=v).graph.node}
    assert "LayerNormalization" not in ops(13) and "LayerNormalization" in ops(17)
    assert "Gelu" not in ops(17) and "Gelu" in ops(20)
    x = ember.randn(3, 4)

    def mean_nodes(v):
        mp = ember.onnx.build_model(lambda t: t.mean(1), (x,), opset_version=v)
        return [n for n in mp.graph.node if n.op_type == "ReduceMean"]
    assert [len(n.input) for n in mean_nodes(17)] == [1]
    assert [len(n.input) for n in mean_nodes(18)] == [2]
    sums = [n for n in ember.onnx.build_model(lambda t: t.sum(1), (x,), opset_version=13)
            .graph.node if n.op_type == "ReduceSum"]
    assert [len(n.input) for n in sums] == [2]
