"""Control flow: If, Loop and Scan run their subgraphs eagerly (data-dependent trip counts and
branches are decided on the values that arrive). Subgraphs see the enclosing scope."""
import numpy as np

import ember
from ember.errors import EmberRuntimeError
from ember.onnx.importer._util import norm_axis, scalar
from ember.onnx.importer.registry import importer


@importer("If", since=1, attrs={"then_branch": None, "else_branch": None}, max_outputs=1 << 30)
def if_(a, cond):
    branch = a["then_branch"] if bool(scalar(cond)) else a["else_branch"]
    return tuple(branch(a["_env"]))


@importer("Loop", since=1, attrs={"body": None}, max_outputs=1 << 30)
def loop(a, m=None, cond=None, *state):
    body = a["body"]
    trips = None if m is None else int(scalar(m))
    go = True if cond is None else bool(scalar(cond))
    state = list(state)
    n_state = len(state)
    scans = None
    i = 0
    while go and (trips is None or i < trips):
        out = body(a["_env"], ember.tensor(np.array(i, np.int64)),
                   ember.tensor(np.array(go)), *state)
        go = bool(scalar(out[0]))
        state = list(out[1:1 + n_state])
        if scans is None:
            scans = [[] for _ in out[1 + n_state:]]
        for lst, v in zip(scans, out[1 + n_state:]):
            lst.append(v)
        i += 1
    n_scan = len(body.outputs) - 1 - n_state
    if scans is None:
        if n_scan:
            raise EmberRuntimeError("Loop ran zero iterations: the shape of its scan outputs "
                                    "is unknown")
        scans = []
    return tuple(state) + tuple(ember.stack(s, 0) for s in scans)


@importer("Scan", since=9, max_outputs=1 << 30,
          attrs={"body": None, "num_scan_inputs": 0, "scan_input_axes": None,
                 "scan_input_directions": None, "scan_output_axes": None,
                 "scan_output_directions": None})
def scan(a, *inputs):
    body, m = a["body"], a["num_scan_inputs"]
    n_state = len(inputs) - m
    state, xs = list(inputs[:n_state]), inputs[n_state:]
    in_axes = a["scan_input_axes"] or [0] * m
    in_dirs = a["scan_input_directions"] or [0] * m
    axes = [norm_axis(ax, x.dim()) for ax, x in zip(in_axes, xs)]
    T = xs[0].shape[axes[0]] if m else 0
    n_scan = len(body.outputs) - n_state
    outs = [[] for _ in range(n_scan)]
    for t in range(T):
        sl = [ember.select(x, ax, T - 1 - t if d else t) for x, ax, d in zip(xs, axes, in_dirs)]
        res = body(a["_env"], *state, *sl)
        state = list(res[:n_state])
        for lst, v in zip(outs, res[n_state:]):
            lst.append(v)
    out_axes = a["scan_output_axes"] or [0] * n_scan
    out_dirs = a["scan_output_directions"] or [0] * n_scan
    stacked = []
    for lst, ax, d in zip(outs, out_axes, out_dirs):
        if d:
            lst = lst[::-1]
        y = ember.stack(lst, 0)
        stacked.append(ember.movedim(y, 0, norm_axis(ax, y.dim())) if ax else y)
    return tuple(state) + tuple(stacked)


@importer("Scan", since=8, max_outputs=1 << 30,
          attrs={"body": None, "num_scan_inputs": 0, "directions": None})
def scan8(a, seq_lens, *inputs):
    if seq_lens is not None:
        raise EmberRuntimeError("Scan-8 with sequence_lens is not supported")
    # Scan-8 has a leading batch axis on every input and output: run Scan-9 per batch entry
    body, m = a["body"], a["num_scan_inputs"]
    n_state = len(inputs) - m
    a9 = {"body": body, "num_scan_inputs": m, "scan_input_axes": None,
          "scan_input_directions": a["directions"], "scan_output_axes": None,
          "scan_output_directions": None, "_env": a["_env"]}
    per = [scan(a9, *[x[b] for x in inputs]) for b in range(inputs[0].shape[0])]
    return tuple(ember.stack([p[i] for p in per], 0) for i in range(len(per[0])))
