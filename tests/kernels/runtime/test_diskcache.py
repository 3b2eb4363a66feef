"""The pointwise kernel disk cache trusts nothing it finds: an owner-only directory, sources
compared byte for byte before use, one fallback directory per process; bounded memory caches."""
import json
import os
import stat
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

from ember.kernels.pointwise import Expr, compile_pointwise, engine
from ember.kernels.runtime import compiler, diskcache

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX ownership and modes")


@pytest.fixture
def cache_env(tmp_path, monkeypatch):
    monkeypatch.setattr(diskcache, "_fallback", None)
    monkeypatch.setattr(diskcache, "_refused", set())
    root = tmp_path / "cache"
    monkeypatch.setenv("EMBER_CACHE_DIR", str(root))
    return root


def _source(tag):
    return f"# test kernel {tag}\nVALUE = {len(tag)}\n"


def test_directory_is_created_owner_only(cache_env):
    old = os.umask(0o022)
    try:
        path = diskcache.cache_dir()
    finally:
        os.umask(old)
    assert path == str(cache_env / "pointwise")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(cache_env).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(os.path.join(path, "__pycache__")).st_mode) == 0o700


def test_loose_numba_pycache_is_refused(cache_env):
    pycache = cache_env / "pointwise" / "__pycache__"
    pycache.mkdir(parents=True, mode=0o700)
    os.chmod(pycache, 0o777)
    with pytest.warns(RuntimeWarning, match="__pycache__ is unsafe: it is writable by group"):
        assert diskcache.cache_dir() != str(pycache.parent)


def test_tampered_kernel_file_is_not_executed(cache_env, tmp_path):
    src = _source(str(tmp_path))
    name = diskcache.module_name(src, "test")
    directory = diskcache.cache_dir()
    sentinel = tmp_path / "sentinel"
    planted = f"open({str(sentinel)!r}, 'w').write('ran')\nVALUE = -1\n"
    with open(os.path.join(directory, name + ".py"), "w") as f:
        f.write(planted)
    module = diskcache.load_source(src, "test")
    assert module.VALUE == len(str(tmp_path)) and not sentinel.exists()
    with open(os.path.join(directory, name + ".py")) as f:
        assert f.read() == src
    diskcache.release(module)
    assert module.__name__ not in sys.modules


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o722])
def test_directory_writable_by_others_is_refused(cache_env, tmp_path, mode):
    loose = cache_env / "pointwise"
    loose.mkdir(parents=True, mode=0o700)
    os.chmod(loose, mode)
    with pytest.warns(RuntimeWarning, match="writable by group or others"):
        path = diskcache.cache_dir()
    assert path != str(loose)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        module = diskcache.load_source(_source(f"{tmp_path}{mode}"), "test")  # warned once only
    assert os.path.dirname(module.__file__) == path and not os.listdir(loose)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o700
    diskcache.release(module)


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="needs root to chown")
def test_directory_owned_by_another_user_is_refused(cache_env):
    other = cache_env / "pointwise"
    other.mkdir(parents=True, mode=0o700)
    os.chown(other, 65534, 65534)
    with pytest.warns(RuntimeWarning, match="owned by another user"):
        assert diskcache.cache_dir() != str(other)


def test_unusable_directory_gives_one_fallback_for_the_process(tmp_path, monkeypatch):
    monkeypatch.setattr(diskcache, "_fallback", None)
    monkeypatch.setattr(diskcache, "_refused", set())
    (tmp_path / "file").write_text("not a directory")
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "file" / "sub"))
    with pytest.warns(RuntimeWarning, match="cannot be created") as record:
        modules = [diskcache.load_source(_source(f"{tmp_path}/{i}"), "test") for i in range(5)]
    assert len(record) == 1
    dirs = {os.path.dirname(m.__file__) for m in modules}
    assert len(dirs) == 1 and dirs == {diskcache._fallback}
    assert sorted(os.listdir(diskcache._fallback)) == sorted(
        os.path.basename(m.__file__) for m in modules)
    for m in modules:
        diskcache.release(m)


def _expr(i):
    return Expr(("x",), [("t", "mul", ("x", float(i))), ("y", "relu", ("t",))], ("y",))


def test_kernel_cache_is_bounded_and_releases_modules(monkeypatch, tmp_path, cache_env):
    monkeypatch.setattr(engine._kernels, "maxsize", 3)
    x = np.ones(4, np.float32)
    first = compile_pointwise(_expr(1000), (x,))
    module = diskcache.load_source(_source(str(tmp_path)), "test")
    first._modules.append(module)
    kernels = [compile_pointwise(_expr(1000 + i), (x,)) for i in range(1, 10)]
    assert len(engine._kernels) == 3
    assert compile_pointwise(_expr(1009), (x,)) is kernels[-1]
    assert module.__name__ not in sys.modules
    again = compile_pointwise(_expr(1000), (x,))
    assert again is not first
    np.testing.assert_array_equal(again(x * -2)[0], 0)
    np.testing.assert_array_equal(first(x)[0], 1000)  # a dropped kernel still works


def test_fusion_group_cache_is_bounded(monkeypatch):
    from ember.jit import fused, parse
    monkeypatch.setattr(fused._GROUPS, "maxsize", 2)
    def sub(op):
        return parse(f"graph(%x : f32[3]):\n  %1 : f32[3] = {op}(%x)\n  return (%1)")
    groups = [fused.fused_group(sub(op)) for op in ("relu", "neg", "exp", "tanh")]
    assert len(fused._GROUPS) == 2
    assert fused.fused_group(sub("tanh")) is groups[-1]
    assert fused.fused_group(sub("relu")) is not groups[0]


def _run_process(code, **env):
    """Run ``code`` in a fresh process from the checkout; return its last stdout line as JSON."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    full = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""), **env)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=full, cwd=root, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


LOAD = """
    import json, time
    import numpy as np
    from ember.kernels.pointwise import Expr, compile_pointwise
    x = np.linspace(-3, 3, 50000).astype(np.float32)
    k = compile_pointwise(Expr(("x",), [("t", "tanh", ("x",)), ("y", "mul", ("t", 1.75))], ("y",)), (x,))
    start = time.perf_counter()
    (y,) = k(x, backend="numba")
    elapsed = time.perf_counter() - start
    (fn,) = k._variants.values()
    assert np.allclose(y, np.tanh(x) * 1.75, rtol=1e-6, atol=1e-6)
    print(json.dumps({"hits": sum(fn.stats.cache_hits.values()), "misses": sum(fn.stats.cache_misses.values()),
                      "seconds": elapsed}))
"""


@pytest.mark.skipif(not compiler.has_compiler(), reason="numba not importable")
def test_second_process_loads_from_the_disk_cache(tmp_path):
    env = {"EMBER_CACHE_DIR": str(tmp_path)}
    first = _run_process(LOAD, **env)
    second = _run_process(LOAD, **env)
    assert first["hits"] == 0 and first["misses"] == 1
    assert second["hits"] == 1 and second["misses"] == 0
    sources = [p for p in os.listdir(tmp_path / "pointwise") if p.endswith(".py")]
    assert len(sources) == 1 and not [p for p in os.listdir(tmp_path / "pointwise") if p.endswith(".tmp")]
