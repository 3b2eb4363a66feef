"""``save``/``load``: one safetensors file holding the weights and constants as tensors and the IR
text plus call structure as metadata. No pickle, no import: loading needs ember only, not the
model's code. Ops resolve through ember's op registry (the spec); a custom autograd Function is
saved under the name it was registered with (``register_function``) and loaded only from that
registry, so a file can never make ember import or run code it names."""
import json

import numpy as np

from ember._optional import require
from ember.errors import EmberError

__all__ = ["save", "load", "register_function", "FORMAT"]

FORMAT = "ember.jit/1"


def register_function(cls, name=None):
    """Register the custom autograd Function ``cls`` under ``name`` (default
    ``"<module>.<qualname>"``) for ``save`` and ``load`` (see
    ``ember.autograd.function.register_function``; ``ember.serialization.add_safe_globals`` is
    the list form). Returns ``cls``."""
    from ember.autograd.function import register_function as register
    return register(cls, name)


def _check_functions(graph, path):
    from ember.autograd.function import function_name
    from ember.serialization import SerializationError
    for n in graph.nodes:
        if n.kind == "python_function" and function_name(n.attrs["cls"]) is None:
            cls = n.attrs["cls"]
            raise SerializationError(
                f"ember.jit.save: {str(path)!r}: the graph calls the custom autograd Function "
                f"{cls.__module__}.{cls.__qualname__}, which has no registered name; register "
                f"it first with ember.jit.register_function({cls.__qualname__}, 'some.name') "
                f"(or ember.serialization.add_safe_globals) and do the same before "
                f"ember.jit.load")


def save(traced, path):
    """Write ``traced`` (a TracedFunction/TracedModule, optimised or not) to ``path`` atomically,
    or into a binary file object.

    Raises SerializationError when the graph calls a custom Function without a registered name.
    """
    to_bytes = require("safetensors.numpy", feature="ember.jit.save").save
    from ember.utils.files import atomic_write
    g = traced.graph
    _check_functions(g, path)
    tensors, formals = {}, []
    for v, t in zip(g.inputs[traced._n_inputs:], traced.state_tensors()):
        tensors[v.name] = np.ascontiguousarray(t._data)
        formals.append([v.name, bool(t._requires_grad)])
    for k, a in g.constants.items():
        tensors["__const__/" + k] = np.ascontiguousarray(a)
    guards = _save_guards(traced, tensors, path)
    meta = {"format": FORMAT, "name": traced.name, "n_inputs": traced._n_inputs,
            "in_spec": traced._in_spec, "out_spec": traced._out_spec, "state": formals,
            "generators": sorted(g.generators), "random": bool(getattr(traced, "traced_random",
                                                                        False))}
    if guards is not None:
        meta["shape_guards"] = guards
    payload = to_bytes(tensors, metadata={"ember_jit_ir": str(g),
                                          "ember_jit_meta": json.dumps(meta)})
    if hasattr(path, "write"):
        path.write(payload)
        return
    atomic_write(path, payload)


def _save_guards(traced, tensors, path):
    """The trace's shape guards (ember.jit.guards) as JSON: their graph's IR, the checks and
    the traced shapes; the constants and the state tensors that graph reads go in ``tensors``
    (a state tensor the traced graph binds too is saved once, by its formal's name)."""
    sg = getattr(traced, "_guards", None)
    if sg is None:
        return None
    out = {"checks": [[k, list(l) if isinstance(l, tuple) else l,
                       list(r) if isinstance(r, tuple) else r, e, h, list(w), t]
                      for k, l, r, e, h, w, t in sg.checks],
           "shapes": [list(s) for s in sg.shapes], "ir": None, "state": []}
    if sg.graph is None:
        return out
    _check_functions(sg.graph, path)
    out["ir"] = str(sg.graph)
    for k, a in sg.graph.constants.items():
        tensors["__guard_const__/" + k] = np.ascontiguousarray(a)
    own = {id(t): v.name for v, t in zip(traced.graph.inputs[traced._n_inputs:],
                                        traced.state_tensors())}
    for i, t in enumerate(sg.state):
        if id(t) in own:
            out["state"].append(own[id(t)])
        else:
            tensors[f"__guard_state__/{i}"] = np.ascontiguousarray(t._data)
            out["state"].append(f"__guard_state__/{i}")
    return out


def _load_guards(meta, name, arrays, state_by_name, fail):
    from ember.jit.guards import ShapeGuards
    from ember.jit.ir import parse
    from ember.tensor import Tensor
    spec = meta.get("shape_guards")
    if spec is None:
        return None
    if not isinstance(spec, dict) or not all(k in spec for k in ("checks", "shapes", "ir",
                                                                 "state")):
        raise fail("corrupt 'shape_guards' metadata")
    checks = []
    for c in spec["checks"]:
        kind, lhs, rhs, expected, how, where, text = c
        if kind not in ("value", "cmp"):
            raise fail(f"corrupt 'shape_guards' metadata (kind {kind!r})")
        side = [tuple(x) if isinstance(x, list) else x for x in (lhs, rhs)]
        checks.append((kind, side[0], side[1], expected, str(how),
                       (str(where[0]), int(where[1]), str(where[2])), str(text)))
    g, state = None, []
    if spec["ir"] is not None:
        consts = {k[len("__guard_const__/"):]: a for k, a in arrays.items()
                  if k.startswith("__guard_const__/")}
        g = parse(spec["ir"], constants=consts)
        g.lint()
        for sname in spec["state"]:
            if sname in state_by_name:
                state.append(state_by_name[sname])
            elif sname in arrays:
                state.append(Tensor._make(np.array(arrays[sname])))
            else:
                raise fail(f"the shape guards' tensor {sname!r} is missing from the file")
    shapes = tuple(tuple(int(n) for n in s) for s in spec["shapes"])
    return ShapeGuards(name, g, checks, shapes, state)


def load(f):
    """Read a file written by ``save`` (a path or binary file object); returns a TracedFunction
    owning its parameters.

    Raises UnsafeFileError for pickle files (``torch.save``, ``torch.jit.save``: never
    unpickled) and other formats, SerializationError for a truncated or corrupt file, another
    format version, a missing tensor, an unknown op or a custom Function name that is not
    registered.
    """
    from ember.serialization import SerializationError, read_bytes, read_safetensors
    data, name = read_bytes(f)
    _, md, arrays = read_safetensors(data, name, "ember.jit.load")

    def fail(what):
        return SerializationError(f"ember.jit.load: {name}: {what}")
    if "ember_jit_ir" not in md:
        raise fail("not an ember.jit file (no IR in its metadata)")
    try:
        meta = json.loads(md.get("ember_jit_meta", ""))
    except (ValueError, RecursionError) as e:
        raise fail(f"corrupt 'ember_jit_meta' metadata (not JSON: {e})") from None
    if not isinstance(meta, dict):
        raise fail("corrupt 'ember_jit_meta' metadata (expected a JSON object)")
    if meta.get("format") != FORMAT:
        raise fail(f"written in format {meta.get('format')!r}; this ember reads {FORMAT!r}")
    try:
        return _build(md["ember_jit_ir"], meta, arrays, fail)
    except EmberError:
        raise
    except Exception as e:  # noqa: BLE001 - a crafted file: any failure is reported as ours
        raise fail(f"cannot read the graph: {type(e).__name__}: {e}") from None


def _build(ir_text, meta, arrays, fail):
    from ember.jit.ir import parse
    from ember.jit.traced import TracedFunction
    from ember.random import Generator
    from ember.tensor import Tensor
    for key in ("name", "n_inputs", "in_spec", "out_spec", "state", "generators"):
        if key not in meta:
            raise fail(f"corrupt 'ember_jit_meta' metadata (no {key!r} field)")
    consts = {k[len("__const__/"):]: a for k, a in arrays.items() if k.startswith("__const__/")}
    g = parse(ir_text, constants=consts, generators={n: Generator() for n in meta["generators"]})
    for n in g.nodes:
        if n.kind == "constant" and n.attrs.get("name") not in consts:
            raise fail(f"the graph's constant %{n.output.name} names tensor "
                       f"'__const__/{n.attrs.get('name')}', which the file does not contain")
    g.lint()
    state = []
    for sname, rg in meta["state"]:
        if sname not in arrays:
            raise fail(f"the state tensor {sname!r} is missing from the file")
        t = Tensor._make(np.array(arrays[sname]))
        if rg:
            t.requires_grad_(True)
        state.append(t)
    traced = TracedFunction(g, meta["in_spec"], meta["out_spec"], meta["n_inputs"], state,
                            meta["name"])
    traced.state_names = [n for n, _ in meta["state"]]
    traced.traced_random = meta.get("random", False)
    traced.inference_plan = not state  # no live parameters: inference plans (ember.jit.plan)
    traced._guards = _load_guards(meta, meta["name"], arrays,
                                  dict(zip(traced.state_names, state)), fail)
    return traced
