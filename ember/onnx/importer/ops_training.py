"""Optimizer ops of the ``ai.onnx.preview.training`` domain: Adagrad, Momentum, Adam, each
updating several tensors at once (inputs R, T, then the groups X..., G..., state...)."""
import ember
from ember.onnx.importer._util import scalar
from ember.onnx.importer.registry import importer

_DOMAIN = "ai.onnx.preview.training"
_MANY = 1 << 30


def _groups(data, k):
    n = (len(data) - 2) // k
    return float(scalar(data[0])), int(scalar(data[1])), \
        [data[2 + i * n: 2 + (i + 1) * n] for i in range(k)]


@importer("Adagrad", since=1, domain=_DOMAIN, max_outputs=_MANY,
          attrs={"decay_factor": 0.0, "epsilon": 0.0, "norm_coefficient": 0.0})
def adagrad(a, *data):
    r, t, (xs, gs, hs) = _groups(data, 3)
    lr = r / (1 + t * a["decay_factor"])
    out_x, out_h = [], []
    for x, g, h in zip(xs, gs, hs):
        g = a["norm_coefficient"] * x + g
        h_new = h + g * g
        out_x.append(x - lr * g / (ember.sqrt(h_new) + a["epsilon"]))
        out_h.append(h_new)
    return tuple(out_x + out_h)


@importer("Momentum", since=1, domain=_DOMAIN, max_outputs=_MANY,
          attrs={"alpha": 0.0, "beta": 0.0, "mode": "standard", "norm_coefficient": 0.0},
          check=lambda a, n: None if a["mode"] in ("standard", "nesterov") else
          ("mode", "must be 'standard' or 'nesterov'"))
def momentum(a, *data):
    r, t, (xs, gs, vs) = _groups(data, 3)
    beta = a["beta"] if t > 0 else 1.0
    out_x, out_v = [], []
    for x, g, v in zip(xs, gs, vs):
        g = a["norm_coefficient"] * x + g
        v_new = a["alpha"] * v + beta * g
        step = v_new if a["mode"] == "standard" else g + a["alpha"] * v_new
        out_x.append(x - r * step)
        out_v.append(v_new)
    return tuple(out_x + out_v)


@importer("Adam", since=1, domain=_DOMAIN, max_outputs=_MANY,
          attrs={"alpha": 0.9, "beta": 0.999, "epsilon": 0.0, "norm_coefficient": 0.0,
                 "norm_coefficient_post": 0.0})
def adam(a, *data):
    r, t, (xs, gs, vs, hs) = _groups(data, 4)
    al, be = a["alpha"], a["beta"]
    lr = r * (1 - be ** t) ** 0.5 / (1 - al ** t) if t > 0 else r
    out_x, out_v, out_h = [], [], []
    for x, g, v, h in zip(xs, gs, vs, hs):
        g = a["norm_coefficient"] * x + g
        v_new = al * v + (1 - al) * g
        h_new = be * h + (1 - be) * (g * g)
        x_new = x - lr * (v_new / (ember.sqrt(h_new) + a["epsilon"]))
        out_x.append((1 - a["norm_coefficient_post"]) * x_new)
        out_v.append(v_new)
        out_h.append(h_new)
    return tuple(out_x + out_v + out_h)
