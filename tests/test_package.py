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
    gen = os.path.join(ROOT, "ember", "autograd", "_generated.py")
    with open(gen) as fh:
        original = fh.read()
    try:
        with open(gen, "a") as fh:
            fh.write("# stale\n")
        r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "gen_autograd.py"),
                            "--check"], capture_output=True, text=True)
        assert r.returncode == 1 and "stale" in r.stdout
    finally:
        with open(gen, "w") as fh:
            fh.write(original)


def test_import_ember_loads_no_optional_dependency():
    code = ("import sys, ember; bad = [m for m in ('torch', 'onnx', 'onnxruntime', 'numba', "
            "'scipy', 'safetensors', 'tqdm', 'yaml', 'threadpoolctl') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
