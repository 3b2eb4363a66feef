"""The NumPy path in a fresh process: a tiny array never imports numba, and without numba every
expression still evaluates (an explicit ``backend="numba"`` raises)."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


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



@pytest.mark.parametrize("op, dtype, exact", [
    ("gelu", "float32", True), ("gelu", "float64", False),        # erf: twin / SciPy vs math.erf
    ("sigmoid", "float32", True), ("sigmoid", "float64", False),  # exp: twin / NumPy's vs libm
    ("tanh", "float32", True), ("erf", "float32", True), ("erf", "float64", False),
    ("lerp", "float64", True), ("rsqrt", "float64", True),        # IEEE arithmetic and selects
    ("log1p", "float32", True), ("softplus", "float32", True),     # log1p's and exp's twins
    ("log1p", "float64", False), ("elu", "float32", False),       # NumPy's log1p vs libm; expm1
    ("log", "float32", False), ("maximum", "float32", False), ("gelu", "float16", False)])
def test_kernel_exact_names_the_plans_with_the_kernels_bits(op, dtype, exact):
    """``kernel_exact``: the twin NumPy plan has the compiled kernel's bits for IEEE arithmetic,
    selects and comparisons, and float32 exp / tanh / erf / log1p (their helpers' twins); not where
    a step runs another library's function (float64 exp / erf / log1p, log, expm1), nor maximum (its
    signed zeros), nor float16 (rounded in float32)."""
    import numpy as np
    from ember.kernels.pointwise import OPS, Expr, compile_pointwise
    from ember.kernels.pointwise.numpy_eval import kernel_exact
    x = np.ones(4, dtype)
    params = {"elu": (1.0,), "softplus": (1.0, 20.0)}.get(op, ())
    arity = OPS[op].arity
    names = tuple("abc"[:arity])
    e = Expr(names, [("y", op, names + params)], ("y",))
    assert kernel_exact(compile_pointwise(e, (x,) * arity).typing) is exact
