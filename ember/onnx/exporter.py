"""Trace a model with ember.jit and convert its graph to an ONNX ModelProto (onnx.helper only).

Steps: trace (with source lines) -> pick a symbolic per node (registry, an op's own, or a custom
Function's ``symbolic``) -> build nodes, initializers (state-dict names), typed inputs/outputs with
``dynamic_axes`` -> optional constant folding of initializer-only subgraphs -> dead-node removal.
"""
import enum
import io
import os

import numpy as np

from ember._optional import require
from ember.onnx.context import Dyn, GraphContext, SymbolicError
from ember.onnx.errors import OnnxExportError, UnsupportedOperatorError
from ember.onnx.registry import check_opset, lookup

__all__ = ["TrainingMode", "export", "build_model"]

# the lowest IR version that carries each opset (ONNX's VERSION_TABLE), so older runtimes load it
_IR_FOR_OPSET = {13: 7, 14: 7, 15: 8, 16: 8, 17: 8, 18: 8, 19: 9, 20: 9, 21: 10}


class TrainingMode(enum.IntEnum):
    """How the model's train/eval mode is set while exporting (torch's meanings)."""
    EVAL = 0
    PRESERVE = 1
    TRAINING = 2


# ---------------------------------------------------------------------------------- helpers
def _modes(model):
    mods = list(model.modules()) if hasattr(model, "modules") else [model]
    return [(m, getattr(m, "training", None)) for m in mods]


def _set_mode(model, training):
    if training == TrainingMode.PRESERVE or not hasattr(model, "train"):
        return
    model.train(training == TrainingMode.TRAINING)


def _restore(saved):
    for m, mode in saved:
        if mode is not None:
            try:
                m.training = mode
            except Exception:  # noqa: BLE001 - best effort
                pass


def _check_names(kind, names, n):
    if names is None:
        return [None] * n
    names = list(names)
    if len(names) > n:
        raise ValueError(f"{kind}: {len(names)} names given but the traced model has {n} "
                         f"{kind.split('_')[0]}s")
    if any(not isinstance(s, str) or not s for s in names):
        raise ValueError(f"{kind} must be non-empty strings, got {names!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"{kind} has duplicates: {names!r}")
    return names + [None] * (n - len(names))


def _norm_dynamic_axes(dynamic_axes, in_names, out_names, in_ranks, out_ranks):
    """{name: {axis: dim_param}} after checking names and axes."""
    if not dynamic_axes:
        return {}
    if not isinstance(dynamic_axes, dict):
        raise TypeError("dynamic_axes must be a dict {input or output name: axes}")
    ranks = dict(zip(in_names, in_ranks))
    ranks.update(zip(out_names, out_ranks))
    out = {}
    for name, axes in dynamic_axes.items():
        if name not in ranks:
            raise ValueError(
                f"dynamic_axes names {name!r}, which is not an input or output of the exported "
                f"graph; inputs are {list(in_names)}, outputs are {list(out_names)} (set them "
                "with input_names/output_names)")
        rank = ranks[name]
        if isinstance(axes, dict):
            items = list(axes.items())
        elif isinstance(axes, (list, tuple)):
            items = [(a, f"{name}_dynamic_axes_{i + 1}") for i, a in enumerate(axes)]
        else:
            raise TypeError(f"dynamic_axes[{name!r}] must be a list of axes or a dict "
                            f"{{axis: name}}, got {type(axes).__name__}")
        m = {}
        for a, label in items:
            if isinstance(a, bool) or not isinstance(a, int) or not -rank <= a < rank:
                raise ValueError(f"dynamic_axes[{name!r}]: axis {a!r} is out of range for a "
                                 f"{rank}-d value")
            m[a % rank] = str(label)
        out[name] = m
    return out


def _value_info(helper, name, dtype, shape, dyn):
    dims = [dyn.get(i, d) if d is not None else None for i, d in enumerate(shape)] \
        if shape is not None else None
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)),
                                         dims)


def _resolve_function(node, functions):
    """The Function class of a python_function node: the class the node holds (the tracer's, or
    the registry's for a loaded graph, see ``ember.jit.register_function``); never imported."""
    hit = functions.get(id(node))
    if hit is not None and hit[0] is node:
        return hit[1]
    from ember.jit.codegen import resolve_class
    return resolve_class(node.attrs.get("cls"))


def _symbolic_for(node, opset, functions):
    """(callable, kind label) for an IR node, or (None, label)."""
    kind = node.kind
    if kind == "python_function":
        cls = _resolve_function(node, functions)
        from ember.jit.ir import function_label
        label = f"python_function {function_label(cls)}"
        fn = getattr(cls, "symbolic", None) if cls is not None else None
        if fn is None:
            return None, label

        def call(g, node, *args, **attrs):
            flat = args[0] if args else []
            return fn(g, *flat)
        return call, label
    from ember.onnx.symbolics.complex import COMPLEX, is_complex_node
    if is_complex_node(node):  # complex values: their own symbolics (symbolics/complex.py)
        return COMPLEX.get(kind), f"{kind} on complex tensors"
    return lookup(kind, opset), kind


# ---------------------------------------------------------------------------------- convert
class _Converter:
    def __init__(self, graph, opset, functions):
        import onnx.helper as helper
        self.graph = graph
        self.opset = opset
        self.functions = functions
        self.g = GraphContext(opset, helper)
        self.g.value_name = self.name   # lets a symbolic read the ONNX name of any IR value
        self.env = {}

    def name(self, v):
        r = self.env.get(id(v))
        if r is None:
            raise OnnxExportError(f"%{v.name} is used by an ONNX node but its producer "
                                  f"{v.node.kind if v.node is not None else 'input'} does not "
                                  "output it in ONNX")
        if callable(r):
            r = r()
            self.env[id(v)] = r
            self._set_type(r, v)
        return r

    def _set_type(self, name, v):
        if v.dtype is not None and np.dtype(v.dtype).kind == "c":
            from ember.onnx.symbolics.complex import layout_type
            self.g.set_type(name, *layout_type(v.dtype, v.shape))
        else:
            self.g.set_type(name, v.dtype, v.shape)

    def arg(self, a):
        from ember.jit.ir import SymRef, Value
        if isinstance(a, Value):
            return self.name(a)
        if isinstance(a, SymRef):  # a traced size as an op's scalar operand
            return Dyn(self.name(a.value))
        if isinstance(a, list):
            return [self.arg(x) for x in a]
        if isinstance(a, np.generic):
            return a.item()
        return a

    def const(self, c):
        from ember.jit.ir import ArrayRef, SymRef, Value
        if isinstance(c, SymRef):
            return Dyn(self.name(c.value))
        if isinstance(c, Value):
            return self.name(c)
        if isinstance(c, ArrayRef):
            return self.graph.constants[c.name]
        if isinstance(c, tuple):
            return tuple(self.const(x) for x in c)
        if isinstance(c, list):
            return [self.const(x) for x in c]
        if isinstance(c, slice):
            return slice(self.const(c.start), self.const(c.stop), self.const(c.step))
        return c

    def bind(self, node, result):
        outs = result if isinstance(result, (tuple, list)) else (result,)
        for i, v in enumerate(node.outputs):
            r = outs[i] if i < len(outs) else None
            if r is None:
                continue
            self.env[id(v)] = r
            if isinstance(r, str):
                self._set_type(r, v)

    def check_supported(self, skip):
        missing, seen = [], set()
        for node in self.graph.nodes:
            if id(node) in skip or node.kind in ("constant", "detach", "copy_"):
                continue
            fn, label = _symbolic_for(node, self.opset, self.functions)
            if fn is None and (label, node.source) not in seen:
                seen.add((label, node.source))
                missing.append((label, self.opset, node.source))
        if missing:
            raise UnsupportedOperatorError(missing)

    def run(self):
        from ember.onnx.symbolics.rnn import fusion_plans
        g = self.g
        plans = fusion_plans(self.graph, self.opset)
        absorbed = {}
        for p in plans:
            for n in p.absorbed:
                absorbed[id(n)] = p
        self.check_supported(absorbed)
        for node in self.graph.nodes:
            g.node = node
            try:
                p = absorbed.get(id(node))
                if p is not None:
                    p.visit(node, self)
                    continue
                if node.kind == "constant":
                    arr = self.graph.constants[node.attrs["name"]]
                    self.bind(node, g.initializer(arr, name=g.fresh("const." + node.attrs["name"])))
                    continue
                if node.kind == "detach":
                    self.bind(node, self.name(node.args[0]))
                    continue
                if node.kind == "copy_":
                    tgt, src = node.args
                    s = g.cast(self.name(src), tgt.dtype)
                    if tuple(src.shape) != tuple(tgt.shape):
                        s = g.op("Expand", s, g.shape_of(self.name(tgt)))
                    self.bind(node, s)
                    continue
                fn, _ = _symbolic_for(node, self.opset, self.functions)
                args = [self.arg(a) for a in node.args]
                attrs = {k: self.const(v) for k, v in node.attrs.items()}
                if node.kind == "python_function":
                    attrs = {}
                self.bind(node, fn(g, node, *args, **attrs))
            except SymbolicError as e:
                raise OnnxExportError(f"ONNX export of '{node.kind}' at opset {self.opset} "
                                      f"failed: {e} (called at {node.source or '<unknown>'})") \
                    from None
            finally:
                g.node = None


# ---------------------------------------------------------------------------------- model
def _check_frozen_sizes(traced, args, onnx_inputs, dyn):
    """A size the trace froze (ember.jit.guards) that changes along a dynamic axis makes the
    exported graph wrong at other sizes: warn (TracerWarning naming the line that read it)."""
    guards = traced.shape_guards
    axes = {i: sorted(dyn[n]) for i, (n, _) in enumerate(onnx_inputs) if dyn.get(n)}
    if guards is None or not axes:
        return
    from ember.jit.traced import flatten
    flat = []
    flatten(args, "args", flat, [])
    guards.check_dynamic_axes([t._data for t in flat], axes, "ember.onnx.export")


def build_model(model, args, export_params=True, training=TrainingMode.EVAL, input_names=None,
                output_names=None, dynamic_axes=None, opset_version=17, do_constant_folding=True,
                keep_initializers_as_inputs=False, custom_opsets=None):
    """Trace ``model(*args)`` and return the ONNX ModelProto (see ``export``)."""
    onnx = require("onnx", feature="ember.onnx.export", extra="onnx")
    from onnx import helper, numpy_helper

    from ember.onnx.tracing import trace_for_export
    opset = check_opset(opset_version)
    if training not in (TrainingMode.EVAL, TrainingMode.PRESERVE, TrainingMode.TRAINING):
        raise ValueError(f"training must be an ember.onnx.TrainingMode, got {training!r}")
    training = TrainingMode(training)
    if not isinstance(args, tuple):
        args = (args,)
    if custom_opsets is not None and not isinstance(custom_opsets, dict):
        raise TypeError("custom_opsets must be a dict {domain: version}")
    saved = _modes(model)
    try:
        _set_mode(model, training)
        traced, functions = trace_for_export(model, args)
    finally:
        _restore(saved)
    graph = traced.graph
    n_in = traced._n_inputs
    formals, state_formals = graph.inputs[:n_in], graph.inputs[n_in:]
    state = traced.state_tensors()
    in_names = _check_names("input_names", input_names, n_in)
    out_names = _check_names("output_names", output_names, len(graph.outputs))

    for v in list(graph.inputs) + list(graph.outputs):
        if v.dtype is not None and np.dtype(v.dtype).kind == "c":
            raise OnnxExportError(f"%{v.name} is a complex ({np.dtype(v.dtype)}) graph input or "
                                  "output: ONNX models take and return real tensors (return "
                                  "ember.view_as_real(z), or z.real / z.imag, instead)")
    conv = _Converter(graph, opset, functions)
    g = conv.g
    for v in graph.values():
        g.reserve(v.name)
    for n in list(in_names) + list(out_names):
        if n is not None:
            g.reserve(n)
    onnx_inputs = []
    for v, n in zip(formals, in_names):
        name = n or v.name
        conv.env[id(v)] = name
        g.set_type(name, v.dtype, v.shape)
        onnx_inputs.append((name, v))
    param_inputs = []
    for v, t in zip(state_formals, state):
        conv.env[id(v)] = v.name
        g.set_type(v.name, v.dtype, v.shape)
        if export_params:
            g.initializers[v.name] = np.ascontiguousarray(t._data)
        if not export_params or keep_initializers_as_inputs:
            param_inputs.append((v.name, v))
    conv.run()

    # outputs: rename the producing value where possible, else an Identity
    produced = {o: nd for nd in g.nodes for o in nd.output}
    graph_in = {n for n, _ in onnx_inputs} | set(g.initializers) | {n for n, _ in param_inputs}
    final_outs = []
    for i, (v, want) in enumerate(zip(graph.outputs, out_names)):
        have = conv.name(v)
        if want is None:
            want = f"output_{i}" if f"output_{i}" not in g.used else g.fresh(f"output_{i}")
            g.reserve(want)
        target = want
        if target != have:
            if have in produced and have not in final_outs and have not in graph_in and \
                    want is not None and not _used_as_output_later(have, graph, conv, i):
                _rename(g, have, target)
                produced[target] = produced.pop(have)
            else:
                g.nodes.append(helper.make_node("Identity", [have], [target],
                                                name=g.fresh("n.Identity")))
        elif have in graph_in:
            target = g.fresh(f"output_{i}")
            g.nodes.append(helper.make_node("Identity", [have], [target],
                                            name=g.fresh("n.Identity")))
        final_outs.append(target)

    dyn = _norm_dynamic_axes(dynamic_axes, [n for n, _ in onnx_inputs], final_outs,
                             [len(v.shape) for _, v in onnx_inputs],
                             [len(v.shape) for v in graph.outputs])
    _check_frozen_sizes(traced, args, onnx_inputs, dyn)
    if do_constant_folding and training == TrainingMode.EVAL:
        from ember.onnx.folding import fold_constants
        fold_constants(g, opset, protected={n for n, _ in onnx_inputs} |
                       ({n for n, _ in param_inputs} if keep_initializers_as_inputs else set()))
    _remove_dead(g, final_outs)

    inputs = [_value_info(helper, n, v.dtype, v.shape, dyn.get(n, {})) for n, v in onnx_inputs]
    inputs += [_value_info(helper, n, v.dtype, v.shape, {}) for n, v in param_inputs
               if n in _used_names(g, final_outs)]
    if keep_initializers_as_inputs and export_params:
        have = {i.name for i in inputs}
        inputs += [_value_info(helper, n, a.dtype, a.shape, {}) for n, a in g.initializers.items()
                   if n not in have]
    dynamic = bool(dyn)
    outputs = [_value_info(helper, n, v.dtype, None if dynamic else v.shape, dyn.get(n, {}))
               for n, v in zip(final_outs, graph.outputs)]
    inits = [numpy_helper.from_array(np.ascontiguousarray(a), n)
             for n, a in g.initializers.items()]
    gproto = helper.make_graph(g.nodes, getattr(traced, "name", "main_graph") or "main_graph",
                               inputs, outputs, initializer=inits)
    opsets = [helper.make_opsetid("", opset)]
    for dom, ver in (custom_opsets or {}).items():
        opsets.append(helper.make_opsetid(dom, int(ver)))
    mp = helper.make_model(gproto, opset_imports=opsets, producer_name="ember",
                           producer_version=_ember_version())
    mp.ir_version = _IR_FOR_OPSET[opset]
    if dynamic:
        _fill_output_shapes(mp, graph.outputs, dyn, final_outs)
    try:
        onnx.checker.check_model(mp)
    except onnx.checker.ValidationError as e:
        raise OnnxExportError(f"the exported model does not pass onnx.checker: {e}") from None
    return mp


def _used_as_output_later(name, graph, conv, i):
    for v in graph.outputs[i + 1:]:
        if conv.env.get(id(v)) == name:
            return True
    return False


def _rename(g, old, new):
    for nd in g.nodes:
        for j, o in enumerate(nd.output):
            if o == old:
                nd.output[j] = new
        for j, x in enumerate(nd.input):
            if x == old:
                nd.input[j] = new
    if old in g.types:
        g.types[new] = g.types[old]


def _used_names(g, outputs):
    used = set(outputs)
    for nd in g.nodes:
        used.update(nd.input)
    return used


def _remove_dead(g, outputs):
    """Drop nodes none of whose outputs are used, and unused initializers."""
    needed = set(outputs)
    keep = []
    for nd in reversed(g.nodes):
        if any(o in needed for o in nd.output if o):
            keep.append(nd)
            needed.update(x for x in nd.input if x)
    g.nodes[:] = list(reversed(keep))
    for n in list(g.initializers):
        if n not in needed:
            del g.initializers[n]


def _fill_output_shapes(mp, values, dyn, names):
    """Output dims: named dynamic axes, else what ONNX shape inference derives, else unknown."""
    import onnx
    try:
        inferred = onnx.shape_inference.infer_shapes(mp, data_prop=True)
        shapes = {o.name: o.type.tensor_type.shape for o in inferred.graph.output}
    except Exception:  # noqa: BLE001 - shapes are advisory
        shapes = {}
    for out, v, name in zip(mp.graph.output, values, names):
        labels = dyn.get(name, {})
        inf = shapes.get(name)
        shape = out.type.tensor_type.shape
        shape.ClearField("dim")
        for i, _ in enumerate(v.shape):
            d = shape.dim.add()
            if i in labels:
                d.dim_param = labels[i]
            elif inf is not None and len(inf.dim) == len(v.shape):
                src = inf.dim[i]
                if src.HasField("dim_value"):
                    d.dim_value = src.dim_value
                elif src.HasField("dim_param"):
                    d.dim_param = src.dim_param


def _ember_version():
    try:
        import ember
        return str(getattr(ember, "__version__", "0"))
    except Exception:  # noqa: BLE001
        return "0"


# ---------------------------------------------------------------------------------- export
def _write(data, f):
    if isinstance(f, (str, os.PathLike)):
        from ember.utils.files import atomic_write
        atomic_write(f, data)
    elif hasattr(f, "write"):
        if isinstance(f, io.TextIOBase):
            raise TypeError("export: f must be a path or a binary file object, not a text file")
        f.write(data)
    else:
        raise TypeError(f"export: f must be a path or a binary file object, got "
                        f"{type(f).__name__}")


def export(model, args, f, export_params=True, verbose=False, training=TrainingMode.EVAL,
           input_names=None, output_names=None, dynamic_axes=None, opset_version=17,
           do_constant_folding=True, keep_initializers_as_inputs=False, custom_opsets=None):
    """Export ``model`` (a Module or function of tensors), traced on ``args``, to ONNX in ``f``.

    ``f``: a path (written atomically: a temp file then ``os.replace``) or a binary file object.
    ``export_params``: store parameters and buffers as initializers named by their state-dict
    keys (else they become graph inputs). ``training``: TrainingMode.EVAL (default) exports
    inference behaviour, PRESERVE the current mode, TRAINING training behaviour.
    ``input_names``/``output_names``: names of the flattened graph inputs and outputs.
    ``dynamic_axes``: {name: [axis, ...] or {axis: dim_name}} for dims that stay symbolic.
    ``opset_version``: 13 to 21. ``do_constant_folding``: precompute initializer-only subgraphs.
    ``keep_initializers_as_inputs``: list initializers among the graph inputs too.
    ``custom_opsets``: {domain: version} for custom-domain ops emitted by symbolics.
    Returns the ModelProto.

    Raises ValueError for an unsupported opset, bad names or ``dynamic_axes``;
    UnsupportedOperatorError naming each op without a symbolic, the opset and the user's line;
    OnnxExportError when a call cannot be expressed in ONNX.
    """
    mp = build_model(model, args, export_params=export_params, training=training,
                     input_names=input_names, output_names=output_names,
                     dynamic_axes=dynamic_axes, opset_version=opset_version,
                     do_constant_folding=do_constant_folding,
                     keep_initializers_as_inputs=keep_initializers_as_inputs,
                     custom_opsets=custom_opsets)
    if verbose:
        from ember.onnx.text import to_text
        print(to_text(mp))
    _write(mp.SerializeToString(), f)
    return mp
