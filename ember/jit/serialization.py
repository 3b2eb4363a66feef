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


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _guard_side(x, n_out):
    """A guard operand as ShapeGuards holds it: ('out', i) of the guard graph, or a number."""
    if isinstance(x, list) and len(x) == 2 and x[0] == "out" and _is_int(x[1]) and \
            0 <= x[1] < n_out:
        return ("out", x[1])
    if x is None or _is_number(x):
        return x
    raise ValueError(f"operand {x!r}")


def _guard_check(c, n_out):
    from ember.jit.guards import CMP
    if not (isinstance(c, list) and len(c) == 7):
        raise ValueError(f"check {c!r} (expected 7 fields)")
    kind, lhs, rhs, expected, how, where, text = c
    lhs, rhs = _guard_side(lhs, n_out), _guard_side(rhs, n_out)
    if kind not in ("value", "cmp") or not isinstance(how, str) or not isinstance(text, str) \
            or (kind == "cmp" and how not in CMP) or not _is_number(expected) and \
            not isinstance(expected, bool):
        raise ValueError(f"check {c!r}")
    if not (isinstance(where, list) and len(where) == 3 and isinstance(where[0], str) and
            _is_int(where[1]) and isinstance(where[2], str)):
        raise ValueError(f"check {c!r} (where)")
    return (kind, lhs, rhs, expected, how, tuple(where), text)


def _load_guards(meta, name, arrays, state_by_name, n_inputs, fail):
    """The ShapeGuards of the file's 'shape_guards' metadata, every field checked (their graph
    takes the traced inputs then the tensors named in 'state'; a check reads an output of that
    graph, or a number); SerializationError naming what is wrong."""
    from ember.jit.guards import ShapeGuards
    from ember.jit.ir import parse
    from ember.tensor import Tensor
    spec = meta.get("shape_guards")
    if spec is None:
        return None
    if not isinstance(spec, dict) or not all(k in spec for k in ("checks", "shapes", "ir",
                                                                 "state")):
        raise fail("corrupt 'shape_guards' metadata (expected checks, shapes, ir and state)")
    if not isinstance(spec["checks"], list) or not isinstance(spec["state"], list) or \
            not (spec["ir"] is None or isinstance(spec["ir"], str)):
        raise fail("corrupt 'shape_guards' metadata (checks and state must be lists, ir a "
                   "string or null)")
    shapes = spec["shapes"]
    if not (isinstance(shapes, list) and len(shapes) == n_inputs and
            all(isinstance(s, list) and all(_is_int(n) and n >= 0 for n in s) for s in shapes)):
        raise fail(f"corrupt 'shape_guards' metadata (shapes {shapes!r}: expected {n_inputs} "
                   f"lists of sizes)")
    g, state = None, []
    if spec["ir"] is not None:
        consts = {k[len("__guard_const__/"):]: a for k, a in arrays.items()
                  if k.startswith("__guard_const__/")}
        g = parse(spec["ir"], constants=consts)
        g.lint()
        for sname in spec["state"]:
            if not isinstance(sname, str):
                raise fail(f"corrupt 'shape_guards' metadata (state name {sname!r})")
            if sname in state_by_name:
                state.append(state_by_name[sname])
            elif sname in arrays:
                state.append(Tensor._make(np.array(arrays[sname])))
            else:
                raise fail(f"the shape guards' tensor {sname!r} is missing from the file")
        if len(g.inputs) != n_inputs + len(state):
            raise fail(f"corrupt 'shape_guards' metadata (its graph takes {len(g.inputs)} "
                       f"inputs, the file gives {n_inputs} + {len(state)})")
    n_out = 0 if g is None else len(g.outputs)
    try:
        checks = [_guard_check(c, n_out) for c in spec["checks"]]
    except ValueError as e:
        raise fail(f"corrupt 'shape_guards' metadata ({e})") from None
    return ShapeGuards(name, g, checks, tuple(tuple(s) for s in shapes), state)


_MAX_SPEC_DEPTH = 64


def _spec_tensors(spec, what, fail, depth=0):
    """The number of tensors ("T") in call-structure spec ``spec`` (ember.jit.traced.flatten's
    form), after checking that form; SerializationError naming ``what`` otherwise."""
    if spec == "T":
        return 1
    bad = fail(f"corrupt '{what}' metadata ({json.dumps(spec)[:80]} is not a tensor, tuple, "
               f"list, size, dict or constant)")
    if depth > _MAX_SPEC_DEPTH or not isinstance(spec, dict) or len(spec) != 1:
        raise bad
    ((kind, body),) = spec.items()
    if kind in ("tuple", "list", "size") and isinstance(body, list):
        return sum(_spec_tensors(s, what, fail, depth + 1) for s in body)
    if kind == "dict" and isinstance(body, list) and all(
            isinstance(it, list) and len(it) == 2 and isinstance(it[0], str) or
            isinstance(it, list) and len(it) == 2 and _is_int(it[0]) for it in body):
        return sum(_spec_tensors(v, what, fail, depth + 1) for _, v in body)
    if kind == "const" and (body is None or isinstance(body, (bool, int, float, str))):
        return 0
    raise bad


def _check_meta(meta, g, arrays, fail):
    """Every field of the file's 'ember_jit_meta' checked against its graph ``g`` and tensors
    ``arrays`` (a crafted file is refused here, not at its first call)."""
    import re
    for key in ("name", "n_inputs", "in_spec", "out_spec", "state", "generators"):
        if key not in meta:
            raise fail(f"corrupt 'ember_jit_meta' metadata (no {key!r} field)")
    name = meta["name"]
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.]{1,256}", name):
        raise fail(f"corrupt 'ember_jit_meta' metadata (name {name!r}: expected 1 to 256 "
                   f"letters, digits, '_' or '.')")
    n_in = meta["n_inputs"]
    if not _is_int(n_in) or not 0 <= n_in <= len(g.inputs):
        raise fail(f"corrupt 'ember_jit_meta' metadata (n_inputs {n_in!r}: the graph has "
                   f"{len(g.inputs)} formals)")
    in_spec = meta["in_spec"]
    if not (isinstance(in_spec, dict) and list(in_spec) == ["tuple"]):
        raise fail(f"corrupt 'in_spec' metadata ({json.dumps(in_spec)[:80]}: expected the tuple "
                   f"of the call's arguments)")
    if _spec_tensors(in_spec, "in_spec", fail) != n_in:
        raise fail(f"corrupt 'in_spec' metadata: it holds {_spec_tensors(in_spec, '', fail)} "
                   f"tensors, n_inputs is {n_in}")
    n_out = _spec_tensors(meta["out_spec"], "out_spec", fail)
    if n_out != len(g.outputs):
        raise fail(f"corrupt 'out_spec' metadata: it holds {n_out} tensors, the graph returns "
                   f"{len(g.outputs)}")
    state = meta["state"]
    if not isinstance(state, list) or not all(
            isinstance(e, list) and len(e) == 2 and isinstance(e[0], str) and
            isinstance(e[1], bool) for e in state):
        raise fail("corrupt 'ember_jit_meta' metadata (state: expected [name, requires_grad] "
                   "pairs)")
    if len({e[0] for e in state}) != len(state) or n_in + len(state) != len(g.inputs):
        raise fail(f"corrupt 'ember_jit_meta' metadata: {n_in} inputs and {len(state)} state "
                   f"tensors (names unique) for a graph of {len(g.inputs)} formals")
    for (sname, _), v in zip(state, g.inputs[n_in:]):
        a = arrays.get(sname)
        if a is None:
            raise fail(f"the state tensor {sname!r} is missing from the file")
        if a.shape != v.shape or a.dtype != v.dtype:
            raise fail(f"the state tensor {sname!r} is {a.dtype}{list(a.shape)}, its formal "
                       f"%{v.name} is {v.type_str}")
    gens = meta["generators"]
    if not isinstance(gens, list) or not all(isinstance(n, str) for n in gens) or \
            len(set(gens)) != len(gens):
        raise fail(f"corrupt 'ember_jit_meta' metadata (generators {gens!r}: expected distinct "
                   f"names)")
    if not isinstance(meta.get("random", False), bool):
        raise fail(f"corrupt 'ember_jit_meta' metadata (random {meta['random']!r})")


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
    gens = meta["generators"]
    if not isinstance(gens, list) or not all(isinstance(n, str) for n in gens):
        raise fail(f"corrupt 'ember_jit_meta' metadata (generators {gens!r})")
    consts = {k[len("__const__/"):]: a for k, a in arrays.items() if k.startswith("__const__/")}
    g = parse(ir_text, constants=consts, generators={n: Generator() for n in gens})
    for n in g.nodes:
        if n.kind == "constant" and n.attrs.get("name") not in consts:
            raise fail(f"the graph's constant %{n.output.name} names tensor "
                       f"'__const__/{n.attrs.get('name')}', which the file does not contain")
    g.lint()
    _check_meta(meta, g, arrays, fail)
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
                                  dict(zip(traced.state_names, state)), meta["n_inputs"], fail)
    traced._compile()   # the generated code too: a file that loads can be called
    return traced
