"""MultiheadAttention and the Transformer layers (ember/nn/modules/transformer.py) against torch
with identical weights: the encoder layers and MultiheadAttention per layer case (outputs,
gradients, train and eval, float64), the whole nn.Transformer forward and backward, the decoder
layer alone and its errors, and MultiheadAttention's parameter layout."""
import warnings

import numpy as np
import pytest

import ember
import ember.nn as nn

from tests.nn.layer_cases import RNN_CASES, cases, check_against_torch, torch


PARAMS = cases(RNN_CASES, "transformer")


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("name,src,specs", PARAMS, ids=[c[0] for c in PARAMS])
def test_layer_matches_torch(name, src, specs, train):
    check_against_torch(src, specs, train)


def _load_from_torch(em, tm):
    tsd, esd = tm.state_dict(), em.state_dict()
    assert list(tsd) == list(esd)
    assert all(tuple(tsd[k].shape) == tuple(esd[k].shape) for k in tsd)
    em.load_state_dict({k: v.numpy() for k, v in tsd.items()})


@pytest.mark.parametrize("extra", [{}, {"batch_first": True, "norm_first": True,
                                        "activation": "gelu"}])
def test_transformer_matches_torch_forward_and_backward(extra):
    torch.manual_seed(0)
    kw = dict(d_model=16, nhead=4, num_encoder_layers=2, num_decoder_layers=2,
              dim_feedforward=32, dropout=0.0, **extra)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tm = torch.nn.Transformer(**kw)
    em = nn.Transformer(**kw)
    _load_from_torch(em, tm)
    rs = np.random.RandomState(1)
    S, T, N = 5, 4, 3
    shape = (lambda L: (N, L, 16)) if extra else (lambda L: (L, N, 16))
    src, tgt = rs.randn(*shape(S)).astype("float32"), rs.randn(*shape(T)).astype("float32")
    mask = nn.Transformer.generate_square_subsequent_mask(T)
    np.testing.assert_array_equal(
        mask.numpy(), torch.nn.Transformer.generate_square_subsequent_mask(T).numpy())
    kpm = np.zeros((N, S), bool)
    kpm[0, -2:] = True
    ts, tt = (torch.tensor(a, requires_grad=True) for a in (src, tgt))
    es, et = (ember.tensor(a, requires_grad=True) for a in (src, tgt))
    to = tm(ts, tt, tgt_mask=torch.tensor(mask.numpy()), src_key_padding_mask=torch.tensor(kpm),
            memory_key_padding_mask=torch.tensor(kpm))
    eo = em(es, et, tgt_mask=mask, src_key_padding_mask=ember.tensor(kpm),
            memory_key_padding_mask=ember.tensor(kpm))
    np.testing.assert_allclose(eo.detach().numpy(), to.detach().numpy(), atol=1e-5)
    (to ** 2).sum().backward()
    (eo ** 2).sum().backward()
    for a, b in [(es, ts), (et, tt)] + list(zip(em.parameters(), tm.parameters())):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), atol=1e-4, rtol=1e-4)


def test_decoder_layer_alone_and_its_errors():
    torch.manual_seed(1)
    tl = torch.nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0)
    el = nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0)
    _load_from_torch(el, tl)
    x, mem = np.random.RandomState(2).randn(2, 3, 4, 8).astype("float32")
    np.testing.assert_allclose(el(ember.tensor(x), ember.tensor(mem)).detach().numpy(),
                               tl(torch.tensor(x), torch.tensor(mem)).detach().numpy(),
                               atol=1e-5)
    dec = nn.TransformerDecoder(el, 2, norm=nn.LayerNorm(8))
    assert list(dec.state_dict()) == list(torch.nn.TransformerDecoder(
        tl, 2, norm=torch.nn.LayerNorm(8)).state_dict())
    with pytest.raises(RuntimeError, match="d_model"):
        nn.Transformer(8, 2, 1, 1, 16)(ember.zeros(3, 2, 8), ember.zeros(3, 2, 6))


@pytest.mark.parametrize("kdim", [None, 6])
def test_multihead_attention_layout_is_torchs(kdim):
    tm = torch.nn.MultiheadAttention(8, 2, kdim=kdim, vdim=kdim, add_bias_kv=True)
    em = nn.MultiheadAttention(8, 2, kdim=kdim, vdim=kdim, add_bias_kv=True)
    _load_from_torch(em, tm)
    assert em._qkv_same_embed_dim == tm._qkv_same_embed_dim == (kdim is None)
    assert type(em.out_proj).__name__ == "NonDynamicallyQuantizableLinear"
    assert isinstance(em.out_proj, nn.modules.linear.NonDynamicallyQuantizableLinear)
    assert isinstance(em.out_proj, nn.Linear)
    q = np.random.RandomState(3).randn(4, 2, 8).astype("float32")
    kv = np.random.RandomState(4).randn(5, 2, kdim or 8).astype("float32")
    to, tw = tm(torch.tensor(q), torch.tensor(kv), torch.tensor(kv))
    eo, ew = em(ember.tensor(q), ember.tensor(kv), ember.tensor(kv))
    np.testing.assert_allclose(eo.detach().numpy(), to.detach().numpy(), atol=1e-5)
    np.testing.assert_allclose(ew.detach().numpy(), tw.detach().numpy(), atol=1e-5)
