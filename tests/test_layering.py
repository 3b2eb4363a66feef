"""The layers of docs/architecture.md: each folder of ember imports only the layers below it
(module-level and function-level imports alike). A new import across layers fails here, naming
the module and what it imported."""
import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASE = {"errors", "_dtype", "_optional", "_shm"}  # leaf modules every layer may use
ALLOWED = {
    "kernels": BASE | {"backends"},
    "autograd": BASE | {"kernels", "tensor", "random"},
    "tensor": BASE | {"autograd"},
    "nn": BASE | {"autograd", "kernels", "tensor", "creation", "random", "overloads",
                  "distributed"},
    "distributed": BASE | {"tensor"},
    "multiprocessing": BASE | {"tensor", "nn"},
    "optim": BASE | {"autograd", "kernels", "tensor"},
    "jit": BASE | {"autograd", "kernels", "tensor", "random", "serialization", "utils"},
    "onnx": BASE | {"autograd", "kernels", "tensor", "jit", "utils", "ember", "nn"},
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
                if target != layer and target not in allowed:
                    bad.append(f"{os.path.relpath(path, ROOT)} imports {mod}")
    assert not bad, "imports across layers (see docs/architecture.md):\n" + "\n".join(bad)
