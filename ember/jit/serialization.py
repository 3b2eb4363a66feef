"""``save``/``load``: one safetensors file holding the weights and constants as tensors and the IR
text plus call structure as metadata. No pickle; loading needs ember only, not the model's code
(except custom autograd Functions, which are imported by qualified name)."""
import json

import numpy as np

__all__ = ["save", "load", "FORMAT"]

FORMAT = "ember.jit/1"


def save(traced, path):
    """Write ``traced`` (a TracedFunction/TracedModule, optimised or not) to ``path`` atomically."""
    from safetensors.numpy import save as to_bytes
    from ember.utils.files import atomic_write
    g = traced.graph
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


def load(path):
    """Read a file written by ``save``; returns a TracedFunction owning its parameters."""
    from safetensors import safe_open
    from ember.jit.ir import parse
    from ember.jit.traced import TracedFunction
    from ember.random import Generator
    from ember.tensor import Tensor
    with safe_open(str(path), framework="np") as f:
        md = f.metadata() or {}
        if "ember_jit_ir" not in md:
            raise ValueError(f"{path}: not an ember.jit file (no IR in its metadata)")
        meta = json.loads(md["ember_jit_meta"])
        arrays = {k: f.get_tensor(k) for k in f.keys()}
    consts = {k[len("__const__/"):]: a for k, a in arrays.items() if k.startswith("__const__/")}
    g = parse(md["ember_jit_ir"], constants=consts,
              generators={n: Generator() for n in meta["generators"]})
    g.lint()
    state = []
    for name, rg in meta["state"]:
        t = Tensor._make(np.array(arrays[name]))
        if rg:
            t.requires_grad_(True)
        state.append(t)
    traced = TracedFunction(g, meta["in_spec"], meta["out_spec"], meta["n_inputs"], state,
                            meta["name"])
    traced.state_names = [n for n, _ in meta["state"]]
    traced.traced_random = meta.get("random", False)
    return traced
