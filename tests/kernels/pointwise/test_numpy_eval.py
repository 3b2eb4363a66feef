"""Process-level behaviour: lazy numba import, the NumPy fallback without numba, the disk cache."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(code, env=None):
    full_env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), **(env or {}))
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=full_env, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_import_does_not_load_numba():
    out = _run("""
        import json, sys
        import ember.kernels.pointwise as pw
        import numpy as np
        (y,) = pw.apply("tanh", np.ones(10, np.float32))  # tiny: NumPy path, still no numba
        print(json.dumps({"numba": "numba" in sys.modules}))
    """)
    assert out == {"numba": False}


def test_fallback_without_numba():
    out = _run("""
        import json, math, sys
        sys.modules["numba"] = None  # import numba now raises ImportError
        import numpy as np
        from ember.kernels.pointwise import Expr, apply, has_compiler, engine
        x = np.linspace(-4, 4, 3 * engine.MIN_COMPILED_SIZE).astype(np.float32).reshape(3, -1)
        b = np.linspace(-1, 1, x.shape[1]).astype(np.float32)
        e = Expr(("x", "b"), [("t", "add", ("x", "b")), ("g", "gelu", ("t",)), ("r", "relu", ("t",)),
                              ("h", "cast", ("g", "float16"))], ("g", "r", "h"))
        g, r, h = apply(e, x.T.copy().T, b)
        t = (x + b).astype(np.float64)
        ref = 0.5 * t * (1 + np.vectorize(math.erf)(t / math.sqrt(2)))
        try:
            apply(e, x, b, backend="numba")
            raised = False
        except RuntimeError:
            raised = True
        print(json.dumps({"compiler": has_compiler(), "gelu_err": float(np.abs(g - ref).max()),
                          "relu_ok": bool((r == np.maximum(x + b, 0)).all()), "h": str(h.dtype),
                          "h_ok": bool((h == g.astype(np.float16)).all()), "raised": raised}))
    """)
    assert out == {"compiler": False, "gelu_err": pytest.approx(0, abs=1e-6), "relu_ok": True, "h": "float16",
                   "h_ok": True, "raised": True}


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


def test_second_process_loads_from_the_disk_cache(tmp_path):
    env = {"EMBER_CACHE_DIR": str(tmp_path)}
    first = _run(LOAD, env)
    second = _run(LOAD, env)
    assert first["hits"] == 0 and first["misses"] == 1
    assert second["hits"] == 1 and second["misses"] == 0
    sources = [p for p in os.listdir(tmp_path / "pointwise") if p.endswith(".py")]
    assert len(sources) == 1 and not [p for p in os.listdir(tmp_path / "pointwise") if p.endswith(".tmp")]
