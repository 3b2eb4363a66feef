"""``save``/``load``: one safetensors file holding the weights and constants as tensors and the IR
text plus call structure as metadata. No pickle, no import: loading needs ember only, not the
model's code. Ops resolve through ember's op registry (the spec); a custom autograd Function is
saved under the name it was registered with (``register_function``) and loaded only from that
registry, so a file can never make ember import or run code it names."""
import json

import numpy as np

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
    """Write ``traced`` (a TracedFunction/TracedModule, optimised or not) to ``path`` atomically.

    Raises SerializationError when the graph calls a custom Function without a registered name.
    """
    from safetensors.numpy import save as to_bytes
    from ember.utils.files import atomic_write
    g = traced.graph
    _check_functions(g, path)
    tensors, formals = {}, []
    for v, t in zip(g.inputs[traced._n_inputs:], traced.state_tensors()):
        tensors[v.name] = np.ascontiguousarray(t._data)
        formals.append([v.name, bool(t._requires_grad)])
    for k, a in g.constants.items():
        tensors["__const__/" + k] = np.ascontiguousarray(a)
    meta = {"format": FORMAT, "name": traced.name, "n_inputs": traced._n_inputs,
            "in_spec": traced._in_spec, "out_spec": traced._out_spec, "state": formals,
            "generators": sorted(g.generators), "random": bool(getattr(traced, "traced_random",
                                                                        False))}
    atomic_write(path, to_bytes(tensors, metadata={"ember_jit_ir": str(g),
                                                   "ember_jit_meta": json.dumps(meta)}))


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
    return traced
