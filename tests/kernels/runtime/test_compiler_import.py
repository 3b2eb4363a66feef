"""The first call of a process pays neither Numba's import nor its registry load on the
calling thread (EMBER_JIT_COMPILE=background): ``import numba`` (0.2-0.7 s) runs on the compile
thread while the op takes its NumPy / BLAS path, and so does the process's first load of a
kernel from Numba's disk cache (which also loads Numba's typing and target registries, and
SciPy for Numba's BLAS check: 0.5-1 s)."""
import numpy as np
import pytest

from ember.kernels.runtime import compiler
from tests.kernels.runtime.test_compiler import run_cold

pytestmark = pytest.mark.skipif(not compiler.has_compiler(), reason="needs Numba")


def test_first_conv_and_pool_leave_the_numba_import_to_the_compile_thread():
    out = run_cold("""
        import importlib.machinery, sys, threading
        import numpy as np
        importers = []   # the thread that runs numba/__init__.py
        class Spy:
            def find_spec(self, name, path=None, target=None):
                if name != "numba":
                    return None
                spec = importlib.machinery.PathFinder.find_spec(name, path)
                run = spec.loader.exec_module
                def exec_module(module):
                    importers.append(threading.current_thread().name)
                    run(module)
                spec.loader.exec_module = exec_module
                return spec
        sys.meta_path.insert(0, Spy())
        from ember.kernels import conv as C
        from ember.kernels.pool import pool2d as pool
        from ember.kernels.runtime import compiler as nr
        r = np.random.default_rng(0)
        x = r.standard_normal((64, 6, 14, 14)).astype(np.float32)
        w = r.standard_normal((16, 6, 5, 5)).astype(np.float32)
        y = C.conv2d_forward(x, w, None, 1, 0, 1, 1)           # LeNet's second layer: direct
        p, i = pool.max_pool2d_forward(y, 2, 2, 0, 1, False)
        assert importers in ([], ["ember-jit"]), importers
        nr.wait_compiles()
        done, failed = nr.background_compiles()
        assert not failed and {"import ember.kernels.conv.direct_numba",
                               "import ember.kernels.pool.pool2d_numba"} <= {n for n, _ in done}, done
        y2 = C.conv2d_forward(x, w, None, 1, 0, 1, 1)
        p2, i2 = pool.max_pool2d_forward(y2, 2, 2, 0, 1, False)
        np.testing.assert_allclose(y2, y, rtol=1e-4, atol=1e-4)
        np.testing.assert_array_equal(i2, i)
        print("ok", "MainThread" in importers)
    """)
    assert out.split() == ["ok", "False"], out


def test_first_disk_cache_load_is_queued_later_ones_load_at_once(monkeypatch):
    import numba
    previous = compiler.set_compile_mode("background")
    try:
        monkeypatch.setattr(compiler, "_in_disk_cache", lambda d, s: True)
        monkeypatch.setattr(compiler, "_numba_warm", False)
        first = numba.njit(lambda a: a + 1.0)
        sig = compiler.signature(np.zeros(3))
        assert not compiler.ready(first, sig)      # queued, not loaded on this thread
        compiler.wait_compiles()
        assert sig in first.overloads and compiler._numba_warm
        second = numba.njit(lambda a: a * 2.0)
        assert compiler.ready(second, sig) and sig in second.overloads  # loaded now
    finally:
        compiler.set_compile_mode(previous)


def test_fused_adam_runs_numpy_while_its_kernel_compiles(monkeypatch):
    """Adam's one-pass update on a large parameter compiled on the first step, blocking (3.2 s
    here on a cold cache); now it is tiered like every pointwise kernel."""
    from ember.kernels.pointwise import compile_form, engine
    from ember.optim import _fused
    monkeypatch.setattr(engine, "_forms", {})          # a kernel not compiled in this process
    monkeypatch.setattr(engine, "_kernels", type(engine._kernels)(engine.MAX_CACHED_KERNELS))
    # the compile thread's jobs run here when the test says (a disk-cache hit on that thread
    # would otherwise race the check that the first call did not compile)
    queued = []
    monkeypatch.setattr(compiler, "submit", lambda key, name, job: queued.append(job))
    previous = compiler.set_compile_mode("background")
    try:
        r = np.random.default_rng(0)
        x, g = r.standard_normal((2, 1 << 16))
        m, v = r.standard_normal(1 << 16), r.random(1 << 16)
        args = (0.9, 0.999, 0.99, 1e-8, 1e-3)
        runs = []

        def kernel():
            return compile_form(_fused.adam_update, _fused._ADAM_INPUTS, (x,) * 4 + (float,) * 6)
        for _ in range(2):
            xs, ms, vs = x.copy(), m.copy(), v.copy()
            assert _fused.usable(xs, g, ms, vs)
            _fused.adam_(xs, g, ms, vs, *args)
            runs.append((xs, ms, vs))
            if not runs[1:]:
                assert not kernel()._variants and len(queued) == 1  # NumPy ran
                queued.pop()()
        assert len(kernel()._variants) == 1
        for first, compiled in zip(*runs):
            np.testing.assert_allclose(first, compiled, rtol=1e-12, atol=1e-15)
    finally:
        compiler.set_compile_mode(previous)
