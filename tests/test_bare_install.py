"""A plain ``pip install ember`` (no extras) runs ``ember demo`` to the end, its save step
included, on NumPy alone: ember is built into a wheel, installed into a fresh virtual
environment (its core dependencies, NumPy and safetensors, come from the package index or pip's
cache; no numba, scipy, onnx, tqdm, threadpoolctl), and the demo trains one epoch, saves and
reloads its checkpoint. Skips when no package index can be reached."""
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.slow

# what pip prints when the index (or the network) cannot be reached
_OFFLINE = ("Could not find a version that satisfies", "No matching distribution found",
            "Failed to establish a new connection", "Network is unreachable",
            "Temporary failure in name resolution", "Name or service not known", "ProxyError",
            "ConnectTimeout", "Read timed out", "Connection refused", "Max retries exceeded")


def _env():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("EMBER_", "NUMBA_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    return env


def _run(cmd, timeout, cwd=None):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_env(),
                              cwd=cwd)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"timed out after {timeout} s: {' '.join(cmd)}\n{e.stdout}\n{e.stderr}")


def _wheel(tmp_path):
    """Build ember's wheel from a copy of the sources (nothing written into the checkout)."""
    src = tmp_path / "src"
    shutil.copytree(os.path.join(ROOT, "ember"), src / "ember",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(os.path.join(ROOT, name), src / name)
    out = tmp_path / "wheels"
    cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(src)]
    r = _run(cmd[:4] + ["--no-build-isolation"] + cmd[4:], timeout=300)  # installed setuptools
    if r.returncode != 0:  # none (or too old): pip fetches the build backend
        r = _run(cmd, timeout=300)
        _skip_if_offline(r, "building the wheel")
    assert r.returncode == 0, r.stdout + r.stderr
    (wheel,) = out.glob("ember-*.whl")
    return wheel


def _installed(python, modules):
    """The subset of ``modules`` that ``python`` can import."""
    code = f"import importlib.util as u; print(*[m for m in {modules!r} if u.find_spec(m)])"
    r = _run([python, "-c", code], timeout=60)
    assert r.returncode == 0, r.stderr
    return set(r.stdout.split())


def _skip_if_offline(r, what):
    if r.returncode != 0 and any(s in r.stderr for s in _OFFLINE):
        pytest.skip(f"no package index reachable ({what}): {r.stderr.strip().splitlines()[-1]}")


def test_bare_install_runs_the_demo_without_numba(tmp_path):
    wheel = _wheel(tmp_path)
    venv = tmp_path / "venv"
    r = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], timeout=120)
    assert r.returncode == 0, r.stderr
    py = str(venv / "bin" / "python")
    install = [sys.executable, "-m", "pip", "--python", py, "install", "-q", "--timeout", "30",
               "--retries", "1", str(wheel)]
    r = _run(install, timeout=600)
    if r.returncode != 0 and "no such option: --python" in r.stderr:  # pip older than 22.3
        r = _run([py, "-m", "ensurepip", "-q"], timeout=300)
        assert r.returncode == 0, r.stderr
        r = _run([py, "-m", "pip"] + install[5:], timeout=600)
    _skip_if_offline(r, "installing ember")
    assert r.returncode == 0, r.stdout + r.stderr
    optional = ("numba", "scipy", "onnx", "onnxruntime", "tqdm", "threadpoolctl", "torch")
    assert not _installed(py, optional), "a bare install brought optional packages"
    assert _installed(py, ("numpy", "safetensors")) == {"numpy", "safetensors"}

    r = _run([py, "-c", "from ember.kernels.runtime import compiler as n; "
              "print(n.has_compiler())"], timeout=120, cwd=str(tmp_path))
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stdout + r.stderr

    out = tmp_path / "out"
    r = _run([str(venv / "bin" / "ember"), "demo", "--epochs", "1", "--no-progress",
              "--out", str(out)], timeout=300, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    ckpt = out / "lenet_digits.safetensors"
    assert ckpt.is_file() and ckpt.stat().st_size > 10_000
    assert f"checkpoint       {ckpt} (reloaded: test accuracy" in r.stdout, r.stdout
    assert "onnx: skipped (install ember[onnx]" in r.stdout, r.stdout
    assert "epoch  1/1" in r.stdout and "held-out test" in r.stdout
