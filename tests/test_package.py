"""Packaging invariants: generated code is fresh, ``import ember`` stays light."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_generated_code_is_up_to_date():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "gen_autograd.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_generator_check_fails_when_stale(tmp_path):
    """--check on a copy of the generated files (no tracked file is rewritten): fresh passes,
    one stale line in any of them fails and names it; a missing one, or a file there that is not
    generated, fails too."""
    gen = [sys.executable, os.path.join(ROOT, "tools", "gen_autograd.py"), "--out-dir",
           str(tmp_path)]
    assert subprocess.run(gen, capture_output=True).returncode == 0
    r = subprocess.run(gen + ["--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout
    names = sorted(os.listdir(tmp_path))
    assert names == ["__init__.py", "functions.py", "methods.py", "nodes.py", "pointwise.py",
                     "records.py"], names
    for name in names:
        with open(tmp_path / name) as fh:
            fresh = fh.read()
        with open(tmp_path / name, "a") as fh:
            fh.write("# stale\n")
        r = subprocess.run(gen + ["--check"], capture_output=True, text=True)
        assert r.returncode == 1 and "stale" in r.stdout and name in r.stdout
        with open(tmp_path / name, "w") as fh:
            fh.write(fresh)
    os.remove(tmp_path / "records.py")
    r = subprocess.run(gen + ["--check"], capture_output=True, text=True)
    assert r.returncode == 1 and "records.py" in r.stdout
    assert subprocess.run(gen, capture_output=True).returncode == 0
    (tmp_path / "by_hand.py").write_text("x = 1\n")
    r = subprocess.run(gen + ["--check"], capture_output=True, text=True)
    assert r.returncode == 1 and "by_hand.py" in r.stdout and "not generated" in r.stdout


def test_import_ember_loads_no_optional_dependency():
    code = ("import sys, ember; bad = [m for m in ('torch', 'onnx', 'onnxruntime', 'numba', "
            "'scipy', 'safetensors', 'tqdm', 'yaml', 'threadpoolctl') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
