"""The array-mode fast path takes each op's Python operator from the spec (``operators:``), under
the constants where the op is that operator, and runs relu through its kernel."""
import warnings

import numpy as np

import ember
from ember.autograd._generated import functions as G
from ember import jit
from ember.jit import fastpath
from ember.jit.codegen import compile_graph


def _graph(fn, *xs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return jit.trace(fn, xs).graph


def test_operators_come_from_the_spec_with_their_constants():
    g = _graph(lambda x, y: (G.add(x, y), G.add(x, y, alpha=2), G.div(x, y),
                             G.div(x, y, rounding_mode="floor"), G.sub(x, y), G.neg(x)),
               ember.randn(3), ember.randn(3))
    ops = [fastpath.python_operator(n) for n in g.nodes]
    assert ops == ["+", None, "/", "//", "-", "-"]


def test_float_arithmetic_with_alpha_is_not_an_operator_in_the_source():
    f = lambda x, y: G.add(x, y, alpha=2.0) * 3.0  # noqa: E731
    x, y = ember.randn(4), ember.randn(4)
    fn, src = compile_graph(_graph(f, x, y), "array")
    assert "* 3.0)" in src and "+" not in src.split("def ", 1)[1]
    np.testing.assert_allclose(fn(x._data, y._data)[0], f(x, y)._data, rtol=1e-6)


def test_relu_of_a_fresh_result_runs_in_place_through_its_kernel():
    f = lambda x: (x * 2.0).relu()  # noqa: E731
    x = ember.tensor([-1.0, 0.5, float("nan")])
    fn, src = compile_graph(_graph(f, x), "array")
    assert "relu_(" in src
    np.testing.assert_array_equal(fn(x._data)[0], f(x)._data)


def test_zero_d_float_arithmetic_stays_an_array_for_the_kernel_after_it():
    # `a * 0.05` on a 0-d float64 array is a NumPy float64 scalar, which clamp's and pow's
    # kernels read as a Python float (a weak scalar: float32 results, 1e-9 off)
    a = ember.tensor(1.2087781271743623, dtype=ember.float64)
    for fn in (lambda a: (a * 0.05).clamp(max=1.0), lambda a: (a * 0.05) ** (1 / 3)):
        g = _graph(fn, a)
        run, src = compile_graph(g, "array")
        got = run(a._data)[0]
        assert got.dtype == np.float64 and "asarray(a * 0.05)" in src
        assert got == fn(a).item()


def test_linear_of_stacked_rows_is_one_gemm_equal_to_the_kernel(monkeypatch):
    """``linear_t`` (a constant weight's transposed copy) on a 3-d and a 1-d input: the
    kernel's values, one GEMM over the flattened rows (NumPy's matmul of a stack would run one
    product per matrix), the bias in the GEMM from BIAS_GEMM_MIN_MACS."""
    from ember.kernels import linalg
    rng = np.random.default_rng(0)
    w = rng.standard_normal((300, 64)).astype(np.float32)
    b = rng.standard_normal(300).astype(np.float32)
    wt = np.ascontiguousarray(w.T)
    for x in (rng.standard_normal((35, 2, 64)).astype(np.float32),
              rng.standard_normal(64).astype(np.float32)):
        for bias in (b, None):
            want = linalg.linear(x, w, bias)
            got = fastpath.linear_t(x, wt, bias)
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    monkeypatch.setattr(linalg, "BIAS_GEMM_MIN_MACS", 0)
    big = rng.standard_normal((35, 2, 64)).astype(np.float32)
    fused = []
    real_bias = linalg.bias_gemm
    monkeypatch.setattr(linalg, "bias_gemm", lambda *a: fused.append(a[0].shape) or real_bias(*a))
    got = fastpath.linear_t(big, wt, b)
    np.testing.assert_allclose(got, big @ wt + b, rtol=1e-5, atol=1e-5)
    assert fused == [(70, 64)] or linalg._numpy_cblas(np.dtype(np.float32)) is None
    calls = []
    real_gemm = linalg.gemm_into
    monkeypatch.setattr(linalg, "gemm_into",
                        lambda a, *r, **k: calls.append(a.shape) or real_gemm(a, *r, **k))
    monkeypatch.setattr(linalg, "BIAS_GEMM", False)
    np.testing.assert_allclose(fastpath.linear_t(big, wt, b), big @ wt + b, rtol=1e-5, atol=1e-5)
    assert calls == [(70, 64)]     # the stacked rows as one matrix
