"""The compile process: background compiles built into Numba's disk cache by a separate worker
process, then loaded by the user's process; the compile thread's own compile when the worker
cannot run a kernel or cannot start; exit and fork while it compiles."""
import os
import subprocess
import sys
import textwrap

import pytest

from ember.kernels.runtime import compile_process, compiler

pytestmark = pytest.mark.skipif(not compiler.has_compiler(), reason="needs Numba")


def run_cold(code, timeout=300, **env):
    """Run ``code`` in a fresh process with empty Numba and ember caches under "background";
    return its stdout."""
    import tempfile
    with tempfile.TemporaryDirectory() as numba_dir, tempfile.TemporaryDirectory() as ember_dir:
        # EMBER_PREBUILT=0: empty caches even where an install-time kernel cache was built
        full = dict(os.environ, NUMBA_CACHE_DIR=numba_dir, EMBER_CACHE_DIR=ember_dir,
                    EMBER_JIT_COMPILE="background", EMBER_THREADING_LAYER="pool",
                    EMBER_PREBUILT="0")
        full.pop("EMBER_JIT_PROCESS", None)
        full.update(env)
        r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full,
                           capture_output=True, text=True, timeout=timeout)
        assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def test_numba_types_cross_the_process_boundary_as_descriptions():
    import json
    from numba.core import types
    cases = [types.Array(types.float32, 4, "C"), types.Array(types.float64, 2, "A", readonly=True),
             types.Array(types.int64, 1, "F", aligned=False), types.int64, types.intp,
             types.float32, types.boolean, types.complex128, types.UniTuple(types.int64, 3),
             types.Tuple((types.float64, types.Array(types.uint8, 3, "C"))),
             types.literal(4), types.literal(True)]
    for t in cases:
        d = compile_process.describe(t)
        assert compile_process.rebuild(json.loads(json.dumps(d))) == t, (t, d)
    assert compile_process.describe(types.unicode_type) is None
    assert compile_process.describe(types.Array(types.unicode_type, 1, "C")) is None
    with pytest.raises(ValueError, match="no Numba type"):
        compile_process.rebuild(["scalar", "Array"])


def test_only_cached_kernels_reachable_by_name_go_to_the_worker():
    from numba import njit, types
    from ember.kernels.pool import pool2d_numba
    sig = (types.Array(types.float32, 4, "C"), types.Array(types.float32, 4, "C"),
           types.Array(types.int64, 4, "C"), types.int64, types.int64)
    request = compile_process.request_for(pool2d_numba.planes_2x2, sig)
    assert request["kernel"] == ["ember.kernels.pool.pool2d_numba", "planes_2x2"]
    assert [compile_process.rebuild(d) for d in request["sig"]] == list(sig)
    assert compile_process.request_for(pool2d_numba.planes_2x2, (types.unicode_type,)) is None

    def local(x):
        return x
    assert compile_process.request_for(njit(local), (types.int64,)) is None   # not by name
    assert compile_process.request_for(lambda x: x, (types.int64,)) is None   # not Numba's


COLD = """
    import os, numpy as np
    from ember.kernels.pool import pool2d as pool, pool2d_numba as pool_numba
    from ember.kernels.pointwise import Builder, compile_pointwise
    from ember.kernels.runtime import compiler, compile_process
    x = np.random.default_rng(0).standard_normal((8, 6, 28, 28)).astype(np.float32)
    first = pool.max_pool2d_forward(x, 2, 2, 0, 1, False)
    b = Builder(("x", "y"))
    u, v = b.inputs
    k = compile_pointwise(b.expr(b.emit("mul", b.emit("mul", u, v), 0.5)), (np.float64, np.float64))
    a = np.linspace(-2, 2, 1 << 16)
    ref = a * a * 0.5
    k(a, a)
    compiler.wait_compiles()
    done, failed = compiler.background_compiles()
    assert not failed, failed
    names = [n for n, _ in done]
    assert "ember.kernels.pool.pool2d_numba.planes_2x2" in names and "pointwise kernel" in names
    y, i = pool.max_pool2d_forward(x, 2, 2, 0, 1, False)
    np.testing.assert_array_equal(y, first[0])
    np.testing.assert_array_equal(i, first[1])
    np.testing.assert_array_equal(k(a, a)[0], ref)
    kernels = [pool_numba.planes_2x2] + [f for f in k._variants.values()]
    proc = compile_process._proc
    print("worker", proc.pid != os.getpid() if proc else None)
    print("misses", sum(sum(f._cache_misses.values()) for f in kernels))
    print("hits", sum(sum(f._cache_hits.values()) for f in kernels))
"""


def test_the_worker_compiles_into_an_empty_cache_and_the_process_loads_its_kernels():
    """A fresh NUMBA_CACHE_DIR: the worker process compiles max pooling's kernel and a
    pointwise kernel, the user's process only loads them from the disk cache (Numba's cache
    hits, no miss) and gives the fallbacks' bits; with the worker switched off, the compile
    thread compiles them itself (misses)."""
    out = run_cold(COLD).split("\n")
    assert out[:3] == ["worker True", "misses 0", "hits 2"], out
    out = run_cold(COLD, EMBER_JIT_PROCESS="0").split("\n")
    assert out[:2] == ["worker None", "misses 2"], out


def test_a_worker_that_cannot_start_leaves_the_compile_to_the_thread():
    out = run_cold("""
        import sys, numpy as np
        sys.executable = "/nonexistent/python"
        from ember.kernels.pool import pool2d as pool, pool2d_numba as pool_numba
        from ember.kernels.runtime import compiler, compile_process
        x = np.random.default_rng(0).standard_normal((8, 6, 28, 28)).astype(np.float32)
        first = pool.max_pool2d_forward(x, 2, 2, 0, 1, False)
        compiler.wait_compiles()
        done, failed = compiler.background_compiles()
        assert "ember.kernels.pool.pool2d_numba.planes_2x2" in [n for n, _ in done], (done, failed)
        y, i = pool.max_pool2d_forward(x, 2, 2, 0, 1, False)
        np.testing.assert_array_equal(y, first[0])
        np.testing.assert_array_equal(i, first[1])
        print(compile_process._proc, sum(pool_numba.planes_2x2._cache_misses.values()))
    """)
    assert out.strip() == "False 1"


def test_the_worker_resolves_only_embers_modules():
    with pytest.raises(ValueError, match="not one of ember's modules"):
        compile_process._resolve("os", "system")
    assert compile_process._resolve("ember.kernels.runtime.compile_process", "describe") is \
        compile_process.describe


def test_a_frozen_application_compiles_on_the_thread(monkeypatch):
    """A frozen program's ``sys.executable`` is the program itself: ``-m`` would start it again."""
    monkeypatch.setattr(compile_process, "_proc", None)
    assert compile_process.enabled() == (os.environ.get("EMBER_JIT_PROCESS", "1") != "0")
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    assert not compile_process.enabled()
    monkeypatch.delattr(sys, "frozen")
    monkeypatch.setattr(sys, "executable", "")
    assert not compile_process.enabled()


def test_exit_while_the_worker_compiles_stops_it_and_exits_cleanly():
    """The program ends while the worker compiles: the process exits (no crash, no hang: the
    thread waiting for the worker returns and compiles nothing) and the worker is gone."""
    out = run_cold("""
        import time, numpy as np
        from ember.kernels.pool import pool2d as pool
        from ember.kernels.runtime import compile_process
        x = np.zeros((8, 6, 28, 28), np.float32)
        for _ in range(600):    # the first call queues Numba's import, a later one the compile
            pool.max_pool2d_forward(x, 2, 2, 0, 1, False)
            if compile_process._proc is not None:
                break
            time.sleep(0.05)
        print(compile_process._proc.pid)
    """, timeout=120)
    pid = int(out.strip())
    for _ in range(100):    # the parent reaped it in ``stop``; allow for a slow ``kill``
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        import time
        time.sleep(0.1)
    else:
        pytest.fail(f"the compile worker {pid} outlived its process")


def test_a_forked_child_starts_a_worker_of_its_own():
    """A fork while the worker compiles: the child gets no share of the parent's worker (its
    compiles start its own) and both finish with the kernel's bits."""
    out = run_cold("""
        import os, sys, time, numpy as np
        from ember.kernels.pool import pool2d as pool, pool2d_numba as pool_numba
        from ember.kernels.runtime import compiler, compile_process
        x = np.random.default_rng(0).standard_normal((8, 6, 28, 28)).astype(np.float32)
        ref = pool.max_pool2d_forward(x, 2, 2, 0, 1, False)    # queues Numba's import
        compiler.wait_compiles()
        while compile_process._proc is None:        # queues the compile: the worker starts
            pool.max_pool2d_forward(x, 2, 2, 0, 1, False)
            time.sleep(0.01)
        parent_worker = compile_process._proc
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                assert compile_process._proc is None
                x64 = x.astype(np.float64)       # a signature the parent never compiled
                first = pool.max_pool2d_forward(x64, 2, 2, 0, 1, False)
                compiler.wait_compiles()
                own = compile_process._proc
                assert own and own.pid != parent_worker.pid, own
                y = pool.max_pool2d_forward(x64, 2, 2, 0, 1, False)
                assert len(pool_numba.planes_2x2.overloads) == 2
                np.testing.assert_array_equal(y[1], first[1])
                np.testing.assert_array_equal(y[1], ref[1])
                code = 0
            except BaseException:
                import traceback
                traceback.print_exc(file=sys.stdout)
                sys.stdout.flush()
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        compiler.wait_compiles()
        y = pool.max_pool2d_forward(x, 2, 2, 0, 1, False)
        np.testing.assert_array_equal(y[1], ref[1])
        print(os.waitstatus_to_exitcode(status), len(pool_numba.planes_2x2.overloads))
    """)
    assert out.strip() == "0 1", out


@pytest.mark.parametrize("value, expected, warned", [(None, compile_process.NICE, 0),
                                                      ("0", 0, 0), ("3", 3, 0),
                                                      ("low", compile_process.NICE, 1)])
def test_worker_niceness_is_nice_or_ember_jit_nice(value, expected, warned):
    """The worker runs ``NICE`` below the program, or ``EMBER_JIT_NICE`` below it (0: at its
    priority); a value that is not an integer warns and keeps ``NICE``."""
    env = {} if value is None else {"EMBER_JIT_NICE": value}
    out = run_cold("""
        import os, warnings
        from ember.kernels.runtime import compile_process as cp
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            p = cp._start()
        assert p, "the worker did not start"
        p.stdin.write(b"{}\\n"); p.stdin.flush()
        assert p.stdout.readline()   # its answer: it has set its niceness before reading
        print(os.getpriority(os.PRIO_PROCESS, p.pid) - os.getpriority(os.PRIO_PROCESS, 0),
              len([x for x in w if "EMBER_JIT_NICE" in str(x.message)]))
        p.stdin.close(); p.wait()
    """, timeout=120, **env)
    assert out.split() == [str(expected), str(warned)]
