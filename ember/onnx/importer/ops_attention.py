"""Attention (opset 23+): 3-d or 4-d Q/K/V, grouped KV heads, past key/value caches, boolean or
additive masks, causal and sliding-window masks, softcap, nonpad_kv_seqlen, all
qk_matmul_output modes; built from ember ops, so it is differentiable."""
import numpy as np

import ember
from ember.onnx.importer._util import ints, onnx_np_dtype
from ember.onnx.importer.registry import importer


def _check(a, n):
    if a["qk_matmul_output_mode"] not in (0, 1, 2, 3):
        return ("qk_matmul_output_mode", f"= {a['qk_matmul_output_mode']} is not 0 to 3")
    return _check_precision(a, n)


def _check_precision(a, n):
    if a["softmax_precision"] is not None:
        from ember.onnx.importer.load import _EMBER_NP
        d = onnx_np_dtype(a["softmax_precision"])
        if d is None or d not in _EMBER_NP:
            return ("softmax_precision", "names a dtype ember does not have")
    return None


def _heads(x, n):
    b, s, h = x.shape
    return x.reshape(b, s, n, h // n).permute(0, 2, 1, 3)


def _neg_inf_where(allowed, dtype):
    return ember.tensor(np.where(allowed, 0.0, -np.inf).astype(dtype.numpy))


@importer("Attention", since=23, check=_check, max_outputs=4,
          attrs={"is_causal": 0, "kv_num_heads": None, "q_num_heads": None,
                 "qk_matmul_output_mode": 0, "scale": None, "softcap": 0.0,
                 "softmax_precision": None, "left_window_size": -1, "right_window_size": -1})
def attention(a, q, k, v, mask=None, past_k=None, past_v=None, nonpad=None):
    three = q.dim() == 3
    if three:
        q, k, v = _heads(q, a["q_num_heads"]), _heads(k, a["kv_num_heads"]), \
            _heads(v, a["kv_num_heads"])
    dt = q.dtype
    scale = a["scale"] if a["scale"] is not None else 1.0 / np.sqrt(q.shape[3])
    s = float(np.sqrt(scale))
    k = k if past_k is None else ember.cat([past_k, k], 2)
    v = v if past_v is None else ember.cat([past_v, v], 2)
    present_k, present_v = k, v
    ql, kl, b = q.shape[2], k.shape[2], q.shape[0]
    bias = ember.zeros(ql, kl, dtype=dt)
    if mask is not None and mask.shape[-1] < kl:
        pad_shape = tuple(mask.shape[:-1]) + (kl - mask.shape[-1],)
        fill = ember.zeros(*pad_shape, dtype=ember.bool) if mask.dtype == ember.bool else \
            ember.full(pad_shape, float("-inf"), dtype=mask.dtype)
        mask = ember.cat([mask, fill], -1)
    if mask is not None and mask.dtype == ember.bool:
        mask = ember.where(mask, ember.zeros((), dtype=dt), ember.full((), float("-inf"), dtype=dt))
    lens = None if nonpad is None else np.array(ints(nonpad))
    if past_k is None and lens is not None:
        offset = (lens - ql).reshape(-1, 1, 1)
    else:
        offset = past_k.shape[2] if past_k is not None else 0
    i = np.arange(ql).reshape(ql, 1)
    j = np.arange(kl).reshape(1, kl)
    diff = i + offset - j

    def _as4(allowed):
        return allowed.reshape(allowed.shape[0], 1, ql, kl) if allowed.ndim == 3 else allowed

    if a["is_causal"]:
        base = bias if mask is None else mask
        bias = base + _neg_inf_where(_as4(diff >= 0), dt)
    elif mask is not None:
        bias = bias + mask
    lw, rw = a["left_window_size"], a["right_window_size"]
    if lw >= 0 or rw >= 0:
        allowed = np.ones(diff.shape, bool)
        if lw >= 0:
            allowed &= diff <= lw
        if rw >= 0:
            allowed &= -diff <= rw
        bias = bias + _neg_inf_where(_as4(allowed), dt)
    if lens is not None:
        pm = (np.arange(kl) < lens[:, None]).reshape(b, 1, 1, kl)
        bias = bias + _neg_inf_where(pm, dt)
    hq, hk = q.shape[1], k.shape[1]
    if hq != hk and hq % hk == 0:
        k = k.repeat_interleave(hq // hk, dim=1)
        v = v.repeat_interleave(hq // hk, dim=1)
    qk = ember.matmul(q * s, k.transpose(-1, -2) * s)
    if a["softcap"] and a["softcap"] > 0:
        qk = ember.tanh(qk / a["softcap"]) * a["softcap"]
    qkb = qk + bias
    out_qk = qkb if a["qk_matmul_output_mode"] == 2 else qk
    x = qkb
    if a["softmax_precision"] is not None:
        from ember.onnx.importer._util import ember_dtype
        x = x.to(ember_dtype(onnx_np_dtype(a["softmax_precision"])))
    m = ember.amax(x, -1, keepdim=True)
    m = ember.where(ember.isneginf(m), ember.zeros_like(m), m)
    e = ember.exp(x - m)
    ssum = e.sum(-1, keepdim=True)
    sm = e / ember.where(ssum == 0, ember.ones_like(ssum), ssum)
    row_masked = ember.isneginf(ember.amax(bias, -1, keepdim=True))
    sm = ember.where(row_masked, ember.zeros_like(sm), sm)
    if a["qk_matmul_output_mode"] == 3:
        out_qk = sm
    out_qk, sm = out_qk.to(dt), sm.to(dt)
    y = ember.matmul(sm, v)
    if three:
        y = y.permute(0, 2, 1, 3)
        y = y.reshape(y.shape[0], y.shape[1], -1)
    return y, present_k, present_v, out_qk


_RULES = ("linear", "gated", "delta", "gated_delta")


def _check_linear(a, n):
    if a["update_rule"] not in _RULES:
        return ("update_rule", f"= '{a['update_rule']}' is not one of {_RULES}")
    if not a["q_num_heads"] or not a["kv_num_heads"] or a["q_num_heads"] % a["kv_num_heads"]:
        return ("q_num_heads", "must be a positive multiple of kv_num_heads")
    return None


@importer("LinearAttention", since=27, check=_check_linear, max_outputs=2,
          attrs={"chunk_size": None, "kv_num_heads": None, "q_num_heads": None, "scale": None,
                 "update_rule": "gated_delta"})
def linear_attention(a, q, k, v, past=None, decay=None, beta=None):
    """Recurrent linear attention: per step the state (B, H_kv, d_k, d_v) decays (gated),
    takes a delta-rule correction (delta), adds k v^T, and is read by q."""
    hq, hk = a["q_num_heads"], a["kv_num_heads"]
    rule = a["update_rule"]
    out_dt = q.dtype
    b, t, _ = q.shape
    f32 = ember.float32
    q4, k4, v4 = (_heads(x, h).to(f32) for x, h in ((q, hq), (k, hk), (v, hk)))
    dk, dv = q4.shape[-1], v4.shape[-1]
    if decay is not None:
        decay = (decay.reshape(b, t, hk, 1).permute(0, 2, 1, 3) if decay.shape[-1] == hk
                 else _heads(decay, hk)).to(f32)
    if beta is not None:
        beta = beta.reshape(b, t, beta.shape[-1], 1).permute(0, 2, 1, 3).to(f32)
    state = ember.zeros(b, hk, dk, dv, dtype=f32) if past is None else past.to(f32)
    state_dt = out_dt if past is None else past.dtype
    scale = a["scale"] if a["scale"] else 1.0 / np.sqrt(dk)
    outs = []
    for i in range(t):
        kt, vt = k4[:, :, i, :], v4[:, :, i, :]
        if rule in ("gated", "gated_delta"):
            state = state * ember.exp(decay[:, :, i, :]).unsqueeze(-1)
        if rule in ("delta", "gated_delta"):
            vt = beta[:, :, i, :] * (vt - ember.einsum("bhdm,bhd->bhm", state, kt))
        state = state + kt.unsqueeze(-1) * vt.unsqueeze(-2)
        read = state if hq == hk else state.repeat_interleave(hq // hk, dim=1)
        outs.append(scale * ember.einsum("bhd,bhdm->bhm", q4[:, :, i, :], read))
    y = ember.stack(outs, 2).permute(0, 2, 1, 3).reshape(b, t, hq * dv)
    return y.to(out_dt), state.to(state_dt)


@importer("FlexAttention", since=1, domain="ai.onnx.preview", check=_check_precision,
          attrs={"scale": None, "score_mod": None, "prob_mod": None, "softmax_precision": None})
def flex_attention(a, q, k, v):
    """Attention whose scores and probabilities pass through the optional one-input graphs
    ``score_mod`` and ``prob_mod``; float16 inputs take the softmax in float32."""
    from ember.onnx.importer._util import ember_dtype
    hq, hk = q.shape[1], k.shape[1]
    if hq != hk:
        k = k.repeat_interleave(hq // hk, dim=1)
        v = v.repeat_interleave(hq // hk, dim=1)
    scale = a["scale"] if a["scale"] is not None else 1.0 / np.sqrt(q.shape[3])
    s = float(np.sqrt(np.float32(scale)))
    scores = ember.matmul(q * s, k.transpose(-1, -2) * s)
    if a["softmax_precision"] is not None:
        cdt = ember_dtype(onnx_np_dtype(a["softmax_precision"]))
    else:
        cdt = ember.float32 if q.dtype == ember.float16 else q.dtype
    scores = scores.to(cdt)
    if a["score_mod"] is not None:
        scores = a["score_mod"](a["_env"], scores)[0].to(cdt)
    probs = ember.softmax(scores, -1)
    if a["prob_mod"] is not None:
        probs = a["prob_mod"](a["_env"], probs)[0].to(cdt)
    return ember.matmul(probs, v.to(cdt)).to(v.dtype)
