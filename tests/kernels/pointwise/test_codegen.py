"""Numba source generation for pointwise kernels: the storage and scalar types, conversions and
literals evaluate to NumPy's values, generated modules are valid Python defining ``kernel``
(serial and ``prange`` forms), and compiled kernels from that source equal the NumPy backend on
contiguous, broadcast and strided operands."""
import math

import numpy as np
import pytest

from ember.kernels.pointwise import Expr, compile_pointwise
from ember.kernels.pointwise import codegen as G

rng = np.random.default_rng(67)
F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
I32, I64, B = np.dtype(np.int32), np.dtype(np.int64), np.dtype(bool)


def test_storage_and_scalar_types():
    assert G.storage_type(F16) == "uint16" and G.storage_type(B) == "boolean"
    assert G.storage_type(F32) == "float32" and G.storage_type(I32) == "int32"
    assert G.scalar_register(F32) == F64 and G.scalar_register(np.dtype(np.uint8)) == I64
    assert G.scalar_register(I32) == I64 and G.scalar_register(B) == B


@pytest.mark.parametrize("value, frm, to, want", [
    (3.7, F64, I32, np.int32(3)), (-2.5, F64, B, True), (0.0, F32, B, False),
    (7, I64, F32, np.float32(7)), (1.5, F32, F64, np.float64(1.5)),
])
def test_convert_source_gives_numpys_cast(value, frm, to, want):
    src = G.convert("v", frm, to)
    got = eval(src, {"np": np, "v": value})
    assert got == want and np.asarray(got).dtype == np.asarray(want).dtype
    assert G.convert("v", F32, F32) == "v" and G.convert("v", F16, F32) == "v"
    assert "rf16" in G.convert("v", F32, F16)


@pytest.mark.parametrize("dtype, value", [(F64, math.nan), (F64, math.inf), (F32, -math.inf),
                                          (F32, 0.1), (I32, 7), (B, 1)])
def test_literals_render_in_the_compute_register(dtype, value):
    src = G.Literal(dtype)(value)
    got = eval(src, {"np": np})
    want = np.asarray(value).astype(dtype)[()]
    if dtype.kind == "f":
        assert np.asarray(got).dtype in (F32, F64)
        assert (math.isnan(got) and math.isnan(want)) or got == want
    else:
        assert got == want


def _expr():
    return Expr(("x", "y", "a"), [("t", "mul", ("x", "a")), ("u", "tanh", ("t",)),
                                  ("r", "add", ("u", "y")), ("m", "gt", ("r", 0.0))], ("r", "m"))


def test_generated_module_is_valid_python_with_a_kernel():
    x = rng.standard_normal(8)
    k = compile_pointwise(_expr(), (x, x, 0.5))
    for parallel in (False, True):
        src = G.kernel_source(k.typing, (F64, B), ("c", "c", "c", "c"), (-1, -1), parallel)
        compile(src, "<pointwise>", "exec")
        kernel = [line for line in src.splitlines() if line.startswith("def kernel(")]
        assert len(kernel) == 1
        assert ("ntasks, runs" in kernel[0]) == parallel            # the prange form's arguments
        assert ("for w in prange(runs)" in src) == parallel
        assert kernel[0].count(", b") == 4                          # x, y and the two outputs
        loop = src.split("def kernel(" if not parallel else "def tasks(")[1].splitlines()
        assert loop[1] == "    wide_vectors()"       # 512-bit vectors where the CPU has them


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_kernel_equals_the_numpy_backend(dtype):
    pytest.importorskip("numba")
    x = rng.standard_normal((6, 50)).astype(dtype)
    y = rng.standard_normal(50).astype(dtype)                  # broadcast along rows
    xs = rng.standard_normal((6, 100)).astype(dtype)[:, ::2]   # strided
    for a, b in ((x, y), (xs, y), (x, x[::-1])):
        k = compile_pointwise(_expr(), (a, b, 0.5))
        r1, m1 = k(a, b, 0.5, backend="numba")
        r2, m2 = k(a, b, 0.5, backend="numpy")
        assert r1.dtype == dtype and m1.dtype == bool
        np.testing.assert_allclose(r1, r2, rtol=1e-6 if dtype == np.float32 else 1e-14,
                                   atol=1e-7)
        np.testing.assert_array_equal(m1, r1 > 0)
