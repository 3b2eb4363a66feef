"""ONNX export of the recurrent step and layer ops (lstm_step, gru_step, lstm_layer) registered by
ember/onnx/symbolics/rnn.py: each op on its spec samples (checked by onnx.checker and run in
onnxruntime against ember at opsets 13, 17 and 21), and whole recurrent layers exported as ONNX
LSTM/GRU nodes with a dynamic sequence length."""
import io

import numpy as np
import pytest

import ember
import ember.onnx

from tests.onnx.symbolics.op_export import check_op_exports_and_matches, ort, params
from tests.onnx.test_models import _as_tuple, _flat, _make

PARAMS, IDS = params("rnn")


@pytest.mark.parametrize("op,opset", PARAMS, ids=IDS)
def test_op_exports_and_matches(op, opset):
    check_op_exports_and_matches(op, opset)


@pytest.mark.parametrize("name", ["lstm_lm", "gru", "bilstm"])
def test_recurrent_layers_export_as_onnx_rnn_nodes(name):
    model, factory, _ = _make(name)
    mp = ember.onnx.build_model(model, _as_tuple(factory.example(2)))
    ops = [n.op_type for n in mp.graph.node]
    want = "GRU" if name == "gru" else "LSTM"
    assert want in ops and "lstm_step" not in str(ops)
    if name == "bilstm":
        dirs = [a.s.decode() for n in mp.graph.node if n.op_type == "LSTM"
                for a in n.attribute if a.name == "direction"]
        assert sorted(dirs) == ["forward", "forward", "reverse", "reverse"]


def test_lstm_sequence_length_stays_dynamic():
    model, factory, _ = _make("lstm_lm")
    ex = factory.example(3)
    buf = io.BytesIO()
    ember.onnx.export(model, (ex,), buf, input_names=["tokens"],
                      dynamic_axes={"tokens": {0: "T", 1: "B"}})
    sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    tokens = ember.tensor(np.random.default_rng(9).integers(0, model.vocab, (5, 4)))
    got = sess.run(None, {"tokens": tokens.numpy()})
    with ember.no_grad():
        exp = _flat(model(tokens))
    np.testing.assert_allclose(got[0], exp[0].numpy(), rtol=1e-4, atol=1e-5)
    assert got[0].shape == (5, 4, model.vocab)
