"""The layers of docs/architecture.md: each folder and top-level module of ember imports only the
layers below it, and ``kernels/runtime``, the runtime every kernel engine shares, imports nothing of
ember outside itself but the leaf modules. Every import form counts: module-level and
function-level, absolute and relative (``from ..kernels import x``), and
``importlib.import_module("ember....")`` with a literal name. A new import across layers fails
here, naming the module and what it imported; a new folder or top-level module fails until it has
a row in ``RULES``."""
import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EMBER = os.path.join(ROOT, "ember")
# leaf modules every layer may use
BASE = {"errors", "_dtype", "_optional", "_shm", "_tensor_str", "utils.files", "utils.hooks"}
ANY = None   # the package itself, the command line: anything

# layer -> (what it may import at any level, what it may import only inside a function). "ember"
# is the public namespace (``import ember``, ``from ember import cat``).
RULES = {
    "errors": (set(), set()),   # the leaves import only each other
    "_dtype": (set(), set()),
    "_optional": (set(), set()),
    "_shm": (set(), set()),
    # ember.device, Tensor.type() inside functions; use_deterministic_algorithms tells the
    # kernel runtime (compiler.keep_first_choices)
    "_settings": (set(), {"tensor", "kernels"}),
    "kernels": ({"backends"}, set()),
    "backends": (set(), set()),
    "autograd": ({"kernels", "tensor", "random"}, set()),
    "tensor": ({"autograd", "ops"}, set()),   # ops.indexing: __getitem__ / __setitem__
    # Tensor.to_sparse loads ember.sparse on first use
    "ops": ({"autograd", "kernels", "tensor", "random", "return_types"}, {"sparse"}),
    "return_types": (set(), set()),
    "random": ({"tensor"}, set()),
    "_finfo": (set(), set()),
    "_tensor_str": (set(), set()),
    "_printing": ({"tensor"}, set()),
    "accelerator": (set(), set()),
    "linalg": ({"autograd", "tensor", "ops", "return_types"}, set()),
    "fft": ({"autograd", "tensor", "ops"}, set()),
    "special": ({"autograd", "tensor", "ops"}, set()),
    # ember.save/load of a whole Module (torch.save(model)): the classes of ember.nn a file may
    # name, Module/Parameter checks; only when called, so jit.save (below nn) never loads nn
    "serialization": ({"autograd", "tensor", "ops"}, {"nn", "ember", "torch_files"}),
    # torch.save's zip files: tensors and Parameters built when read
    "torch_files": (set(), {"ember", "nn", "serialization"}),
    # nn.utils.stateless.functional_call (torch 1.x's name) calls ember.func's when called
    # backends.mha: the transformer fast-path switch
    "nn": ({"autograd", "kernels", "tensor", "ops", "random", "distributed", "backends"},
           {"func"}),
    "sparse": ({"autograd", "kernels", "tensor", "ember"}, set()),  # ember.tensor, ember.cat, ...
    "distributed": ({"tensor"}, set()),
    "multiprocessing": ({"tensor", "nn"}, set()),
    # swa_utils: AveragedModel is a Module, update_bn resets batch norms (nn never imports optim)
    "optim": ({"autograd", "kernels", "tensor", "nn"}, set()),
    "amp": ({"autograd", "tensor", "ember"}, set()),
    "cpu": ({"amp"}, set()),
    "cuda": ({"amp"}, set()),
    "mps": (set(), set()),
    "xpu": (set(), set()),
    "distributions": ({"autograd", "kernels", "tensor", "random", "nn", "ember"}, set()),
    "datasets": ({"tensor"}, set()),
    "signal": ({"ember"}, set()),
    "testing": ({"tensor"}, {"ember"}),   # make_tensor draws with ember's generator
    # stack_module_state stacks with ember.stack; jvp's zeros, vmap's generator state
    "func": ({"autograd", "tensor"}, {"ember", "ops", "random"}),
    # the tensorboard writer's add_graph traces with jit; DistributedSampler asks distributed
    "utils": ({"autograd", "kernels", "tensor", "random"}, {"jit", "distributed"}),
    "jit": ({"autograd", "kernels", "tensor", "random", "serialization"}, set()),
    "onnx": ({"autograd", "kernels", "tensor", "jit", "utils", "ember", "nn"}, set()),
    # ember.compile: traces modules (nn) with the JIT and recognises optimizers' calls
    "compiler": ({"autograd", "kernels", "tensor", "random", "jit", "nn", "optim"}, set()),
    "_dynamo": ({"compiler"}, set()),
    "profiler": ({"autograd"}, set()),   # torch.profiler over autograd.profiler's recorder
    # the install-time kernel build's training steps (and a traced inference plan's kernels)
    "prebuild": ({"ember", "nn", "optim", "kernels", "jit"}, set()),
    "cli": ANY,
    "__main__": ANY,
    "__init__": ANY,
}


def _layers():
    """Every folder and top-level module of ember, by layer name."""
    names = set()
    for entry in os.listdir(EMBER):
        path = os.path.join(EMBER, entry)
        if entry.endswith(".py"):
            names.add(entry[:-3])
        elif os.path.isfile(os.path.join(path, "__init__.py")):
            names.add(entry)
    return names


def _imports(path, root=ROOT):
    """(imported module, inside a function) for each import in ``path`` (under ``root``):
    absolute, relative (resolved against the module's package) and ``import_module`` of a
    literal name."""
    tree = ast.parse(open(path).read())
    rel = os.path.relpath(path, root)[:-3].split(os.sep)
    package = rel[:-1]   # a package's __init__ resolves against the package itself too

    def visit(node, nested):
        for child in ast.iter_child_nodes(node):
            inner = nested or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                yield from ((a.name, nested) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package[:len(package) - child.level + 1]
                    assert child.level <= len(package), f"{path}: relative import above ember"
                    module = ".".join(base + ([child.module] if child.module else []))
                else:
                    module = child.module
                if module == "ember" or not child.module:
                    yield from ((f"{module}.{a.name}", nested) for a in child.names)
                else:
                    yield module, nested
            elif isinstance(child, ast.Call):
                func = child.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                if name in ("import_module", "__import__") and child.args \
                        and isinstance(child.args[0], ast.Constant) \
                        and isinstance(child.args[0].value, str):
                    yield child.args[0].value, nested
            yield from visit(child, inner)

    yield from visit(tree, False)


def _target(module, layers):
    """The layer ``module`` (a dotted name under ember) belongs to, or None outside ember."""
    parts = module.split(".")
    if parts[0] != "ember":
        return None
    if len(parts) == 1:
        return "ember"
    if ".".join(parts[1:3]) in BASE or parts[1] in BASE:
        return "leaf"
    return parts[1] if parts[1] in layers else "ember"   # from ember import cat


def _is_generated(path):
    """Whether ``path`` is generated from the op spec (ember/autograd/_generated*)."""
    rel = os.path.relpath(path, os.path.join(EMBER, "autograd"))
    return rel.split(os.sep)[0].startswith("_generated")


def _paths(layer):
    top = os.path.join(EMBER, layer)
    if os.path.isfile(top + ".py"):
        return [top + ".py"]
    return [os.path.join(d, f) for d, _, fs in os.walk(top) for f in fs if f.endswith(".py")]


def test_every_folder_and_top_level_module_has_a_rule():
    layers = _layers()
    assert not layers - set(RULES), f"no row in RULES for {sorted(layers - set(RULES))}"
    assert not set(RULES) - layers, f"RULES names what ember lacks: {sorted(set(RULES) - layers)}"


def test_each_layer_imports_only_the_layers_below():
    layers = _layers()
    bad = []
    for layer, rule in RULES.items():
        if rule is ANY:
            continue
        anywhere, lazily = rule
        paths = _paths(layer)
        assert paths, layer
        for path in paths:
            for module, nested in _imports(path):
                target = _target(module, layers)
                if target in (None, "leaf", layer) or target in anywhere \
                        or (nested and target in lazily):
                    continue
                if target == "ops" and layer == "autograd" and _is_generated(path):
                    continue   # the generated spec ops call their composites (ember/ops)
                where = "inside a function" if nested else "at module level"
                bad.append(f"{os.path.relpath(path, ROOT)} imports {module} ({where})")
    assert not bad, "imports across layers (see docs/architecture.md):\n" + "\n".join(bad)


def test_relative_and_import_module_imports_are_seen(tmp_path):
    pkg = tmp_path / "ember" / "nn" / "modules"
    pkg.mkdir(parents=True)
    src = pkg / "m.py"
    src.write_text("from . import a\nfrom ..functional import f\nfrom ...kernels import k\n"
                   "def g():\n    import importlib\n    importlib.import_module('ember.onnx')\n")
    found = list(_imports(str(src), str(tmp_path)))
    assert found == [("ember.nn.modules.a", False), ("ember.nn.functional", False),
                     ("ember.kernels", False), ("importlib", True), ("ember.onnx", True)]


def test_the_kernel_runtime_imports_only_itself_and_the_leaf_modules():
    top = os.path.join(EMBER, "kernels", "runtime")
    paths = [os.path.join(d, f) for d, _, fs in os.walk(top) for f in fs if f.endswith(".py")]
    assert paths
    bad = []
    for path in paths:
        for mod, _ in _imports(path):
            parts = mod.split(".")
            if parts[0] != "ember" or mod == "ember.kernels.runtime" \
                    or mod.startswith("ember.kernels.runtime.") \
                    or _target(mod, _layers()) == "leaf":
                continue
            bad.append(f"{os.path.relpath(path, ROOT)} imports {mod}")
    assert not bad, "kernels/runtime imports above itself (see docs/architecture.md):\n" \
        + "\n".join(bad)
