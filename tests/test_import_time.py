"""``import ember`` stays light: what ``python -X importtime -c "import ember"`` lists (a
structural check, never a timing; docs/architecture.md has the measured figures), and the PEP 562
lazy attributes that keep it so (``ember.onnx``, ``ember.distributions``, ``ember.<module>``)."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

OPTIONAL = ("numba", "llvmlite", "scipy", "onnx", "onnxruntime", "safetensors", "torch",
            "threadpoolctl", "mpi4py", "tqdm", "yaml")
# ember's own parts that load on first use
LAZY = ("ember.nn", "ember.optim", "ember.jit", "ember.onnx", "ember.distributions",
        "ember.distributed", "ember.special", "ember.serialization", "ember.utils",
        "ember.kernels.pointwise", "ember.autograd._generated.pointwise", "numpy.random")


def _run(code, *flags):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EMBER_", "NUMBA_"))}
    r = subprocess.run([sys.executable, *flags, "-c", code], capture_output=True, text=True,
                       cwd=ROOT, env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


def _imported_by_import_ember():
    """Module names ``-X importtime`` reports for ``import ember`` (plus sys.modules, which
    also holds what importlib.import_module loaded: importtime does not list those)."""
    r = _run("import sys, ember; print('\\n'.join(sys.modules))", "-X", "importtime")
    listed = {line.split("|")[-1].strip() for line in r.stderr.splitlines()
              if line.startswith("import time:") and "|" in line}
    assert "ember" in listed and "numpy" in listed, r.stderr[-2000:]
    return listed | set(r.stdout.split())


def test_import_ember_imports_nothing_optional():
    mods = _imported_by_import_ember()
    bad = sorted(m for m in mods if m.split(".")[0] in OPTIONAL)
    assert not bad, f"import ember imported optional packages: {bad}"


def test_import_ember_leaves_heavy_parts_lazy():
    mods = _imported_by_import_ember()
    eager = sorted(m for m in LAZY if m in mods)
    assert not eager, f"import ember imported parts that should load on first use: {eager}"


def test_lazy_attributes_load_on_first_use():
    code = """if True:
        import sys, ember
        assert "ember.distributions" not in sys.modules
        d = ember.distributions                      # attribute access imports it
        assert d is sys.modules["ember.distributions"] and d.Normal
        import ember.onnx, ember.jit                 # import ember.x still works
        assert ember.onnx is sys.modules["ember.onnx"]
        assert ember.linalg.det and ember.datasets.load_digits
        assert not hasattr(ember, "no_such_module") and not hasattr(ember, "_private")
        names = dir(ember)
        assert {"onnx", "distributions", "distributed", "linalg", "set_parallel_layer"} \
            <= set(names), names
        f = ember.set_parallel_layer                 # a runtime setting, wrapped as public
        assert "ember.kernels.pointwise" not in sys.modules and f.__wrapped_public__
        try:
            ember.set_parallel_layer(3)
        except ember.EmberError as e:
            assert "set_parallel_layer" in str(e), e
        else:
            raise AssertionError("set_parallel_layer(3) did not raise")
        ember.manual_seed(5); a = ember.rand(3)
        ember.manual_seed(5); assert bool((ember.rand(3) == a).all())
        g = ember.Generator(); s = g.initial_seed()
        assert 0 <= s < 2 ** 63
        assert ember.equal(ember.Generator().manual_seed(s).get_state(), g.get_state())
        print("ok")
    """
    assert _run(code).stdout.strip() == "ok"


def test_attribute_error_for_unknown_names():
    import ember
    with pytest.raises(AttributeError, match="no attribute 'no_such_thing'"):
        ember.no_such_thing  # noqa: B018
