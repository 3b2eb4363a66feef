"""Recurrent layers. ember runs an LSTM/GRU as one input projection (``linear``) plus one fused
``lstm_step``/``gru_step`` per time step; the trace is unrolled. ``fusion_plans`` finds each
such chain (one layer, one direction) and exports it as a single ONNX LSTM/GRU node (gates
reordered to ONNX's i,o,f,c / z,r,h; ``direction='reverse'`` for the backward half of a
bidirectional layer), so the sequence length and batch stay dynamic. A step that does not fit the
pattern is exported by its own decomposition below."""
import numpy as np

from ember.onnx.registry import symbolic
from ember.onnx.symbolics._util import SymbolicError

_LSTM_ORDER = (0, 3, 1, 2)   # torch i,f,g,o -> ONNX i,o,f,c
_GRU_ORDER = (1, 0, 2)       # torch r,z,n -> ONNX z,r,h


# ---------------------------------------------------------------------------------- steps
def _split(g, x, n, h):
    return g.op("Split", x, g.const(np.array([h] * n, np.int64)), axis=-1, outputs=n)


@symbolic("lstm_step")
def sym_lstm_step(g, node, gx, hx, cx, w_hh):
    if node.outputs[2].uses:
        raise SymbolicError("the lstm_step workspace output is not exportable")
    h = node.args[2].shape[-1]     # the cell's size (h may be projected to proj_size)
    gates = g.op("Add", gx, g.op("MatMul", hx, g.op("Transpose", w_hh, perm=[1, 0])))
    i, f, gg, o = _split(g, gates, 4, h)
    i, f, o = g.op("Sigmoid", i), g.op("Sigmoid", f), g.op("Sigmoid", o)
    gg = g.op("Tanh", gg)
    cy = g.op("Add", g.op("Mul", f, cx), g.op("Mul", i, gg))
    hy = g.op("Mul", o, g.op("Tanh", cy))
    return hy, cy, None


@symbolic("gru_step")
def sym_gru_step(g, node, gx, hx, w_hh, b_hh=None):
    if node.outputs[1].uses:
        raise SymbolicError("the gru_step workspace output is not exportable")
    h = node.args[1].shape[-1]
    gh = g.op("MatMul", hx, g.op("Transpose", w_hh, perm=[1, 0]))
    if b_hh is not None:
        gh = g.op("Add", gh, b_hh)
    xr, xz, xn = _split(g, gx, 3, h)
    hr, hz, hn = _split(g, gh, 3, h)
    r = g.op("Sigmoid", g.op("Add", xr, hr))
    z = g.op("Sigmoid", g.op("Add", xz, hz))
    n = g.op("Tanh", g.op("Add", xn, g.op("Mul", r, hn)))
    return g.op("Add", n, g.op("Mul", z, g.op("Sub", hx, n))), None


# ---------------------------------------------------------------------------------- fusion
def _time_slice(v):
    """(source Value, t) when ``v`` is unbind(S, 0)[t] or getitem(S, t); else None."""
    n = v.node
    if n is None:
        return None
    if n.kind == "unbind" and n.attrs.get("dim", 0) in (0, -len(n.args[0].shape)):
        return n.args[0], v.index
    if n.kind == "getitem":
        idx = n.attrs.get("indices")
        if isinstance(idx, tuple) and len(idx) == 1:
            idx = idx[0]
        if isinstance(idx, int) and not isinstance(idx, bool):
            src = n.args[0]
            return src, idx % src.shape[0] if src.shape else idx
    return None


def _is_zero(v, graph):
    """Does ``v`` hold zeros whatever the input (zeros op, all-zero constant, a slice of one)?"""
    n = v.node
    if n is None:
        return False
    if n.kind in ("zeros", "zeros_like"):
        return True
    if n.kind == "constant":
        arr = graph.constants.get(n.attrs.get("name"))
        return arr is not None and not np.any(arr)
    if n.kind in ("unbind", "getitem", "squeeze", "unsqueeze", "contiguous", "expand"):
        return isinstance(n.args[0], type(v)) and _is_zero(n.args[0], graph)
    return False


class RNNPlan:
    """One LSTM/GRU chain exported as one ONNX node."""

    def __init__(self, kind, steps, times, src, linear, stack, reverse):
        self.kind = kind
        self.steps = steps
        self.times = times
        self.src = src
        self.linear = linear
        self.stack = stack
        self.reverse = reverse
        self.absorbed = list(steps) + ([stack] if stack is not None else [])
        self.Y = None

    def visit(self, node, conv):
        if node is self.steps[-1]:
            self._emit(conv)
        elif node is self.stack:
            g = conv.g
            conv.bind(node, g.squeeze(self.Y, [1]))

    def _reorder(self, g, w, order, h):
        parts = g.op("Split", w, g.const(np.array([h] * len(order), np.int64)), axis=0,
                     outputs=len(order))
        return g.op("Concat", *[parts[i] for i in order], axis=0)

    def _emit(self, conv):
        g = conv.g
        graph = conv.graph
        first = self.steps[0]
        lin = self.linear
        x = conv.name(lin.args[0])
        w_ih = conv.name(lin.args[1])
        b = lin.args[2] if len(lin.args) > 2 else None
        w_hh_v = first.args[3] if self.kind == "lstm" else first.args[2]
        w_hh = conv.name(w_hh_v)
        hidden = first.args[1].shape[-1]
        dt = first.args[1].dtype
        n_g = 4 if self.kind == "lstm" else 3
        order = _LSTM_ORDER if self.kind == "lstm" else _GRU_ORDER
        W = g.unsqueeze(self._reorder(g, w_ih, order, hidden), [0])
        R = g.unsqueeze(self._reorder(g, w_hh, order, hidden), [0])
        zeros = g.const(np.zeros(n_g * hidden, dt))
        wb = self._reorder(g, conv.name(b), order, hidden) if b is not None else zeros
        if self.kind == "lstm":
            rb = zeros
        else:
            b_hh = first.args[3] if len(first.args) > 3 else None
            rb = self._reorder(g, conv.name(b_hh), order, hidden) if b_hh is not None else zeros
        B = None
        if b is not None or rb is not zeros:
            B = g.unsqueeze(g.op("Concat", wb, rb, axis=0), [0])
        h0v = first.args[1]
        init_h = None if _is_zero(h0v, graph) else g.unsqueeze(conv.name(h0v), [0])
        direction = "reverse" if self.reverse else "forward"
        if self.kind == "lstm":
            c0v = first.args[2]
            init_c = None if _is_zero(c0v, graph) else g.unsqueeze(conv.name(c0v), [0])
            Y, Yh, Yc = g.op("LSTM", x, W, R, B, None, init_h, init_c, outputs=3,
                             hidden_size=int(hidden), direction=direction)
        else:
            Y, Yh = g.op("GRU", x, W, R, B, None, init_h, outputs=2, hidden_size=int(hidden),
                         direction=direction, linear_before_reset=1)
            Yc = None
        self.Y = Y
        last = self.steps[-1]
        conv.bind(last, (g.squeeze(Yh, [0]),) + ((g.squeeze(Yc, [0]),) if Yc else ()))
        for s, t in zip(self.steps[:-1], self.times[:-1]):
            conv.env[id(s.outputs[0])] = _lazy_step(g, Y, t)


def _lazy_step(g, Y, t):
    def make():
        return g.squeeze(g.op("Gather", Y, g.const(np.array(t, np.int64)), axis=0), [0])
    return make


def _users(v):
    return v.users + ([None] if v.graph is not None and v in v.graph.outputs else [])


def _chain(graph, start, kind):
    hi, ci, wi = (1, 2, 3) if kind == "lstm" else (1, None, 2)
    steps = [start]
    while True:
        cur = steps[-1]
        nxt = [u for u in cur.outputs[0].users if u is not None and u.kind == cur.kind and
               u.args[hi] is cur.outputs[0]]
        if len(nxt) != 1:
            break
        n = nxt[0]
        if n.args[wi] is not start.args[wi]:
            break
        if kind == "lstm" and n.args[ci] is not cur.outputs[1]:
            break
        if kind == "gru" and (n.args[3] if len(n.args) > 3 else None) is not \
                (start.args[3] if len(start.args) > 3 else None):
            break
        steps.append(n)
    return steps


def _plan_for(graph, start, kind):
    steps = _chain(graph, start, kind)
    slices = [_time_slice(s.args[0]) for s in steps]
    if any(sl is None for sl in slices):
        return None
    src = slices[0][0]
    if any(sl[0] is not src for sl in slices):
        return None
    T = src.shape[0] if src.shape else 0
    times = [sl[1] for sl in slices]
    if len(steps) != T:
        return None
    if times == list(range(T)):
        reverse = False
    elif times == list(range(T - 1, -1, -1)):
        reverse = True
    else:
        return None
    lin = src.node
    if lin is None or lin.kind != "linear" or len(lin.args[0].shape) != 3 or \
            len(lin.args[1].shape) != 2:
        return None
    # the states of inner steps may only feed the next step and one stack of all outputs
    hys = [s.outputs[0] for s in steps]
    by_time = [None] * T
    for h, t in zip(hys, times):
        by_time[t] = h
    stack = None
    for u in hys[0].users:
        if u.kind == "stack" and u.args[0] == by_time and u.attrs.get("dim", 0) == 0 \
                and all(isinstance(a, type(hys[0])) for a in u.args[0]):
            if all(a is b for a, b in zip(u.args[0], by_time)):
                stack = u
    for s in steps[:-1]:
        if kind == "lstm" and [u for u in s.outputs[1].users if u not in steps]:
            return None
        if s.outputs[-1].uses:
            return None
        if s.outputs[0] in graph.outputs or (kind == "lstm" and s.outputs[1] in graph.outputs):
            return None
    if steps[-1].outputs[-1].uses:
        return None
    return RNNPlan(kind, steps, times, src, lin, stack, reverse)


def fusion_plans(graph, opset):
    """The LSTM/GRU chains of ``graph`` that export as single ONNX LSTM/GRU nodes."""
    plans = []
    for kind, op in (("lstm", "lstm_step"), ("gru", "gru_step")):
        for n in graph.nodes:
            if n.kind != op:
                continue
            prev = n.args[1].node
            if prev is not None and prev.kind == op and n.args[1] is prev.outputs[0]:
                continue  # not the first step of a chain
            p = _plan_for(graph, n, kind)
            if p is not None:
                plans.append(p)
    return plans


# ---------------------------------------------------------------------------------- layers
def _reorder_rows(g, w, order, h):
    parts = g.op("Split", w, g.const(np.array([h] * len(order), np.int64)), axis=0,
                 outputs=len(order))
    return g.op("Concat", *[parts[i] for i in order], axis=0)


@symbolic("lstm_layer")
def sym_lstm_layer(g, node, gx, h0, c0, w_hh, reverse=False):
    """A whole LSTM direction as one ONNX LSTM: when ``gx`` is ``linear(x, w_ih, b)`` the
    projection moves into the LSTM node (W = w_ih, B = b); otherwise X = gx with W a gate
    permutation matrix."""
    if node.outputs[3].uses:
        raise SymbolicError("the lstm_layer workspace output is not exportable")
    gxv = node.args[0]
    hidden = node.args[1].shape[-1]
    dt = gxv.dtype
    order = _LSTM_ORDER
    lin = gxv.node
    zeros = g.const(np.zeros(4 * hidden, dt))
    if lin is not None and lin.kind == "linear" and len(lin.args[0].shape) == 3 and \
            len(lin.args[1].shape) == 2 and g.value_name is not None:
        x = g.value_name(lin.args[0])
        W = _reorder_rows(g, g.value_name(lin.args[1]), order, hidden)
        b = lin.args[2] if len(lin.args) > 2 else None
        B = None if b is None else g.op(
            "Concat", _reorder_rows(g, g.value_name(b), order, hidden), zeros, axis=0)
    else:
        x = gx
        eye = np.eye(4 * hidden, dtype=dt)
        perm = np.concatenate([np.arange(i * hidden, (i + 1) * hidden) for i in order])
        W = g.const(eye[perm])
        B = None
    R = _reorder_rows(g, w_hh, order, hidden)
    graph = node.graph
    init_h = None if _is_zero(node.args[1], graph) else g.unsqueeze(h0, [0])
    init_c = None if _is_zero(node.args[2], graph) else g.unsqueeze(c0, [0])
    Y, Yh, Yc = g.op("LSTM", x, g.unsqueeze(W, [0]), g.unsqueeze(R, [0]),
                     None if B is None else g.unsqueeze(B, [0]), None, init_h, init_c,
                     outputs=3, hidden_size=int(hidden),
                     direction="reverse" if reverse else "forward")
    return g.squeeze(Y, [1]), g.squeeze(Yh, [0]), g.squeeze(Yc, [0]), None
