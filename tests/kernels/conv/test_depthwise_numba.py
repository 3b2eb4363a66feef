"""depthwise_numba's loops (one filter per channel) against depthwise's NumPy forms: the
forward and input gradient bit for bit, the weight gradient within rounding."""
import numpy as np
import pytest

from ember.kernels.conv import depthwise

CASES = [
    ((2, 4, 9, 8), (4, 1, 3, 3), 1, 1, 1, 4),
    ((2, 3, 10, 7), (3, 1, 3, 2), (2, 1), (1, 0, 2, 1), (1, 2), 3),
    ((3, 16, 12, 12), (16, 1, 3, 3), 2, 1, 1, 16),
]


@pytest.mark.parametrize("case", CASES, ids=["3x3", "strided-dilated", "stride-2"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_one_filter_per_channel_runs_the_numba_loops_with_the_numpy_forms_bits(case, dtype,
                                                                            monkeypatch):
    """K == C: ``depthwise_numba``'s loops; the forward and input gradient bit for bit as the
    NumPy forms (the same operations in the same order), the weight gradient (float64 sums)
    within rounding of them."""
    from ember.kernels.conv.geometry import geometry
    from ember.kernels.runtime import compiler
    if not compiler.has_compiler():
        pytest.skip("numba not importable")
    x_shape, w_shape, stride, padding, dilation, groups = case
    g = geometry("conv2d", x_shape, w_shape, stride, padding, dilation, groups)
    r = np.random.default_rng(7)
    x = r.standard_normal(x_shape).astype(dtype)
    w = r.standard_normal(w_shape).astype(dtype)
    gy = r.standard_normal(g.output_shape).astype(dtype)
    ran = []
    real = depthwise._numba

    def spy(*a):
        ran.append(real(*a))
        return ran[-1]
    monkeypatch.setattr(depthwise, "_numba", spy)
    fast = (depthwise.forward(x, w, g), depthwise.input_grad(gy, w, g).copy(),
            depthwise.weight_grad(gy, x, g))
    compiler.wait_compiles()
    assert ran == [True] * 3
    monkeypatch.setattr(depthwise, "USE_NUMBA", False)
    slow = (depthwise.forward(x, w, g), depthwise.input_grad(gy, w, g).copy(),
            depthwise.weight_grad(gy, x, g))
    np.testing.assert_array_equal(fast[0], slow[0])
    np.testing.assert_array_equal(fast[1], slow[1])
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(fast[2], slow[2], rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_several_filters_per_channel_run_the_numba_loops_as_the_numpy_forms(dtype, monkeypatch):
    """m = K / C filters per channel (``F.unfold``'s one-hot filters: kh*kw per channel), a
    stride and a dilation: every direction within rounding of the NumPy forms, the forward
    bit for bit."""
    from ember.kernels.conv.geometry import geometry
    from ember.kernels.runtime import compiler
    if not compiler.has_compiler():
        pytest.skip("numba not importable")
    g = geometry("conv2d", (2, 3, 11, 9), (9, 1, 3, 2), (2, 1), (1, 0, 2, 1), (1, 2), 3)
    r = np.random.default_rng(8)
    x = r.standard_normal(g.input_shape).astype(dtype)
    w = r.standard_normal(g.weight_shape).astype(dtype)
    gy = r.standard_normal(g.output_shape).astype(dtype)
    fast = (depthwise.forward(x, w, g), depthwise.input_grad(gy, w, g).copy(),
            depthwise.weight_grad(gy, x, g))
    compiler.wait_compiles()
    monkeypatch.setattr(depthwise, "USE_NUMBA", False)
    slow = (depthwise.forward(x, w, g), depthwise.input_grad(gy, w, g).copy(),
            depthwise.weight_grad(gy, x, g))
    np.testing.assert_array_equal(fast[0], slow[0])
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for a, b in zip(fast[1:], slow[1:]):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
