"""Constant folding: a pure node whose inputs are all constants is evaluated once, at
optimisation time, and replaced by a constant. ``freeze`` turns parameter and buffer formals into
constants (a snapshot), so folding reaches everything computed from weights alone."""
import numpy as np

from ember.jit.codegen import node_callable
from ember.jit.ir import ArrayRef, GenRef, SymRef, Value, map_arg
from ember.kernels.runtime.memory import frozen_copy

_MAX_GROWTH = 1 << 20  # do not materialise outputs over 1M elements larger than their inputs


def _const_of(v):
    return v.node is not None and v.node.kind == "constant"


def _resolve(x, graph):
    def leaf(y):
        if isinstance(y, Value):
            return graph.constants[y.node.attrs["name"]]
        if isinstance(y, SymRef):
            return int(graph.constants[y.value.node.attrs["name"]])
        if isinstance(y, ArrayRef):
            return graph.constants[y.name]
        return y
    return map_arg(x, leaf)


def constant_fold(graph):
    written = {id(n.args[0]) for n in graph.nodes if n.kind == "copy_"}
    for node in list(graph.nodes):
        if node.kind in ("constant", "python_function", "copy_") or not node.is_pure():
            continue
        ins = node.inputs
        if not ins or not all(_const_of(v) and id(v) not in written for v in ins):
            continue
        if any(isinstance(a, GenRef) for a in node.attrs.values()):
            continue
        op = node.op
        if op is None and node.kind != "detach":
            continue
        size_in = sum(int(np.prod(v.shape)) for v in ins)
        size_out = sum(int(np.prod(o.shape)) for o in node.outputs)
        if size_out > _MAX_GROWTH and size_out > size_in:
            continue
        args = [_resolve(a, graph) for a in node.args]
        if op is not None:
            args += [_resolve(node.attrs[k], graph) for k in op.const_names if k in node.attrs]
        out = node_callable(node.kind, "array")(*args)
        outs = tuple(out) if op is not None and op.multi else (out,)
        for o, r in zip(node.outputs, outs):
            if not o.uses and o not in graph.outputs:
                continue
            r = frozen_copy(r)   # immutable: kernels may cache what they derive from it
            c = graph.add_constant(r, before=node)
            o.replace_all_uses_with(c)
        graph.remove(node)
    from ember.jit.passes.dce import dce
    return dce(graph)


def freeze(graph, tensors):
    """Replace the parameter/buffer formals (bound to ``tensors``, in formal order after the
    inputs) by constants holding a read-only copy of their current data (immutable, so kernels
    may cache transforms of it, e.g. Winograd's weight transform)."""
    formals = [v for v in graph.inputs if v.role != "input"]
    if len(formals) != len(tensors):
        raise ValueError(f"freeze: {len(formals)} state formals but {len(tensors)} tensors")
    written = {id(n.args[0]) for n in graph.nodes if n.kind == "copy_"}
    at = graph.nodes[0] if graph.nodes else None
    for v, t in zip(formals, tensors):
        if id(v) in written:
            raise ValueError(f"freeze: %{v.name} is written in place by the graph (a training-"
                             "mode buffer update); trace in eval mode to freeze")
        name = "frozen." + v.name
        snapshot = frozen_copy(t._data)
        c = graph.add_constant(snapshot, name=name,
                               **({"before": at} if at is not None else {}))
        v.replace_all_uses_with(c)
        graph.inputs.remove(v)
        graph._names.discard(v.name)
    return graph
