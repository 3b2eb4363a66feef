"""op_db breadth ops: the complex-number accessors on ember's real dtypes."""
import numpy as np

from ember.onnx.registry import symbolic
from ember.onnx.symbolics._util import in_dtype, out_dtype


def _identity(g, node, x):
    return g.op("Identity", x)


for _name in ("conj", "resolve_conj", "resolve_neg", "real", "conj_physical"):
    symbolic(_name)(_identity)


@symbolic("angle")
def sym_angle(g, node, x):
    """pi where x < 0, else 0; a NaN input stays NaN."""
    dt, it = out_dtype(node), in_dtype(node)
    neg = g.op("Less", x, g.const(np.zeros((), it)))
    out = g.op("Where", neg, g.const(np.array(np.pi, dt)), g.const(np.zeros((), dt)))
    if np.dtype(it).kind == "f":
        out = g.op("Where", g.op("IsNaN", x), g.cast(x, dt), out)
    return out
