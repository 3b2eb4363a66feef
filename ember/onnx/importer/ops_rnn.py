"""Recurrent ONNX ops (RNN, GRU, LSTM) as a step loop of ember ops, so autograd runs through them.
Directions forward / reverse / bidirectional, sequence_lens (steps past a sequence's length keep
its state and write zeros), initial states, LSTM peepholes, clip, layout 0 and 1. An LSTM of the
default activations without clip, peepholes or sequence lengths (what torch exports for
``nn.LSTM``) runs each direction as one ``lstm_layer`` op instead, as ``nn.LSTM`` does."""
import ember
import ember.nn.functional as F
from ember.autograd._generated import functions as G
from ember.onnx.importer.registry import importer

_ACT = {"Sigmoid": ember.sigmoid, "Tanh": ember.tanh, "Relu": ember.relu,
        "Softsign": F.softsign, "Softplus": F.softplus}
_ATTRS = {"activation_alpha": None, "activation_beta": None, "activations": None, "clip": None,
          "direction": "forward", "hidden_size": None, "layout": 0}


def _check(n_acts):
    def check(a, node):
        if a["direction"] not in ("forward", "reverse", "bidirectional"):
            return ("direction", f"= '{a['direction']}' is not supported")
        if a["activation_alpha"] or a["activation_beta"]:
            return ("activation_alpha" if a["activation_alpha"] else "activation_beta",
                    "is not supported (activations with parameters)")
        acts = a["activations"]
        if acts is not None:
            for s in acts:
                if s not in _ACT:
                    return ("activations", f"'{s}' is not supported (supported: {sorted(_ACT)})")
        if a.get("input_forget", 0):
            return ("input_forget", "= 1 is not supported")
        return None
    return check


def _acts(a, default, d):
    acts = a["activations"] or default * 2
    k = len(default)
    return [_ACT[s] for s in acts[d * k:(d + 1) * k]] if len(acts) >= (d + 1) * k else \
        [_ACT[s] for s in acts[:k]]


def _run(a, x, seq_lens, init_states, cell, ndir):
    """Run ``cell(d, x_t, states) -> states`` over time for each direction; return Y and the
    final states stacked as ONNX lays them out."""
    if a["layout"]:
        x = x.transpose(0, 1)
        init_states = [None if s is None else s.transpose(0, 1) for s in init_states]
    T, B = x.shape[0], x.shape[1]
    ys, finals = [], []
    for d in range(ndir):
        reverse = a["direction"] == "reverse" or d == 1
        states = [s[d] for s in init_states]
        out = [None] * T
        for t in (range(T - 1, -1, -1) if reverse else range(T)):
            new = cell(d, t, states)
            if seq_lens is not None:
                m = (seq_lens > t).reshape(B, 1)
                new = [ember.where(m, n, s) for n, s in zip(new, states)]
                out[t] = ember.where(m, new[0], ember.zeros_like(new[0]))
            else:
                out[t] = new[0]
            states = new
        ys.append(ember.stack(out, 0) if T else
                  ember.zeros(0, B, states[0].shape[-1], dtype=x.dtype))
        finals.append(states)
    y = ember.stack(ys, 1)                           # [T, dirs, B, H]
    fin = [ember.stack([f[i] for f in finals], 0) for i in range(len(finals[0]))]
    if a["layout"]:
        y = y.permute(2, 0, 1, 3)
        fin = [f.transpose(0, 1) for f in fin]
    return (y, *fin)


def _prep(a, x, w, seq_lens):
    ndir = 2 if a["direction"] == "bidirectional" else 1
    xs = x.transpose(0, 1) if a["layout"] else x
    xw = [ember.matmul(xs, w[d].t()) for d in range(ndir)]      # [T, B, gates*H]
    lens = None if seq_lens is None else seq_lens.to(ember.int64)
    return ndir, xw, lens


def _clip(a, v):
    return v if a["clip"] is None else ember.clamp(v, -a["clip"], a["clip"])


def _zeros_state(x, a, ndir, h):
    b = x.shape[0] if a["layout"] else x.shape[1]
    z = ember.zeros(ndir, b, h, dtype=x.dtype)
    return z.transpose(0, 1) if a["layout"] else z


@importer("RNN", since=7, attrs=_ATTRS, check=_check(1), max_outputs=2)
def rnn(a, x, w, r, b=None, seq_lens=None, h0=None):
    H = a["hidden_size"] or r.shape[-1]
    ndir, xw, lens = _prep(a, x, w, seq_lens)
    h0 = _zeros_state(x, a, ndir, H) if h0 is None else h0
    bias = [None if b is None else b[d, :H] + b[d, H:] for d in range(ndir)]

    def cell(d, t, states):
        f = _acts(a, ["Tanh"], d)[0]
        v = xw[d][t] + ember.matmul(states[0], r[d].t())
        if bias[d] is not None:
            v = v + bias[d]
        return [f(_clip(a, v))]
    return _run(a, x, lens, [h0], cell, ndir)


@importer("GRU", since=7, attrs=dict(_ATTRS, linear_before_reset=0), check=_check(2),
          max_outputs=2)
def gru(a, x, w, r, b=None, seq_lens=None, h0=None):
    H = a["hidden_size"] or r.shape[-1]
    ndir, xw, lens = _prep(a, x, w, seq_lens)
    h0 = _zeros_state(x, a, ndir, H) if h0 is None else h0
    lbr = a["linear_before_reset"]

    def cell(d, t, states):
        f, g = _acts(a, ["Sigmoid", "Tanh"], d)
        h = states[0]
        xv = xw[d][t]
        if b is not None:
            xv = xv + b[d, :3 * H]
        rb = b[d, 3 * H:] if b is not None else None
        rz = ember.matmul(h, r[d, :2 * H].t())
        if rb is not None:
            rz = rz + rb[:2 * H]
        z = f(_clip(a, xv[:, :H] + rz[:, :H]))
        rr = f(_clip(a, xv[:, H:2 * H] + rz[:, H:]))
        rh = r[d, 2 * H:].t()
        if lbr:
            hr = ember.matmul(h, rh)
            if rb is not None:
                hr = hr + rb[2 * H:]
            n = g(_clip(a, xv[:, 2 * H:] + rr * hr))
        else:
            hr = ember.matmul(rr * h, rh)
            if rb is not None:
                hr = hr + rb[2 * H:]
            n = g(_clip(a, xv[:, 2 * H:] + hr))
        return [(1 - z) * n + z * h]
    return _run(a, x, lens, [h0], cell, ndir)


def _torch_gates(v, H):
    """ONNX's LSTM gate blocks (i, o, f, c) along dim 0 in torch's order (i, f, g, o)."""
    return ember.cat([v[:H], v[2 * H:3 * H], v[3 * H:], v[H:2 * H]], 0)


def _lstm_layers(a, x, w, r, b, h0, c0, ndir, H):
    """The LSTM of the default activations, without clip, peepholes or sequence lengths: each
    direction one fused ``lstm_layer`` op (the whole time loop in one kernel, as ``nn.LSTM``
    runs), the gate blocks reordered to torch's."""
    if a["layout"]:
        x, h0, c0 = x.transpose(0, 1), h0.transpose(0, 1), c0.transpose(0, 1)
    ys, hs, cs = [], [], []
    for d in range(ndir):
        wd = _torch_gates(w[d], H)
        bd = None if b is None else _torch_gates(b[d, :4 * H] + b[d, 4 * H:], H)
        reverse = a["direction"] == "reverse" or d == 1
        y, h, c, _ = G.lstm_layer(F.linear(x, wd, bd), h0[d], c0[d], _torch_gates(r[d], H),
                                  reverse)
        ys.append(y)
        hs.append(h)
        cs.append(c)
    y, hn, cn = ember.stack(ys, 1), ember.stack(hs, 0), ember.stack(cs, 0)   # [T, dirs, B, H]
    if a["layout"]:
        return y.permute(2, 0, 1, 3), hn.transpose(0, 1), cn.transpose(0, 1)
    return y, hn, cn


@importer("LSTM", since=7, attrs=dict(_ATTRS, input_forget=0), check=_check(3), max_outputs=3)
def lstm(a, x, w, r, b=None, seq_lens=None, h0=None, c0=None, p=None):
    H = a["hidden_size"] or r.shape[-1]
    ndir = 2 if a["direction"] == "bidirectional" else 1
    acts = a["activations"]
    if p is None and seq_lens is None and a["clip"] is None and \
            (acts is None or list(acts) == ["Sigmoid", "Tanh", "Tanh"] * ndir):
        h0 = _zeros_state(x, a, ndir, H) if h0 is None else h0
        c0 = _zeros_state(x, a, ndir, H) if c0 is None else c0
        return _lstm_layers(a, x, w, r, b, h0, c0, ndir, H)
    ndir, xw, lens = _prep(a, x, w, seq_lens)
    h0 = _zeros_state(x, a, ndir, H) if h0 is None else h0
    c0 = _zeros_state(x, a, ndir, H) if c0 is None else c0
    bias = [None if b is None else b[d, :4 * H] + b[d, 4 * H:] for d in range(ndir)]

    def cell(d, t, states):
        f, g, hact = _acts(a, ["Sigmoid", "Tanh", "Tanh"], d)
        h, c = states
        v = xw[d][t] + ember.matmul(h, r[d].t())
        if bias[d] is not None:
            v = v + bias[d]
        vi, vo, vf, vc = v[:, :H], v[:, H:2 * H], v[:, 2 * H:3 * H], v[:, 3 * H:]
        if p is not None:
            vi = vi + p[d, :H] * c
            vf = vf + p[d, 2 * H:] * c
        i, fg, cc = f(_clip(a, vi)), f(_clip(a, vf)), g(_clip(a, vc))
        c_new = fg * c + i * cc
        if p is not None:
            vo = vo + p[d, H:2 * H] * c_new
        o = f(_clip(a, vo))
        return [o * hact(c_new), c_new]
    return _run(a, x, lens, [h0, c0], cell, ndir)
