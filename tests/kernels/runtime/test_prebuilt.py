"""The install-time kernel cache: a cache built ahead of time (``prebuilt``) is copied into a
fresh process's empty Numba cache, whose kernels then load on first use instead of compiling in
the background; what the copy never does (replace files, trust a writable directory, use a
cache built for another copy of ember)."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from ember.kernels.runtime import compiler, prebuilt

pytestmark = pytest.mark.skipif(not compiler.has_compiler(), reason="needs Numba")


def test_cache_subdirectory_is_numbas():
    from numba.core.caching import _CacheLocator
    for d in (os.path.dirname(prebuilt.__file__), "/tmp/some where/pointwise"):
        assert prebuilt._numba_subdir(d) == \
            _CacheLocator.get_suitable_cache_subpath(os.path.join(d, "k.py"))


def _fake_prebuilt(root, files, kernels_root=prebuilt._KERNELS_ROOT, package="pool"):
    sub = prebuilt._numba_subdir(os.path.join(prebuilt._KERNELS_ROOT, package))
    os.makedirs(os.path.join(root, "numba", sub))
    for name, data in files.items():
        with open(os.path.join(root, "numba", sub, name), "w") as f:
            f.write(data)
    with open(os.path.join(root, prebuilt.MANIFEST), "w") as f:
        json.dump({"kernels_root": kernels_root, "dirs": [
            {"subdir": sub, "kind": "kernels", "package": package, "files": sorted(files)}]}, f)
    os.chmod(root, 0o755)
    return sub


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """A prebuilt directory and an empty NUMBA_CACHE_DIR; the module's once-per-process state
    reset around the test."""
    pre, cache = tmp_path / "pre", tmp_path / "cache"
    monkeypatch.setenv("EMBER_PREBUILT_DIR", str(pre))
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(cache))
    monkeypatch.setattr(prebuilt, "_seeded", None)
    monkeypatch.setattr(prebuilt, "_pointwise", set())
    return str(pre), str(cache)


FILES = {"pool2d_numba.scatter-12.py311.nbi": "index", "pool2d_numba.scatter-12.py311.1.nbc": "a",
         "pool2d_numba.scatter-12.py311.2.nbc": "b", "pool2d_numba.planes-40.py311.nbi": "index2"}


def test_seed_copies_what_the_cache_lacks_and_never_replaces_a_file(fresh):
    pre, cache = fresh
    sub = _fake_prebuilt(pre, FILES)
    os.makedirs(os.path.join(cache, sub))
    with open(os.path.join(cache, sub, "pool2d_numba.planes-40.py311.nbi"), "w") as f:
        f.write("the user's own")
    assert prebuilt.seed() == ["ember.kernels.pool.pool2d_numba"]
    got = {n: open(os.path.join(cache, sub, n)).read()
           for n in os.listdir(os.path.join(cache, sub))}
    assert got == dict(FILES, **{"pool2d_numba.planes-40.py311.nbi": "the user's own"})
    assert prebuilt.seed() == ["ember.kernels.pool.pool2d_numba"]   # once per process


def test_seed_refuses_a_writable_directory_and_another_copy_of_ember(fresh):
    pre, cache = fresh
    _fake_prebuilt(pre, FILES)
    os.chmod(pre, 0o777)
    assert prebuilt.seed() == [] and not os.path.exists(cache)
    prebuilt._seeded = None
    os.chmod(pre, 0o755)
    with open(os.path.join(pre, prebuilt.MANIFEST)) as f:
        manifest = json.load(f)
    manifest["kernels_root"] = "/elsewhere/ember/kernels"
    with open(os.path.join(pre, prebuilt.MANIFEST), "w") as f:
        json.dump(manifest, f)
    assert prebuilt.seed() == [] and not os.path.exists(cache)


def test_seed_without_a_prebuilt_directory_does_nothing(fresh):
    assert prebuilt.seed() == []


BUILD = """
    import numpy as np, sys
    from ember.kernels.pool import pool2d as pool
    from ember.kernels.pointwise import Builder, compile_pointwise
    from ember.kernels.runtime import diskcache, prebuilt
    x = np.random.default_rng(0).standard_normal((8, 6, 28, 28)).astype(np.float32)
    pool.max_pool2d_forward(x, 2, 2, 0, 1, False)
    b = Builder(("x", "y"))
    u, v = b.inputs
    k = compile_pointwise(b.expr(b.emit("mul", b.emit("mul", u, v), 0.5)), (np.float64, np.float64))
    k(np.linspace(-2, 2, 1 << 16), np.linspace(-2, 2, 1 << 16))
    prebuilt.write_manifest(sys.argv[1], diskcache.cache_dir())
"""

COLD = """
    import numpy as np
    from ember.kernels.pool import pool2d as pool, pool2d_numba as pool_numba
    from ember.kernels.pointwise import Builder, compile_pointwise
    from ember.kernels.runtime import compiler, compile_process
    x = np.random.default_rng(0).standard_normal((8, 6, 28, 28)).astype(np.float32)
    y, i = pool.max_pool2d_forward(x, 2, 2, 0, 1, False)
    np.testing.assert_array_equal(y, x.reshape(8, 6, 14, 2, 14, 2).max(axis=(3, 5)))
    ran = len(pool_numba.planes_2x2.overloads)
    b = Builder(("x", "y"))
    u, v = b.inputs
    k = compile_pointwise(b.expr(b.emit("mul", b.emit("mul", u, v), 0.5)), (np.float64, np.float64))
    a = np.linspace(-2, 2, 1 << 16)
    k(a, a)
    compiler.wait_compiles()
    np.testing.assert_array_equal(k(a, a)[0], a * a * 0.5)
    y2, i2 = pool.max_pool2d_forward(x, 2, 2, 0, 1, False)
    np.testing.assert_array_equal(y2, y)
    np.testing.assert_array_equal(i2, i)
    kernels = [pool_numba.planes_2x2] + list(k._variants.values())
    print("first call compiled", ran, "then", len(pool_numba.planes_2x2.overloads))
    print("misses", sum(sum(f._cache_misses.values()) for f in kernels))
    print("hits", sum(sum(f._cache_hits.values()) for f in kernels))
    print("worker", compile_process._proc is not None)
    print("background", sorted(n for n, _ in compiler.background_compiles()[0]))
"""


def _run(code, env, *args):
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout.split("\n")


def test_a_fresh_cache_loads_the_prebuilt_kernels_on_first_use(tmp_path):
    """Built ahead of time (sync) into a prebuilt directory: a process with empty Numba and
    ember caches under "background" runs max pooling's NumPy path on its first call while
    Numba loads on the compile thread (the call does not wait for it), then its kernel, loads
    both kernels from the copied cache (hits, no miss) and starts no compile process;
    ``EMBER_PREBUILT=0`` compiles them as before (misses)."""
    pre = tmp_path / "pre"
    pre.mkdir(mode=0o755)
    base = dict(os.environ, EMBER_THREADING_LAYER="pool")
    base.pop("EMBER_JIT_PROCESS", None)
    _run(BUILD, dict(base, NUMBA_CACHE_DIR=str(pre / "numba"), EMBER_CACHE_DIR=str(pre / "ember"),
                     EMBER_JIT_COMPILE="sync"), str(pre))
    for n, flag in enumerate(("1", "0")):
        env = dict(base, NUMBA_CACHE_DIR=str(tmp_path / f"n{n}"),
                   EMBER_CACHE_DIR=str(tmp_path / f"e{n}"), EMBER_JIT_COMPILE="background",
                   EMBER_PREBUILT_DIR=str(pre), EMBER_PREBUILT=flag)
        out = _run(COLD, env)
        if flag == "1":
            assert out[:5] == ["first call compiled 0 then 1", "misses 0", "hits 2", "worker False",
                               "background ['pointwise kernel']"], out
        else:
            assert out[3:5] == ["worker True", "background ['ember.kernels.pool.pool2d_numba."
                                "planes_2x2', 'pointwise kernel']"], out
