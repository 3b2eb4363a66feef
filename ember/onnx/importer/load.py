"""``load_model``: an ONNX model as an ``ember.nn.Module`` whose forward runs the graph through
ember ops (so it trains, traces and re-exports). Reading a model never runs code: the file is a
protobuf, parsed by ``onnx``; ops resolve through the importer registry only."""
import os
import re

import numpy as np

import ember
from ember import nn
from ember.errors import EmberRuntimeError, EmberTypeError
from ember.onnx.importer.errors import OnnxImportError, UnsupportedOnnxError
from ember.onnx.importer.registry import lookup, versions
from ember.onnx.importer import storage_types as st
from ember.onnx.importer.tensor_data import model_dir, read_external_data, tensor_array

__all__ = ["load_model", "OnnxModule", "MIN_IMPORT_OPSET"]

MIN_IMPORT_OPSET = 7        # older default-domain models go through onnx.version_converter
_EMBER_NP = {np.dtype(t) for t in ("float16", "float32", "float64", "int8", "int16", "int32",
                                    "int64", "uint8", "bool")}


def _read(src):
    import onnx
    if isinstance(src, onnx.ModelProto):
        return src, "<ModelProto>"
    if isinstance(src, (bytes, bytearray)):
        data, where = bytes(src), "<bytes>"
    elif hasattr(src, "read"):
        data, where = src.read(), getattr(src, "name", "<file object>")
    else:
        where = os.fspath(src)
        try:
            with open(where, "rb") as f:
                data = f.read()
        except OSError as e:
            raise OnnxImportError(f"onnx.load_model: cannot read '{where}': {e}") from None
    m = onnx.ModelProto()
    try:
        m.ParseFromString(data)
    except Exception as e:   # google.protobuf DecodeError: truncated or not a protobuf
        raise OnnxImportError(f"onnx.load_model: '{where}' is not a valid ONNX model "
                              f"(truncated or corrupt protobuf: {e})") from None
    if not m.HasField("graph") or (not m.graph.node and not m.graph.output):
        raise OnnxImportError(f"onnx.load_model: '{where}' holds no ONNX graph "
                              f"(truncated or not an ONNX file; {len(data)} bytes)")
    return m, where


def np_dtype_of(elem_type):
    import onnx
    try:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    except Exception:
        return None


def dtype_name(elem_type):
    import onnx
    try:
        return onnx.TensorProto.DataType.Name(elem_type)
    except ValueError:
        return str(elem_type)


def _attr_value(a, what="attribute"):
    import onnx
    if a.type == onnx.AttributeProto.TENSOR:
        return tensor_array(a.t, f"tensor '{a.t.name}' in {what}")
    v = onnx.helper.get_attribute_value(a)
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, list) and v and isinstance(v[0], bytes):
        return [s.decode() for s in v]
    return v


def _opsets(model):
    ops = {}
    for o in model.opset_import:
        ops["" if o.domain in ("", "ai.onnx") else o.domain] = o.version
    return ops


class _Node:
    __slots__ = ("op", "name", "inputs", "outputs", "attrs", "fn", "has_graph", "narrow")

    def __init__(self, op, name, inputs, outputs, attrs, fn, has_graph=False, narrow=()):
        self.op, self.name, self.inputs, self.outputs = op, name, inputs, outputs
        self.attrs, self.fn, self.has_graph = attrs, fn, has_graph
        self.narrow = narrow   # [(output index, ONNX type)] of outputs of a simulated type


def _tensor_elem_type(t):
    """The element type of a TypeProto's tensor (through optional and sequence wrappers);
    0 when it holds none."""
    while t.HasField("optional_type") or t.HasField("sequence_type"):
        t = (t.optional_type.elem_type if t.HasField("optional_type") else
             t.sequence_type.elem_type)
    return t.tensor_type.elem_type if t.HasField("tensor_type") else 0


def _mentions_wide_types(model):
    """Whether any declared type, initializer, tensor attribute or dtype-valued attribute of
    the model (subgraphs included) is a storage type or STRING."""
    import onnx
    special = set(st.TABLE) | {_STRING}
    A = onnx.AttributeProto

    def walk(g):
        if any(t.data_type in special for t in g.initializer):
            return True
        if any(_tensor_elem_type(v.type) in special for v in list(g.input) + list(g.output) +
               list(g.value_info)):
            return True
        for n in g.node:
            for a in n.attribute:
                if a.type == A.INT and a.i in special and a.name in (
                        "to", "dtype", "output_dtype", "output_datatype"):
                    return True
                if a.type == A.TENSOR and a.t.data_type in special:
                    return True
                if a.type == A.GRAPH and walk(a.g) or \
                        a.type == A.GRAPHS and any(walk(x) for x in a.graphs):
                    return True
        return False
    return walk(model.graph)


def _elem_types(model):
    """{value name: ONNX element type} over the whole model (subgraphs included): declared
    inputs, outputs and initializers, and the value_info of shape inference where it runs."""
    import onnx
    if _mentions_wide_types(model):   # only then are intermediate types needed (it copies)
        try:
            model = onnx.shape_inference.infer_shapes(model)
        except Exception:   # inference is a help here, not a requirement
            pass
    types = {}

    def walk(g):
        for t in g.initializer:
            types[t.name] = t.data_type
        for vi in list(g.input) + list(g.output) + list(g.value_info):
            et = _tensor_elem_type(vi.type)
            if et:
                types.setdefault(vi.name, et)
        for n in g.node:
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    walk(a.g)
                elif a.type == onnx.AttributeProto.GRAPHS:
                    for sg in a.graphs:
                        walk(sg)
    walk(model.graph)
    return types


class Subgraph:
    """A compiled graph attribute (If branches, Loop/Scan bodies): ``g(env, *inputs)`` runs it
    with the enclosing scope ``env`` visible and returns its outputs as a list."""

    def __init__(self, name, inputs, outputs, nodes, consts):
        self.name, self.inputs, self.outputs = name, inputs, outputs
        self.nodes, self.consts = nodes, consts
        self.state_keys = {}   # initializer name -> the owning module's state key

    def __call__(self, env, *inputs):
        e = dict(env)
        e.update(self.consts)
        state = env.get(_STATE)   # the owning OnnxModule
        for oname, key in self.state_keys.items():
            e[oname] = state._state_tensor(key)
        for name, v in zip(self.inputs, inputs):
            e[name] = v
        _execute(self.nodes, e)
        return [e[o] for o in self.outputs]


_STATE = object()   # env key (never an ONNX name) of the OnnxModule that runs the graph


def _subgraphs(nodes):
    """Every compiled subgraph under ``nodes``, outer ones first."""
    for n in nodes:
        for v in n.attrs.values():
            if isinstance(v, Subgraph):
                yield v
                yield from _subgraphs(v.nodes)


def _execute(nodes, env):
    """Run ``nodes`` over ``env``. An error names the node: an ember error gets the node in
    front, any other exception an importer's NumPy code raises on the model's values
    (ValueError, ZeroDivisionError, MemoryError...) becomes the matching ember error class;
    ember's own bugs (AssertionError, NameError...) pass through unchanged."""
    from ember.errors import _BUGS, EmberError, ember_class
    for n in nodes:
        args = [env[i] if i else None for i in n.inputs]
        if n.has_graph:
            n.attrs["_env"] = env
        try:
            out = n.fn(n.attrs, *args)
        except EmberError as e:
            msg = str(e)
            if isinstance(e, UnsupportedOnnxError) or msg.startswith("onnx model: node "):
                raise
            try:
                new = type(e)(f"onnx model: node '{n.name}' ({n.op}): {msg}")
            except Exception:   # an error class with its own constructor: keep it as it is
                raise e from None
            raise new from e
        except _BUGS:
            raise
        except Exception as e:   # noqa: BLE001 - converted to ember's error naming the node
            cls = EmberRuntimeError if isinstance(e, (MemoryError, ArithmeticError)) and \
                not isinstance(e, OverflowError) else ember_class(e)
            raise cls(f"onnx model: node '{n.name}' ({n.op}): {type(e).__name__}: "
                      f"{e}") from e
        finally:
            if n.has_graph:
                n.attrs.pop("_env", None)
        if not isinstance(out, tuple):   # a list is one value (a sequence)
            out = (out,)
        if n.narrow:
            out = list(out)
            for k, et in n.narrow:
                if k < len(out):
                    out[k] = _narrow(out[k], et, n, k)
        for o, v in zip(n.outputs, out):
            if o:
                env[o] = v


_STRING = 8   # onnx.TensorProto.STRING


def _string_ops():
    from ember.onnx.importer.registry import registered_string_ops
    return ", ".join(registered_string_ops())


def _narrow(v, et, n, k):
    what = f"onnx model: node '{n.name}' ({n.op}) output '{n.outputs[k]}'"
    if isinstance(v, list):
        return [st.narrow(e, et, what) for e in v]
    return st.narrow(v, et, what)


def _initializer(t, problems):
    """An initializer as an array ember can hold (simulated types widened), or None (problem
    recorded)."""
    what = f"initializer '{t.name}'"
    if t.data_type == _STRING:   # NumPy object array of str (the string ops only)
        return np.array([s.decode() if isinstance(s, bytes) else str(s)
                         for s in tensor_array(t, what).reshape(-1)],
                        dtype=object).reshape(tuple(t.dims))
    if not st.storable(t.data_type):
        problems.append(("<initializer>", None, t.name, None,
                         f"dtype {dtype_name(t.data_type)} has no ember dtype"))
        return None
    arr = tensor_array(t, what)
    if st.simulated(t.data_type):
        return st.widen(arr, t.data_type, f"onnx model: initializer '{t.name}'").numpy()
    return np.array(arr)


def _compile_subgraph(g, opsets, problems, defined, types):
    consts = {}
    for t in g.initializer:
        arr = _initializer(t, problems)
        if arr is not None:
            consts[t.name] = arr if arr.dtype == object else ember.tensor(arr)
    inputs = [vi.name for vi in g.input]
    scope = set(defined) | set(consts) | set(inputs)
    nodes = _check_nodes(g.node, opsets, problems, scope, types)
    for o in g.output:
        if o.name not in scope:
            raise OnnxImportError(f"onnx.load_model: output '{o.name}' of subgraph '{g.name}' "
                                  f"is produced by no node, input or initializer")
    return Subgraph(g.name, inputs, [o.name for o in g.output], nodes, consts)


def _check_nodes(graph_nodes, opsets, problems, defined, types):
    """Resolve every node in the registry (recursing into graph attributes); names each node
    reads must be defined before it (``defined`` grows as nodes are read). Returns the nodes."""
    import onnx
    nodes = []
    made_by = {}   # value name -> op type of the node of this graph producing it
    for i, n in enumerate(graph_nodes):
        name = n.name or f"{n.op_type}_{i}"
        for j, inp in enumerate(n.input):
            if inp and inp not in defined:
                raise OnnxImportError(
                    f"onnx.load_model: node '{name}' ({n.op_type}) reads input {j} '{inp}', "
                    f"which is not a graph input, an initializer or an earlier node's output "
                    f"(a dangling input or a missing initializer)")
        defined.update(o for o in n.output if o)
        dom = "" if n.domain in ("", "ai.onnx") else n.domain
        opset = opsets.get(dom)
        if opset is None:
            problems.append((n.op_type, None, name, None,
                             f"domain '{dom}' is not in the model's opset_import"))
            continue
        imp = lookup(n.op_type, opset, dom)
        if imp is None:
            have = versions(n.op_type, dom)
            why = ("no importer for this op" + (f" in domain '{dom}'" if dom else "")
                   if not have else f"no importer for this opset (ember has it from opset "
                                    f"{have[0]})")
            problems.append((n.op_type, opset, name, None, why))
            continue
        attrs = dict(imp.attrs)
        bad = has_graph = False
        for a in n.attribute:
            if a.name not in imp.attrs:
                problems.append((n.op_type, opset, name, a.name, "is not supported"))
                bad = True
                continue
            try:
                if a.type == onnx.AttributeProto.GRAPH:
                    attrs[a.name] = _compile_subgraph(a.g, opsets, problems, defined,
                                                      types)
                    has_graph = True
                else:
                    attrs[a.name] = _attr_value(
                        a, f"attribute '{a.name}' of node '{name}' ({n.op_type})")
            except OnnxImportError:
                raise
            except Exception as e:
                problems.append((n.op_type, opset, name, a.name, f"cannot be read ({e})"))
                bad = True
        if not imp.strings:
            io = [(i, "reads") for i in n.input] + [(o, "writes") for o in n.output]
            s_io = [(v, how) for v, how in io if v and types.get(v) == _STRING]
            if s_io:
                problems.append((n.op_type, opset, name, None,
                                 f"{s_io[0][1]} the STRING tensor '{s_io[0][0]}': string tensors "
                                 f"are supported only by the string ops ({_string_ops()})"))
                bad = True
        if len(n.output) > imp.max_outputs and any(n.output[imp.max_outputs:]):
            problems.append((n.op_type, opset, name, None,
                             f"only the first {imp.max_outputs} output(s) are supported, the "
                             f"node asks for {len(n.output)}"))
            bad = True
        # ONNX element types of the inputs and outputs (0 where unknown): the importers of
        # CastLike, QuantizeLinear, BitCast... read the declared type of a simulated value
        attrs["_tin"] = [types.get(i, 0) if i else 0 for i in n.input]
        attrs["_tout"] = [types.get(o, 0) if o else 0 for o in n.output]
        if not bad and imp.check is not None:
            res = imp.check(attrs, n)
            if res:
                problems.append((n.op_type, opset, name, res[0], res[1]))
                bad = True
        attrs["_n"] = len(n.output)
        # op type of the node producing input 0 (None: a graph input or an initializer)
        attrs["_src"] = made_by.get(n.input[0]) if n.input else None
        made_by.update((o, n.op_type) for o in n.output if o)
        narrow = [(k, types[o]) for k, o in enumerate(n.output)
                  if o and st.simulated(types.get(o))]
        nodes.append(_Node(n.op_type, name, list(n.input), list(n.output), attrs, imp.fn,
                           has_graph, narrow))
    return nodes


def _channel_prelu(model):
    """Before opset 7 a 1-d PRelu slope of C > 1 values is per channel (axis 1); the version
    converter keeps it 1-d, which from opset 7 broadcasts on the last axis. Unsqueeze such a
    slope to [C, 1, ...] first."""
    from onnx import helper
    g = model.graph
    ranks = {vi.name: (len(vi.type.tensor_type.shape.dim), [d.dim_value for d in
                                                            vi.type.tensor_type.shape.dim])
             for vi in list(g.input) + list(g.value_info) if vi.type.HasField("tensor_type")}
    ranks.update({t.name: (len(t.dims), list(t.dims)) for t in g.initializer})
    nodes = []
    for i, n in enumerate(g.node):
        if n.op_type == "PRelu" and n.domain in ("", "ai.onnx") and len(n.input) == 2:
            xr, sr = ranks.get(n.input[0]), ranks.get(n.input[1])
            if xr and sr and xr[0] >= 3 and sr[0] == 1 and sr[1][0] > 1:
                name = f"{n.input[1]}__per_channel_{i}"
                nodes.append(helper.make_node("Unsqueeze", [n.input[1]], [name],
                                              axes=list(range(1, xr[0] - 1))))
                n.input[1] = name
        nodes.append(n)
    del g.node[:]
    g.node.extend(nodes)
    return model


def _convert_old(model):
    import onnx
    from onnx import version_converter
    opset = _opsets(model).get("", MIN_IMPORT_OPSET)
    if opset >= MIN_IMPORT_OPSET:
        return model
    try:
        # the converter's adapters need the shapes of broadcasting inputs
        model = _channel_prelu(onnx.shape_inference.infer_shapes(model))
        return version_converter.convert_version(model, 13)
    except Exception as e:
        raise OnnxImportError(f"onnx.load_model: the model's opset {opset} is older than "
                              f"{MIN_IMPORT_OPSET} and onnx.version_converter could not convert "
                              f"it to opset 13: {e}") from None


class OnnxModule(nn.Module):
    """An imported ONNX graph. ``forward(*inputs, **named)`` takes the graph inputs (that are
    not initializers) by position or name and returns one tensor or a tuple, as the graph
    declares. ``onnx_names`` maps each ``state_dict()`` key to the ONNX initializer name."""

    def __init__(self, model):
        super().__init__()
        g = model.graph
        self.opsets = _opsets(model)
        types = _elem_types(model)
        problems = []
        init_names = [t.name for t in g.initializer]
        if g.sparse_initializer:
            problems.append(("<graph>", None, g.name, None,
                             "sparse initializers are not supported"))
        input_infos = []
        for vi in g.input:
            if vi.name in init_names:
                continue
            input_infos.append(self._value_info(vi, problems))
        # every tensor a node reads must be produced before it (graph inputs, initializers,
        # earlier node outputs)
        defined = set(init_names) | {i[0] for i in input_infos}
        nodes = _check_nodes(g.node, self.opsets, problems, defined, types)
        outputs = [o.name for o in g.output]
        for o in outputs:
            if o not in defined:
                raise OnnxImportError(f"onnx.load_model: graph output '{o}' is produced by no "
                                      f"node, input or initializer")
        if problems:
            raise UnsupportedOnnxError(problems)
        self._nodes = nodes
        self._inputs = input_infos
        self._outputs = outputs
        # ONNX element type of each graph output (0 unknown): see declared_outputs
        self.output_elem_types = [types.get(o, 0) for o in outputs]
        self.onnx_names = {}
        self._init_keys = {}
        self._string_consts = {}
        for t in g.initializer:
            bad = []
            arr = _initializer(t, bad)
            if bad:
                raise UnsupportedOnnxError(bad)
            if arr.dtype == object:   # a string constant: not module state
                self._string_consts[t.name] = arr
                continue
            key = self._add_state(t.name, arr)
            self.onnx_names[key] = t.name
            self._init_keys[t.name] = key
        # subgraph (If/Loop/Scan body) initializers are module state too, under their names
        for sg in _subgraphs(nodes):
            for oname, t in list(sg.consts.items()):
                if not isinstance(t, ember.Tensor):   # string constants stay constants
                    continue
                key = self._add_state(oname, t.numpy())
                self.onnx_names[key] = oname
                sg.state_keys[oname] = key
                del sg.consts[oname]

    @staticmethod
    def _value_info(vi, problems):
        """(name, NumPy dtype, shape, kind) of a graph input; kind is "tensor", "seq" (a list of
        tensors), "opt" (None or a tensor) or "optseq"."""
        t, kind = vi.type, ""
        while True:
            if t.HasField("optional_type") and "opt" not in kind:
                kind, t = kind + "opt", t.optional_type.elem_type
            elif t.HasField("sequence_type") and "seq" not in kind:
                kind, t = kind + "seq", t.sequence_type.elem_type
            else:
                break
        tt = t.tensor_type if t.HasField("tensor_type") else None
        if tt is None:
            problems.append(("<graph input>", None, vi.name, None,
                             "only tensors, sequences of tensors and optionals of them are "
                             "supported (not maps or sparse tensors)"))
            return (vi.name, None, None, "tensor")
        npd = np_dtype_of(tt.elem_type) if tt.elem_type else None
        if tt.elem_type and not st.storable(tt.elem_type) and tt.elem_type != _STRING:
            problems.append(("<graph input>", None, vi.name, None,
                             f"dtype {dtype_name(tt.elem_type)} has no ember dtype"))
        shape = None
        if kind:
            return (vi.name, npd, None, kind)
        if tt.HasField("shape"):
            shape = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
                     for d in tt.shape.dim]
        return (vi.name, npd, shape, "tensor")

    def _add_state(self, name, arr):
        """Register an initializer under its ONNX name: nested submodules when the name is a
        dotted path (``features.0.weight``), else with every character other than a letter,
        digit or '_' replaced by '_' (``onnx::LSTM_193`` -> ``onnx__LSTM_193``: a name
        ember.jit and ember.onnx.export can carry)."""
        parts = name.split(".")
        owner = self
        ok = all(parts) and all(p.isidentifier() or p.isdigit() for p in parts)
        if ok:
            for p in parts[:-1]:
                sub = owner._modules.get(p)
                if sub is None:
                    if p in owner._parameters or p in owner._buffers or hasattr(owner, p):
                        ok = False
                        break
                    sub = nn.Module()
                    owner.register_module(p, sub)
                owner = sub
            leaf = parts[-1]
            if ok and (leaf in owner._modules or leaf in owner._parameters or
                       leaf in owner._buffers or hasattr(owner, leaf)):
                ok = False
        if not ok:
            owner, leaf = self, re.sub(r"[^A-Za-z0-9_]", "_", name) or "_"
            while (leaf in self._parameters or leaf in self._buffers or leaf in self._modules
                   or hasattr(self, leaf)):
                leaf += "_"
        t = ember.tensor(arr)
        if arr.dtype.kind == "f":
            owner.register_parameter(leaf, nn.Parameter(t))
        else:
            owner.register_buffer(leaf, t)
        return leaf if owner is self else name

    def _tensor(self, key):
        return self.get_parameter(key) if key in dict(self.named_parameters()) else \
            self.get_buffer(key)

    def declared_outputs(self, outputs):
        """``forward``'s result (one value or a tuple) as a list of NumPy arrays in the types
        the graph declares: a bfloat16 / float8 / uint32... output, computed in float32 or
        int64 (see ``storage_types``), converts back to its ``ml_dtypes`` / NumPy type."""
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        return [st.to_declared(o, et) for o, et in zip(outputs, self.output_elem_types)]

    def input_names(self):
        """The graph inputs forward takes, in order."""
        return [i[0] for i in self._inputs]

    def forward(self, *inputs, **named):
        if len(inputs) > len(self._inputs):
            raise EmberTypeError(f"onnx model: takes {len(self._inputs)} inputs "
                                 f"({self.input_names()}), got {len(inputs)}")
        env = {}
        for (name, *_), x in zip(self._inputs, inputs):
            env[name] = x
        for k, x in named.items():
            if k not in self.input_names():
                raise EmberTypeError(f"onnx model: no input named '{k}' (inputs: "
                                     f"{self.input_names()})")
            if k in env:
                raise EmberTypeError(f"onnx model: input '{k}' given twice")
            env[k] = x
        for name, npd, shape, kind in self._inputs:
            if name not in env:
                raise EmberTypeError(f"onnx model: missing input '{name}' (inputs: "
                                     f"{self.input_names()})")
            env[name] = self._check_value(name, npd, shape, kind, env[name])
        for oname, key in self._init_keys.items():
            env[oname] = self._state_tensor(key)
        env.update(self._string_consts)
        env[_STATE] = self
        _execute(self._nodes, env)
        res = tuple(env[o] for o in self._outputs)
        return res[0] if len(res) == 1 else res

    def _state_tensor(self, key):
        """The parameter or buffer under ``state_dict()`` key ``key`` now (a submodule or tensor
        the program replaced since loading included), found by its path, not by listing the
        whole state on every call."""
        *path, leaf = key.split(".")
        owner = self
        for p in path:
            owner = owner._modules[p]
        t = owner._parameters.get(leaf)
        return t if t is not None else owner._buffers[leaf]

    @classmethod
    def _check_value(cls, name, npd, shape, kind, x):
        if kind.startswith("opt"):
            if x is None:
                return None
            kind = kind[3:] or "tensor"
        if kind == "seq":
            if not isinstance(x, (list, tuple)):
                raise EmberTypeError(f"onnx model: input '{name}' is a sequence: pass a list of "
                                     f"tensors, got {type(x).__name__}")
            return [cls._check_input(name, npd, None, v) for v in x]
        return cls._check_input(name, npd, shape, x)

    @staticmethod
    def _check_input(name, npd, shape, x):
        if npd == object:   # STRING: a NumPy array of str, for the string ops
            if isinstance(x, ember.Tensor):
                raise EmberTypeError(f"onnx model: input '{name}' is a STRING tensor: pass a "
                                     f"NumPy array of str, got an ember tensor")
            x = np.asarray(x)
            if x.dtype.kind not in "OU":
                raise EmberTypeError(f"onnx model: input '{name}' is a STRING tensor: pass a "
                                     f"NumPy array of str, got dtype {x.dtype}")
            return x.astype(object)
        sim = st.code_of_np(npd)
        if sim is not None:   # a type ember computes in a wider dtype (storage_types)
            x = x.detach().numpy() if isinstance(x, ember.Tensor) else x
            x = st.widen(x, sim, f"onnx model: input '{name}'")
            npd = x.dtype.numpy
        if not isinstance(x, ember.Tensor):
            x = ember.tensor(np.asarray(x))
        if npd is not None and x.dtype.numpy != npd:
            raise EmberTypeError(f"onnx model: input '{name}' expects dtype {npd}, got "
                                 f"{x.dtype}")
        if shape is not None:
            if x.dim() != len(shape):
                raise EmberRuntimeError(f"onnx model: input '{name}' expects rank {len(shape)} "
                                        f"(shape {shape}), got shape {tuple(x.shape)}")
            for i, (d, s) in enumerate(zip(shape, x.shape)):
                if isinstance(d, int) and d > 0 and d != s:
                    raise EmberRuntimeError(f"onnx model: input '{name}' expects size {d} at "
                                            f"dim {i} (shape {shape}), got shape "
                                            f"{tuple(x.shape)}")
        return x


def read_model(model, base_dir=None):
    """The ``onnx.ModelProto`` of ``model`` (a path, bytes, a binary file object or a
    ModelProto, which is not changed) with its external data read from ``base_dir``, by default
    the model file's folder (``tensor_data.read_external_data``: never outside that folder, and
    not at all for bytes, nameless file objects or ModelProtos without ``base_dir``). Raises
    OnnxImportError naming the file or the tensor."""
    proto, where = _read(model)
    if base_dir is None:
        base_dir = model_dir(model)
    given = {"<ModelProto>": "a ModelProto", "<bytes>": "bytes"}.get(where, "a file object")
    return read_external_data(proto, base_dir, given)


def load_model(model, base_dir=None):
    """Read an ONNX model (a path, bytes, a binary file object or an ``onnx.ModelProto``) as an
    ``ember.nn.Module``; external data is read from ``base_dir``, by default the model file's
    folder, never outside it (see ``read_model``). Every node is resolved in the importer
    registry and checked when the model is loaded: an unsupported op, opset or attribute raises
    ``UnsupportedOnnxError`` naming the op, its opset, the node and the attribute."""
    proto = read_model(model, base_dir)
    proto = _convert_old(proto)
    try:
        return OnnxModule(proto)
    except UnsupportedOnnxError as e:
        # ops whose importers start at a later opset: convert the model up once and retry
        opset = _opsets(proto).get("", 0)
        if opset >= 13 or not all(p[4].startswith("no importer for this opset")
                                  for p in e.problems):
            raise
        try:
            import onnx
            from onnx import version_converter
            newer = version_converter.convert_version(onnx.shape_inference.infer_shapes(proto),
                                                      13)
        except Exception:
            raise e from None
        return OnnxModule(newer)
