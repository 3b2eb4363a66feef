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


def test_square_subsequent_mask_in_every_dtype():
    """``generate_square_subsequent_mask(T, dtype=torch.bfloat16)`` for bf16 decoders; the
    default dtype when none is given."""
    for dt in ("bfloat16", "float16", "float64"):
        m = nn.Transformer.generate_square_subsequent_mask(3, dtype=getattr(ember, dt))
        tm = torch.nn.Transformer.generate_square_subsequent_mask(3, dtype=getattr(torch, dt))
        assert m.dtype == getattr(ember, dt) and m.float().tolist() == tm.float().tolist()
    ember.set_default_dtype(ember.float64)
    try:
        assert nn.Transformer.generate_square_subsequent_mask(2).dtype == ember.float64
    finally:
        ember.set_default_dtype(ember.float32)


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


# ---------------------------------------------------------------- torch's inference fast paths
def _pair(make):
    """``make(ns)`` built with torch.nn and ember.nn, ember's loaded with torch's weights."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tm, em = make(torch.nn), make(nn)
    _load_from_torch(em, tm)
    return em, tm


def _compare(em, tm, *inputs, train=False, grad=False, fast=True, **masks):
    """Both modules' first output on ``inputs`` (numpy) with ``masks`` (numpy), NaN where
    torch has NaN; ``grad``: run with grad enabled (parameters require it)."""
    em.train(train)
    tm.train(train)
    targs = [torch.tensor(a) for a in inputs]
    eargs = [ember.tensor(a) for a in inputs]
    if len(targs) == 1 and isinstance(tm, torch.nn.MultiheadAttention):
        targs, eargs = targs * 3, eargs * 3   # self-attention: query is key is value
    tkw = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in masks.items()}
    ekw = {k: ember.tensor(v) if isinstance(v, np.ndarray) else v for k, v in masks.items()}
    torch.backends.mha.set_fastpath_enabled(fast)
    ember.backends.mha.set_fastpath_enabled(fast)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch.set_grad_enabled(grad):
                want = tm(*targs, **tkw)
            with ember.set_grad_enabled(grad) if grad else ember.no_grad():
                got = em(*eargs, **ekw)
    finally:
        torch.backends.mha.set_fastpath_enabled(True)
        ember.backends.mha.set_fastpath_enabled(True)
    want, got = (o[0] if isinstance(o, tuple) else o for o in (want, got))
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), atol=2e-5)
    return got.detach().numpy()


def _encoder(norm=True, layers=2, **layer_kw):
    kw = dict(dropout=0.0, batch_first=True, **layer_kw)
    return lambda ns: ns.TransformerEncoder(
        ns.TransformerEncoderLayer(8, 2, 16, **kw), layers,
        norm=ns.LayerNorm(8) if norm else None)


LEFT = np.array([[False, False, False, True, True], [False] * 5, [True] * 5])
X = np.random.RandomState(0).randn(3, 5, 8).astype("float32")


@pytest.mark.parametrize("norm", [False, True])
def test_encoder_nested_path_zeroes_padded_rows_as_torch(norm):
    em, tm = _pair(_encoder(norm))
    assert em.enable_nested_tensor is em.use_nested_tensor is tm.use_nested_tensor is True
    out = _compare(em, tm, X, src_key_padding_mask=LEFT)
    if not norm:
        assert not out[LEFT].any() and out[~LEFT].all()


@pytest.mark.parametrize("case", ["train", "grad", "mask", "not_left_aligned", "unbatched",
                                  "fastpath_off", "no_padding_mask", "disabled"])
def test_encoder_computes_padded_rows_where_torch_does(case):
    em, tm = _pair(_encoder(False) if case != "disabled" else
                   lambda ns: ns.TransformerEncoder(ns.TransformerEncoderLayer(
                       8, 2, 16, dropout=0.0, batch_first=True), 2,
                       enable_nested_tensor=False))
    kw, x, args = dict(src_key_padding_mask=LEFT[:2]), X[:2], {}
    if case == "mask":
        kw["mask"] = np.zeros((5, 5), bool)
    elif case == "not_left_aligned":
        kw["src_key_padding_mask"] = LEFT[:2, ::-1].copy()
    elif case == "unbatched":
        x, kw = X[0], dict(src_key_padding_mask=LEFT[0])
    elif case == "no_padding_mask":
        kw = {}
    args = dict(train=case == "train", grad=case == "grad", fast=case != "fastpath_off")
    out = _compare(em, tm, x, **args, **kw)
    assert out.all()


def test_encoder_without_mask_check_keeps_the_first_tokens_as_torch():
    em, tm = _pair(lambda ns: ns.TransformerEncoder(ns.TransformerEncoderLayer(
        8, 2, 16, dropout=0.0, batch_first=True), 1, mask_check=False))
    mask = np.array([[True, False, False, True, False], [False] * 4 + [True], [True] * 5])
    out = _compare(em, tm, X, src_key_padding_mask=mask)
    assert not out[0, 3:].any() and out[0, :3].all()


def test_encoder_float_padding_mask_pads_where_nonzero_as_torch():
    em, tm = _pair(_encoder(False))
    mask = np.zeros((3, 5), "float32")
    mask[0, 3:] = 0.5
    _compare(em, tm, X, src_key_padding_mask=mask)


def _odd_activation(ns):
    return ns.functional.silu


@pytest.mark.parametrize("layer_kw,why", [
    ({}, "encoder_layer.self_attn.batch_first was not True"),
    ({"batch_first": True, "norm_first": True}, "encoder_layer.norm_first was True"),
    ({"batch_first": True, "bias": False}, "encoder_layer.self_attn was passed bias=False"),
    ({"batch_first": True, "activation": _odd_activation},
     "encoder_layer.activation_relu_or_gelu was not True"),
    ({"batch_first": True, "nhead": 1}, "encoder_layer.self_attn.num_heads is odd"),
    ({"batch_first": True, "eps2": 1e-6},
     "encoder_layer.norm1.eps was not equal to encoder_layer.norm2.eps"),
    ({"batch_first": True, "activation": "gelu"}, None),
])
def test_encoder_construction_warns_and_runs_as_torch(layer_kw, why):
    layer_kw = dict(layer_kw)
    nhead, eps2 = layer_kw.pop("nhead", 2), layer_kw.pop("eps2", None)
    act = layer_kw.pop("activation", "relu")

    def make(ns):
        layer = ns.TransformerEncoderLayer(8, nhead, 16, dropout=0.0,
                                           activation=act(ns) if callable(act) else act,
                                           **layer_kw)
        if eps2 is not None:
            layer.norm2.eps = eps2
        return layer

    for ns in (torch.nn, nn):
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            enc = ns.TransformerEncoder(make(ns), 2)
        msgs = [str(w.message) for w in rec if "nested" in str(w.message)]
        assert msgs == ([] if why is None else [
            f"enable_nested_tensor is True, but self.use_nested_tensor is False because {why}"
            + ("(use batch_first for better inference performance)" if "batch_first" in why
               else "")])
        assert enc.use_nested_tensor is (why is None) and enc.enable_nested_tensor is True
        assert rec[0].filename == __file__ if rec else True
    em, tm = _pair(lambda ns: ns.TransformerEncoder(make(ns), 2))
    x = X[:2] if layer_kw.get("batch_first") else X[:2].transpose(1, 0, 2).copy()
    _compare(em, tm, x, src_key_padding_mask=LEFT[:2])


def test_encoder_of_a_layer_subclass_is_nested_as_torch():
    class T(torch.nn.TransformerEncoderLayer):
        pass

    class E(nn.TransformerEncoderLayer):
        pass

    em, tm = _pair(lambda ns: ns.TransformerEncoder(
        (T if ns is torch.nn else E)(8, 2, 16, dropout=0.0, batch_first=True), 1))
    out = _compare(em, tm, X, src_key_padding_mask=LEFT)
    assert not out[LEFT].any()


@pytest.mark.parametrize("batch_first", [False, True])
def test_transformer_encoder_nested_as_torch(batch_first):
    kw = dict(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=1,
              dim_feedforward=16, dropout=0.0, batch_first=batch_first)
    for ns in (torch.nn, nn):
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            m = ns.Transformer(**kw)
        assert bool([w for w in rec if "nested" in str(w.message)]) is not batch_first
        assert m.encoder.use_nested_tensor is batch_first
    em, tm = _pair(lambda ns: ns.Transformer(**kw))
    # no fully padded sequence: the decoder's cross-attention would attend nothing
    src = X[:2] if batch_first else X[:2].transpose(1, 0, 2).copy()
    tgt = src[:, :4] if batch_first else src[:4]
    em.eval()
    tm.eval()
    with ember.no_grad(), torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pad = LEFT[:2]
        want = tm(torch.tensor(src), torch.tensor(tgt), src_key_padding_mask=torch.tensor(pad),
                  memory_key_padding_mask=torch.tensor(pad))
        got = em(ember.tensor(src), ember.tensor(tgt), src_key_padding_mask=ember.tensor(pad),
                 memory_key_padding_mask=ember.tensor(pad))
        np.testing.assert_allclose(got.numpy(), want.numpy(), atol=2e-5)
        want = tm.encoder(torch.tensor(src), src_key_padding_mask=torch.tensor(pad))
        got = em.encoder(ember.tensor(src), src_key_padding_mask=ember.tensor(pad))
        np.testing.assert_allclose(got.numpy(), want.numpy(), atol=2e-5)
        rows = (got.numpy() if batch_first else got.numpy().transpose(1, 0, 2))[pad]
        assert bool((rows == rows[0]).all()) is batch_first   # norm(0) at padded positions


FULL = np.array([[True] * 5, [False, False, True, True, True]])
CAUSAL = np.triu(np.ones((5, 5), bool), 1)
ROWS = CAUSAL.copy()
ROWS[0] = True   # query 0 attends no key


def _float(mask):
    return np.where(mask, -np.inf, 0).astype("float32")


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("masks", ["padding", "attn", "attn_float", "both"])
def test_encoder_layer_fast_path_nan_rows_as_torch(norm_first, masks):
    em, tm = _pair(lambda ns: ns.TransformerEncoderLayer(8, 2, 16, dropout=0.0,
                                                         batch_first=True,
                                                         norm_first=norm_first))
    def kw(rows, pad):
        return {"padding": dict(src_key_padding_mask=pad), "attn": dict(src_mask=rows),
                "attn_float": dict(src_mask=_float(rows)),
                "both": dict(src_mask=rows, src_key_padding_mask=pad)}[masks]
    assert np.isnan(_compare(em, tm, X[:2], **kw(ROWS, FULL))).any()
    # where every row attends a key, the fast path and the others agree
    for case in (dict(), dict(train=True), dict(grad=True), dict(fast=False)):
        _compare(em, tm, X[1:2], **case, **kw(CAUSAL, FULL[1:]))


def test_encoder_layer_hooks_or_unbatched_input_leave_the_fast_path_as_torch():
    em, tm = _pair(lambda ns: ns.TransformerEncoderLayer(8, 2, 16, dropout=0.0,
                                                         batch_first=True))
    kw = dict(src_mask=np.where(ROWS, -1e4, 0).astype("float32"))
    _compare(em, tm, X[0], **kw)
    em.linear1.register_forward_hook(lambda *a: None)
    tm.linear1.register_forward_hook(lambda *a: None)
    _compare(em, tm, X[:2], **kw)


def test_encoder_layer_fast_path_ignores_is_causal_as_torch():
    em, tm = _pair(lambda ns: ns.TransformerEncoderLayer(8, 2, 16, dropout=0.0,
                                                         batch_first=True))
    _compare(em, tm, X, is_causal=True)


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("case", ["fast", "float_mask", "train", "grad", "fastpath_off",
                                  "not_batch_first", "odd_heads", "bias_kv", "no_bias",
                                  "cross"])
def test_multihead_attention_fast_path_as_torch(case, need_weights):
    kw = dict(batch_first=case != "not_batch_first", bias=case != "no_bias",
              add_bias_kv=case == "bias_kv")
    em, tm = _pair(lambda ns: ns.MultiheadAttention(8, 1 if case == "odd_heads" else 2,
                                                    **kw))
    # a query row attending no key (ROWS[0]) where torch gives NaN; elsewhere (the slow path
    # without weights) torch gives 0 there, which ember does not (its multi_head_attention_forward
    # computes the softmax explicitly), so that row is left out
    dead = (case == "fast" or need_weights) and case != "bias_kv"   # bias_k: a key for all
    mask = ROWS if dead else CAUSAL
    if case == "float_mask":
        mask = _float(mask)
    x = X[:2] if kw["batch_first"] else X[:2].transpose(1, 0, 2).copy()
    inputs = (x,) if case != "cross" else (x, x.copy(), x.copy())
    out = _compare(em, tm, *inputs, attn_mask=mask, need_weights=need_weights,
                   train=case == "train", grad=case == "grad", fast=case != "fastpath_off")
    row = out[:, 0] if kw["batch_first"] else out[0]
    assert np.isnan(row).all() == dead
