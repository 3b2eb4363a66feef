"""RNN, LSTM, GRU and their cells (ember/nn/modules/rnn.py) against torch with identical weights:
forward outputs, input and parameter gradients and buffers, in train and eval modes (float64)."""
import numpy as np
import pytest

import ember

from tests.nn._parity import assert_close
from tests.nn.layer_cases import RNN_CASES, _build, cases, check_against_torch, torch


PARAMS = cases(RNN_CASES, "rnn")


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("name,src,specs", PARAMS, ids=[c[0] for c in PARAMS])
def test_layer_matches_torch(name, src, specs, train):
    check_against_torch(src, specs, train)


@pytest.mark.parametrize("mode", ["lstm", "gru", "rnn"])
def test_rnn_initial_state(mode):
    cls = {"lstm": "LSTM", "gru": "GRU", "rnn": "RNN"}[mode]
    em, tm = _build(f"nn.{cls}(3, 4, num_layers=2, bidirectional=True)", 1)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 2, 3))
    h0 = rng.standard_normal((4, 2, 4))
    c0 = rng.standard_normal((4, 2, 4))
    hx_e = (ember.tensor(h0), ember.tensor(c0)) if mode == "lstm" else ember.tensor(h0)
    hx_t = (torch.tensor(h0), torch.tensor(c0)) if mode == "lstm" else torch.tensor(h0)
    eo, eh = em(ember.tensor(x), hx_e)
    to, th = tm(torch.tensor(x), hx_t)
    assert_close(eo.detach().numpy(), to.detach().numpy())
    for a, b in zip(eh if mode == "lstm" else [eh], th if mode == "lstm" else [th]):
        assert_close(a.detach().numpy(), b.detach().numpy())


@pytest.mark.parametrize("mode,kw", [("RNN", {}), ("GRU", dict(bias=False)),
                                     ("LSTM", dict(num_layers=2, bidirectional=True,
                                                   proj_size=2))])
def test_flat_weights_as_torch_and_follow_parameters(mode, kw):
    e, t = getattr(ember.nn, mode)(3, 4, **kw), getattr(torch.nn, mode)(3, 4, **kw)
    assert e._flat_weights_names == t._flat_weights_names
    assert [tuple(w.shape) for w in e._flat_weights] == [tuple(w.shape) for w in t._flat_weights]
    for n, w in zip(e._flat_weights_names, e._flat_weights):
        assert w is getattr(e, n)
    new = ember.nn.Parameter(ember.zeros(*e.weight_hh_l0.shape))
    e.weight_hh_l0 = new
    assert e._flat_weights[1] is new
    e.double()
    assert all(w.dtype == ember.float64 for w in e._flat_weights)


def test_dropout_with_one_layer_warns_as_torch():
    import warnings
    for m in (torch, ember):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            m.nn.LSTM(2, 3, dropout=0.2)
            m.nn.GRU(2, 3, num_layers=2, dropout=0.2)
        assert len(seen) == 1 and "non-zero dropout expects num_layers greater than 1" in \
            str(seen[0].message)
