"""Fold an eval-mode batch norm into the convolution or linear layer that feeds it.

``y = native_batch_norm(conv2d(x, w, b), gamma, beta, mean, var, training=False, eps)`` becomes
``conv2d(x, w * s, (b - mean) * s + beta)`` with ``s = gamma / sqrt(var + eps)`` broadcast over
w's output channels. The new weight and bias are computed by nodes reading the parameters, so
they stay live; after ``freeze`` constant folding turns them into constants.
"""

from ember.jit.ir import Value

_PRODUCERS = {"conv2d": ("input", "weight", "bias"), "linear": ("input", "weight", "bias"),
              "conv1d": ("input", "weight", "bias")}


def _foldable(graph, bn):
    if bn.arg("training") is not False:
        return None
    if any(o.uses or o in graph.outputs for o in bn.outputs[1:]):
        return None
    x = bn.arg("input")
    if not isinstance(x, Value) or x.node is None or x.node.kind not in _PRODUCERS:
        return None
    prod = x.node
    if len(x.uses) != 1 or x in graph.outputs:
        return None
    rm, rv = bn.arg("running_mean"), bn.arg("running_var")
    if not isinstance(rm, Value) or not isinstance(rv, Value):
        return None
    w = prod.arg("weight")
    if not isinstance(w, Value) or w.shape[0] != rm.shape[0]:
        return None
    if prod.kind == "linear" and len(x.shape) != 2:
        return None  # BatchNorm1d over (N, C) only; (N, C, L) normalises dim 1 not the last
    return prod


def fold_batchnorm(graph):
    for bn in list(graph.nodes):
        if bn.graph is not graph or bn.kind != "native_batch_norm":
            continue
        prod = _foldable(graph, bn)
        if prod is None:
            continue
        w, b = prod.arg("weight"), prod.arg("bias")
        gamma, beta = bn.arg("weight"), bn.arg("bias")
        rm, rv = bn.arg("running_mean"), bn.arg("running_var")
        eps = float(bn.arg("eps"))
        dt = w.dtype
        c = (rm.shape[0],)

        def add(kind, args, attrs, shape):
            return graph.add_node(kind, args, attrs, [(dt, shape)], before=bn).output
        t = add("add", [rv, eps], {"alpha": 1}, c)
        s = add("rsqrt", [t], {}, c)
        if isinstance(gamma, Value):
            s = add("mul", [s, gamma], {}, c)
        sv = add("reshape", [s], {"shape": (-1,) + (1,) * (len(w.shape) - 1)},
                 (c[0],) + (1,) * (len(w.shape) - 1))
        w2 = add("mul", [w, sv], {}, w.shape)
        d = add("sub", [b, rm], {"alpha": 1}, c) if isinstance(b, Value) else add("neg", [rm], {}, c)
        b2 = add("mul", [d, s], {}, c)
        if isinstance(beta, Value):
            b2 = add("add", [b2, beta], {"alpha": 1}, c)
        args = list(prod.args)
        names = prod.op.tensor_names
        args[names.index("weight")] = w2
        if names.index("bias") < len(args):
            args[names.index("bias")] = b2
        else:
            args.append(b2)
        out = bn.outputs[0]
        new = graph.add_node(prod.kind, args, dict(prod.attrs), [(out.dtype, out.shape)],
                             before=bn)
        out.replace_all_uses_with(new.output)
    from ember.jit.passes.dce import dce
    return dce(graph)


