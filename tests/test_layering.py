"""The layers of docs/architecture.md: each folder of ember imports only the layers below it
(module-level and function-level imports alike), and ``kernels/runtime``, the runtime every kernel
engine shares, imports nothing of ember outside itself but the leaf modules. A new import across
layers fails here, naming the module and what it imported."""
import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASE = {"errors", "_dtype", "_optional", "_shm"}  # leaf modules every layer may use
ALLOWED = {
    "kernels": BASE | {"backends"},
    "autograd": BASE | {"kernels", "tensor", "random"},
    "tensor": BASE | {"autograd", "ops"},   # ops.indexing: __getitem__ / __setitem__
    "ops": BASE | {"autograd", "kernels", "tensor", "random", "return_types"},
    "nn": BASE | {"autograd", "kernels", "tensor", "ops", "random", "distributed"},
    "sparse": BASE | {"autograd", "kernels", "tensor", "ember"},  # ember.tensor, ember.cat, ...
    "distributed": BASE | {"tensor"},
    "multiprocessing": BASE | {"tensor", "nn"},
    "optim": BASE | {"autograd", "kernels", "tensor"},
    "jit": BASE | {"autograd", "kernels", "tensor", "random", "serialization", "utils"},
    "onnx": BASE | {"autograd", "kernels", "tensor", "jit", "utils", "ember", "nn"},
    # ember.compile: traces modules (nn) with the JIT and recognises optimizers' calls
    "compiler": BASE | {"autograd", "kernels", "tensor", "random", "jit", "nn", "optim"},
}


def _imports(path):
    tree = ast.parse(open(path).read())
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            yield from (a.name for a in n.names)
        elif isinstance(n, ast.ImportFrom) and n.level == 0 and n.module:
            if n.module == "ember":
                yield from (f"ember.{a.name}" for a in n.names)
            else:
                yield n.module


def _is_generated(path):
    """Whether ``path`` is generated from the op spec (ember/autograd/_generated*)."""
    rel = os.path.relpath(path, os.path.join(ROOT, "ember", "autograd"))
    return rel.split(os.sep)[0].startswith("_generated")


def test_each_layer_imports_only_the_layers_below():
    bad = []
    for layer, allowed in ALLOWED.items():
        top = os.path.join(ROOT, "ember", layer)
        paths = [top + ".py"] if os.path.isfile(top + ".py") else [
            os.path.join(d, f) for d, _, fs in os.walk(top) for f in fs if f.endswith(".py")]
        assert paths, layer
        for path in paths:
            for mod in _imports(path):
                parts = mod.split(".")
                if parts[0] != "ember":
                    continue
                target = parts[1] if len(parts) > 1 else "ember"
                if target == "ops" and layer == "autograd" and _is_generated(path):
                    continue   # the generated spec ops call their composites (ember/ops)
                if target != layer and target not in allowed:
                    bad.append(f"{os.path.relpath(path, ROOT)} imports {mod}")
    assert not bad, "imports across layers (see docs/architecture.md):\n" + "\n".join(bad)


def test_the_kernel_runtime_imports_only_itself_and_the_leaf_modules():
    top = os.path.join(ROOT, "ember", "kernels", "runtime")
    paths = [os.path.join(d, f) for d, _, fs in os.walk(top) for f in fs if f.endswith(".py")]
    assert paths
    bad = []
    for path in paths:
        for mod in _imports(path):
            parts = mod.split(".")
            if parts[0] != "ember" or mod == "ember.kernels.runtime" \
                    or mod.startswith("ember.kernels.runtime.") \
                    or (len(parts) == 2 and parts[1] in BASE):
                continue
            bad.append(f"{os.path.relpath(path, ROOT)} imports {mod}")
    assert not bad, "kernels/runtime imports above itself (see docs/architecture.md):\n" \
        + "\n".join(bad)
