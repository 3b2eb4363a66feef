"""Remove dropout that does nothing: ``native_dropout`` with ``train=False`` or ``p=0`` returns
its input (its mask, if something reads it, keeps the node)."""


def remove_eval_dropout(graph):
    for node in list(graph.nodes):
        if node.kind != "native_dropout":
            continue
        if node.arg("train") is not False and node.arg("p") != 0:
            continue
        out = node.outputs[0]
        x = node.args[0]
        if out.dtype == x.dtype:
            out.replace_all_uses_with(x)
    from ember.jit.passes.dce import dce
    return dce(graph)
