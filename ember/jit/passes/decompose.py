"""Decompose composite ops into spec ops so their pointwise tails can join fusion groups.

Runs in ``optimize``'s pipeline just before ``fuse`` (after batch-norm folding, which needs the
``linear`` bias slot intact). Two rewrites, each in place of the original node (same position,
same inputs, the final value keeps the original's name), numerically equal forward and backward:

* ``layer_norm(x, normalized_shape, weight, bias, eps)`` over the last ``k`` dims becomes::

      mu   = mean(x, dim=(-k..-1), keepdim=True)     # reduction
      xc   = sub(x, mu)                              # \\ fuse (one pass: centre and square)
      sq   = mul(xc, xc)                             # /
      var  = mean(sq, dim=(-k..-1), keepdim=True)    # reduction
      rstd = rsqrt(add(var, eps))                    # per-row, [..., 1, ...] shaped
      y    = add(mul(mul(xc, rstd), weight), bias)   # the tail: fuses with following pointwise ops

  For float32/float64 inputs whose weight/bias (when present) have the input's dtype, with at
  least ``MIN_LAYER_NORM_SIZE`` elements (below it fusion groups run op by op, so the nine ops
  would only replace one ``layer_norm`` kernel):
  the centre-and-square pair is always a fusible run of two, so every layer_norm gains at least
  one fused group, and the normalise/scale/shift tail joins any pointwise consumer (residual add,
  activation). ``normalized_shape`` only contributes its length, so traced sizes in it (``int(%n)``)
  need not be kept (their ``size`` nodes go to ``dce`` when nothing else reads them).
  Half-precision inputs are left alone (the composite op accumulates more precisely).
* ``linear(x, w, b)`` whose result is read by a fusible pointwise node of the same output shape
  becomes ``linear(x, w, None)`` + ``add(., b, alpha=1)`` (still one GEMM), so the bias add fuses
  with the activation. A ``linear`` with no such reader keeps its bias.
"""
import math

from ember.jit.ir import Value

__all__ = ["decompose", "FLOAT_DTYPES", "MIN_LAYER_NORM_SIZE"]

FLOAT_DTYPES = ("float32", "float64")
# The fused kernels' own threshold (``ember.jit.fused.MIN_FUSED_SIZE``, the engine's
# ``MIN_COMPILED_SIZE``): smaller layer_norms stay one node.
MIN_LAYER_NORM_SIZE = 1 << 14


def _has_fusible_reader(v):
    from ember.jit.passes.fuse import fusible
    return any(u.outputs and u.outputs[0].shape == v.shape and fusible(u) for u in v.users)


def _replace(graph, node, new_out):
    """Make ``node``'s single output's readers read ``new_out``, drop ``node``, keep the name."""
    old = node.outputs[0]
    old.replace_all_uses_with(new_out)
    graph.remove(node)
    graph._names.discard(new_out.name)
    new_out.name = old.name
    graph._names.add(old.name)


def _emit(graph, node, kind, args, attrs, dtype, shape):
    n = graph.create_node(kind, args, attrs, [(dtype, shape)])
    n.source = node.source
    graph.insert(n, before=node)
    return n.outputs[0]


def _layer_norm(graph, node):
    x = node.arg("input")
    w, b = node.arg("weight"), node.arg("bias")
    shape_arg = node.arg("normalized_shape")
    out = node.outputs[0]
    if len(node.outputs) != 1 or not isinstance(x, Value) or x.dtype.name not in FLOAT_DTYPES:
        return False
    if out.dtype != x.dtype or out.shape != x.shape or math.prod(x.shape) < MIN_LAYER_NORM_SIZE:
        return False
    for p in (w, b):
        if p is not None and (not isinstance(p, Value) or p.dtype != x.dtype):
            return False
    k = len(shape_arg) if isinstance(shape_arg, (tuple, list)) else 1
    nd = len(x.shape)
    if not 1 <= k <= nd:
        return False
    dims = tuple(range(-k, 0))
    red = x.shape[:nd - k] + (1,) * k
    dt, full = x.dtype, x.shape

    def op(kind, args, attrs, shape):
        return _emit(graph, node, kind, args, attrs, dt, shape)
    mean_attrs = {"dim": dims, "keepdim": True, "dtype": None}
    mu = op("mean", [x], dict(mean_attrs), red)
    xc = op("sub", [x, mu], {"alpha": 1}, full)
    sq = op("mul", [xc, xc], {}, full)
    var = op("mean", [sq], dict(mean_attrs), red)
    ve = op("add", [var, float(node.arg("eps"))], {"alpha": 1}, red)
    rstd = op("rsqrt", [ve], {}, red)
    y = op("mul", [xc, rstd], {}, full)
    if w is not None:
        y = op("mul", [y, w], {}, full)
    if b is not None:
        y = op("add", [y, b], {"alpha": 1}, full)
    _replace(graph, node, y)
    return True


def _linear(graph, node):
    x, w, b = node.arg("input"), node.arg("weight"), node.arg("bias")
    if len(node.outputs) != 1 or not isinstance(b, Value) or not isinstance(x, Value):
        return False
    out = node.outputs[0]
    if out.dtype.name not in FLOAT_DTYPES or b.dtype != out.dtype:
        return False
    if not _has_fusible_reader(out):
        return False
    gemm = graph.create_node("linear", [x, w, None], dict(node.attrs), [(out.dtype, out.shape)])
    gemm.source = node.source
    graph.insert(gemm, before=node)
    y = _emit(graph, node, "add", [gemm.outputs[0], b], {"alpha": 1}, out.dtype, out.shape)
    _replace(graph, node, y)
    return True


def decompose(graph):
    """Rewrite ``layer_norm`` and bias-``linear`` nodes as described above (in place)."""
    for node in list(graph.nodes):
        if node.graph is not graph:
            continue
        if node.kind == "layer_norm":
            _layer_norm(graph, node)
        elif node.kind == "linear":
            _linear(graph, node)
    return graph
