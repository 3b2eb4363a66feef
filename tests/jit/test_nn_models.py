"""The same checks on ember.nn versions of the models (skipped while ember.nn lacks a layer)."""
import warnings

import numpy as np
import pytest

import ember
import ember.jit as jit

nn = pytest.importorskip("ember.nn")


def need(*names):
    missing = [n for n in names if not hasattr(nn, n)]
    if missing:
        pytest.skip(f"ember.nn has no {missing}")


def close(a, b):
    fa = a if isinstance(a, (tuple, list)) else (a,)
    fb = b if isinstance(b, (tuple, list)) else (b,)
    for x, y in zip(fa, fb):
        if isinstance(x, (tuple, list)):
            close(x, y)
        else:
            np.testing.assert_allclose(x._data, y._data, rtol=1e-4, atol=1e-5)


def mlp():
    need("Sequential", "Linear", "ReLU", "Flatten")
    return nn.Sequential(nn.Flatten(), nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 10)), (4, 20)


def lenet():
    need("Conv2d", "BatchNorm2d", "MaxPool2d", "BatchNorm1d")
    return nn.Sequential(nn.Conv2d(1, 6, 5), nn.BatchNorm2d(6), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(6, 16, 3), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(144, 40), nn.BatchNorm1d(40), nn.ReLU(),
                         nn.Linear(40, 10)), (4, 1, 20, 20)


class WordLM(nn.Module if hasattr(nn, "Module") else object):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.2)
        self.encoder = nn.Embedding(50, 16)
        self.rnn = nn.LSTM(16, 24, 2, dropout=0.2)
        self.decoder = nn.Linear(24, 50)

    def forward(self, tokens):
        emb = self.drop(self.encoder(tokens))
        # explicit initial state (as torch's word_language_model does with init_hidden(bsz)),
        # built with ember.zeros from the traced batch size so it follows the input
        bsz = tokens.shape[1]
        h0 = (ember.zeros(2, bsz, 24), ember.zeros(2, bsz, 24))
        out, hidden = self.rnn(emb, h0)
        return self.decoder(self.drop(out)), hidden


def lstm_lm():
    need("LSTM", "Embedding", "Dropout")
    return WordLM(), (5, 3)


def encoder_layer():
    need("TransformerEncoderLayer")
    return nn.TransformerEncoderLayer(16, 4, 32, dropout=0.1, batch_first=True), (2, 6, 16)


FACTORIES = {"mlp": mlp, "lenet": lenet, "lstm_lm": lstm_lm, "encoder_layer": encoder_layer}


def make_input(shape, batch_dim, batch, lm):
    shape = list(shape)
    if batch is not None:
        shape[batch_dim] = batch
    rng = np.random.default_rng(sum(shape))
    if lm:
        return ember.tensor(rng.integers(0, 50, shape))
    return ember.tensor(rng.standard_normal(shape).astype(np.float32))


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_nn_model(name):
    ember.manual_seed(0)
    model, shape = FACTORIES[name]()
    lm = name == "lstm_lm"
    bdim = 1 if lm else 0
    x = make_input(shape, bdim, None, lm)
    model.train()
    model(x)  # move BN running stats away from their init
    model.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error", jit.TracerWarning)
        t = jit.trace(model, (x,))
    assert isinstance(t, jit.TracedModule)
    sd = set(model.state_dict())
    assert all(v.name in sd for v in t.graph.inputs if v.role != "input")
    assert jit.parse(str(t.graph), t.graph.constants) == t.graph
    opt = jit.optimize(t)
    for batch in (None, 2):
        y = make_input(shape, bdim, batch, lm)
        with ember.no_grad():
            ref = model(y)
            close(t(y), ref)
            close(opt(y), ref)
    # backward through the trace equals eager
    y = make_input(shape, bdim, 3, lm)

    def grads(fn):
        model.zero_grad()
        out = fn(y)
        (out[0] if isinstance(out, tuple) else out).square().sum().backward()
        return [p.grad._data.copy() for p in model.parameters() if p.grad is not None]
    ge, gt = grads(model), grads(t)
    assert len(ge) == len(gt) and ge
    for a, b in zip(ge, gt):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
