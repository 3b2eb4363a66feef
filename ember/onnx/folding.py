"""Constant folding on the ONNX graph: a node whose inputs are all initializers or constants is
evaluated once at export (onnx's reference evaluator) and replaced by an initializer."""
import numpy as np

__all__ = ["fold_constants"]

_NEVER = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Bernoulli",
          "Multinomial", "Dropout"}
_MAX_GROWTH = 1 << 20


def _const_value(node):
    from onnx import numpy_helper
    for a in node.attribute:
        if a.name == "value":
            return numpy_helper.to_array(a.t)
    return None


def fold_constants(g, opset, protected=()):
    """Fold in place the nodes of GraphContext ``g`` computable from initializers alone
    (``protected`` names are never treated as constants). Returns the number folded."""
    from onnx.reference import ReferenceEvaluator
    known = {n: a for n, a in g.initializers.items() if n not in protected}
    for nd in g.nodes:
        if nd.op_type == "Constant" and nd.domain in ("", "ai.onnx"):
            v = _const_value(nd)
            if v is not None:
                known[nd.output[0]] = v
    kept, folded = [], 0
    users = {}
    for nd in g.nodes:
        for x in nd.input:
            users[x] = users.get(x, 0) + 1
    for nd in g.nodes:
        if nd.op_type == "Constant" or nd.op_type in _NEVER or nd.domain not in ("", "ai.onnx"):
            kept.append(nd)
            continue
        ins = [x for x in nd.input if x]
        if not ins or not all(x in known for x in ins):
            kept.append(nd)
            continue
        try:
            ev = ReferenceEvaluator(nd, opsets={"": opset})
            feeds = {x: known[x] for x in ins}
            outs = ev.run(None, feeds)
        except Exception:  # noqa: BLE001 - leave it to the runtime
            kept.append(nd)
            continue
        size_in = sum(int(np.asarray(known[x]).size) for x in ins)
        if sum(int(np.asarray(o).size) for o in outs) > max(_MAX_GROWTH, size_in):
            kept.append(nd)
            continue
        for name, val in zip(nd.output, outs):
            if name:
                arr = np.ascontiguousarray(np.asarray(val))
                known[name] = arr
                g.initializers[name] = arr
        folded += 1
    g.nodes[:] = kept
    # Constant nodes whose only users were folded are removed by the exporter's dead-node pass
    return folded
