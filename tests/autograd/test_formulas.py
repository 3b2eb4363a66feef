"""Derivative helpers of ember/autograd/formulas.py at their singular points: values, first and
second derivatives against torch, and float64 gradcheck / gradgradcheck."""
import numpy as np
import pytest
import torch

import ember
from ember.autograd.gradcheck import gradcheck, gradgradcheck


def _second_order(lib, x, fn, loss):
    """(first derivative, derivative of ``loss(first, x)``) of ``fn`` at ``x``."""
    t = lib.tensor(x, dtype=lib.float64, requires_grad=True)
    g, = lib.autograd.grad(fn(lib, t), t, create_graph=True)
    gg, = lib.autograd.grad(loss(g, t), t)
    return g.detach().numpy(), gg.numpy()


def _both(x, fn, loss):
    got, want = _second_order(ember, x, fn, loss), _second_order(torch, x, fn, loss)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


# -- prod ------------------------------------------------------------------------------------

def _prod_input(zeros, shape=(4, 5), seed=0):
    x = np.random.default_rng(seed).uniform(0.5, 1.5, shape) * np.array([1, -1])[
        np.arange(int(np.prod(shape))) % 2].reshape(shape)
    flat = x.reshape(-1)
    flat[[3, 7, 10, 1][:zeros]] = 0.0
    return x


def test_prod_double_backward_with_a_zero_matches_torch():
    """The gradient at a zero depended on a constant, so its own derivative was lost."""
    _both([2.0, 0.0, 3.0], lambda L, t: t.prod(), lambda g, t: (g * g).sum() + t.sum())
    _both([2.0, 0.0, 3.0], lambda L, t: t.prod(), lambda g, t: g.sum())


@pytest.mark.parametrize("zeros", [0, 1, 2, 3])
@pytest.mark.parametrize("dim,keepdim", [(None, False), (0, False), (1, True), (-1, False)])
def test_prod_first_and_second_derivatives_match_torch(zeros, dim, keepdim):
    x = _prod_input(zeros)

    def fn(L, t):
        return t.prod() if dim is None else t.prod(dim, keepdim=keepdim)

    def loss(g, t):
        return (g * g.cos()).sum() + (g * t).sum()
    _both(x, lambda L, t: (fn(L, t) * L.arange(1.0, 1.0 + fn(L, t).numel(), dtype=L.float64)
                           .reshape(fn(L, t).shape)).sum(), loss)


@pytest.mark.parametrize("zeros", [0, 1, 2, 3])
@pytest.mark.parametrize("dim,keepdim", [(None, False), (0, True), (1, False)])
def test_prod_gradcheck_and_gradgradcheck(zeros, dim, keepdim):
    x = ember.tensor(_prod_input(zeros, (3, 4), seed=1), dtype=ember.float64,
                     requires_grad=True)

    def fn(t):
        return t.prod() if dim is None else t.prod(dim, keepdim=keepdim)
    assert gradcheck(fn, [x])
    assert gradgradcheck(fn, [x])


def test_prod_zero_dim_and_single_element_dims():
    for v in (0.0, 2.0):
        x = ember.tensor(v, dtype=ember.float64, requires_grad=True)
        assert gradgradcheck(lambda t: t.prod(), [x])
    x = ember.tensor([[0.0], [3.0]], dtype=ember.float64, requires_grad=True)
    assert gradcheck(lambda t: t.prod(1), [x]) and gradgradcheck(lambda t: t.prod(1), [x])


# -- pow -------------------------------------------------------------------------------------
# base 0 with exponents > 0, 0, < 0; negative bases with integer and fractional exponents
POW_X = [0.0, 0.0, 0.0, 0.0, 2.0, -2.0, -2.0, -2.0, 1.5, 0.0, 3.0]
POW_Y = [0.0, 2.0, -1.0, 1.0, 0.0, 3.0, 2.0, 2.5, 0.7, 0.5, -2.0]


def _pow_derivatives(lib, x, y):
    """First derivatives of sum(x ** y) in x and y, and the derivatives of their sum."""
    x = lib.tensor(x, dtype=lib.float64, requires_grad=True)
    y = lib.tensor(y, dtype=lib.float64, requires_grad=True)
    gx, gy = lib.autograd.grad((x ** y).sum(), (x, y), create_graph=True)
    hx, hy = lib.autograd.grad(gx.sum() + gy.sum(), (x, y))
    return [t.detach().numpy() for t in (gx, gy, hx, hy)]


def test_pow_tensor_exponent_gradients_mask_as_torch():
    """d/dx at x=0, y=0 was nan (0 * 0**-1); d/dy was 0 at a negative base (torch: nan, the
    log of it) and nan at x=0, y<0 (torch: -inf)."""
    got = _pow_derivatives(ember, POW_X, POW_Y)
    want = _pow_derivatives(torch, POW_X, POW_Y)
    for a, b, name in zip(got, want, ("dx", "dy", "d(dx+dy)/dx", "d(dx+dy)/dy")):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=0, err_msg=name)
    assert got[0][0] == 0.0 and got[1][0] == 0.0   # x = 0, y = 0


@pytest.mark.parametrize("base", [0.0, 2.0, -2.0, 0.5])
def test_pow_scalar_base_exponent_gradient_matches_torch(base):
    grads = []
    for lib in (ember, torch):
        y = lib.tensor(POW_Y, dtype=lib.float64, requires_grad=True)
        g, = lib.autograd.grad((base ** y).sum(), y, create_graph=True)
        h, = lib.autograd.grad(g.sum(), y)
        grads.append((g.detach().numpy(), h.numpy()))
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=0)


@pytest.mark.parametrize("exponent", [0, 0.0, 1, 2, 3, -1, 0.5, -2.5])
def test_pow_scalar_exponent_gradient_matches_torch(exponent):
    grads = []
    for lib in (ember, torch):
        x = lib.tensor(POW_X, dtype=lib.float64, requires_grad=True)
        g, = lib.autograd.grad((x ** exponent).sum(), x, create_graph=True)
        assert g.requires_grad == (exponent != 0)   # torch: zeros_like(self) at exponent 0
        h = lib.autograd.grad(g.sum(), x)[0] if g.requires_grad else None
        grads.append((g.detach().numpy(), None if h is None else h.numpy()))
    np.testing.assert_allclose(grads[0][0], grads[1][0], rtol=1e-13, atol=0)
    if grads[1][1] is not None:
        np.testing.assert_allclose(grads[0][1], grads[1][1], rtol=1e-13, atol=0)


def test_pow_integer_base_exponent_gradient_in_the_result_dtype():
    for lib in (ember, torch):
        x = lib.tensor([0, 2, 3, -2])
        y = lib.tensor([0.0, 0.5, -1.0, 2.0], dtype=lib.float64, requires_grad=True)
        (x ** y).sum().backward()
        if lib is ember:
            got = y.grad.numpy()
        else:
            want = y.grad.numpy()
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-15, atol=0)


def test_pow_gradcheck_at_a_zero_base():
    """Where x ** y is smooth in x at x = 0 (y = 0 and y >= 1), and double backward (not at
    x = 0, y = 0: there torch's second derivative is nan too, 0 * inf in the masked branch)."""
    x = ember.tensor([0.0, 0.0, 0.0, 1.3, -0.7], dtype=ember.float64, requires_grad=True)
    y = ember.tensor([0.0, 1.0, 2.0, 0.0, 3.0], dtype=ember.float64)
    assert gradcheck(lambda t: t ** y, [x])
    assert gradgradcheck(lambda t: t[1:] ** y[1:], [x])
    p = ember.tensor([0.5, 1.5, 2.0], dtype=ember.float64, requires_grad=True)
    e = ember.tensor([0.0, -1.0, 2.5], dtype=ember.float64, requires_grad=True)
    assert gradcheck(lambda a, b: a ** b, [p, e])
    # torch's mask where(exponent == 0, 0, ...) also hides d/d exponent of d/d base there
    assert gradgradcheck(lambda a, b: a[1:] ** b[1:], [p, e])


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_pow_fused_backward_masks_as_eager(monkeypatch, backend):
    """The fused pointwise backward derives from the same formulas: same masking."""
    import warnings

    from ember import jit
    from ember.jit import fused
    from ember.kernels.pointwise import has_compiler
    if backend == "numba" and not has_compiler():
        pytest.skip("numba not importable")
    monkeypatch.setattr(fused, "FORCE", "kernel")
    monkeypatch.setattr(fused, "BACKEND", backend)
    xs = np.array(POW_X, np.float32)
    ys = np.array(POW_Y, np.float32)

    def f(a, b):
        return -(a ** b)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opt = jit.optimize(jit.trace(f, (ember.tensor(xs), ember.tensor(ys))))
    assert opt.graph.find_nodes("fusion_group")
    grads = []
    for run in (f, opt):
        a = ember.tensor(xs, requires_grad=True)
        b = ember.tensor(ys, requires_grad=True)
        run(a, b).sum().backward()
        grads.append((a.grad.numpy(), b.grad.numpy()))
    ta = torch.tensor(xs, requires_grad=True)
    tb = torch.tensor(ys, requires_grad=True)
    (-(ta ** tb)).sum().backward()
    for got in grads:
        np.testing.assert_allclose(got[0], ta.grad.numpy(), rtol=1e-6, atol=0)
        np.testing.assert_allclose(got[1], tb.grad.numpy(), rtol=1e-6, atol=0)


# -- std / var / norm ------------------------------------------------------------------------

def test_std_gradient_is_zero_on_a_constant_slice_as_torch():
    """std's gradient divided by the std: a constant slice gave nan (0/0); torch masks it."""
    x = [[1.0, 1.0, 1.0], [1.0, 2.0, 4.0]]
    got, want = [], []
    for lib, out in ((ember, got), (torch, want)):
        t = lib.tensor(x, dtype=lib.float64, requires_grad=True)
        g, = lib.autograd.grad(t.std(dim=1).sum(), t, create_graph=True)
        h, = lib.autograd.grad((g * g).sum(), t)
        out += [g.detach().numpy(), h.numpy()]
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
    assert np.all(got[0][0] == 0.0)


def test_product_backward_takes_a_wider_upstream_gradient_as_torch():
    """A float64 factor after a float32 product sends a float64 gradient into the product's
    backward; torch's engine casts it to float32, and the product (which refuses two dtypes)
    gives torch's float32 gradients (to float32 rounding: each is a 4-term sum whose order the
    BLAS picks; (1, 2) gave 0.0499161147 against torch's 0.0499161780 on an AMD EPYC)."""
    rng = np.random.default_rng(0)
    xa, wa, sa = (rng.standard_normal(s) for s in ((2, 3), (3, 4), (2, 4)))
    grads = []
    for m in (torch, ember):
        x = m.tensor(xa.astype(np.float32), requires_grad=True)
        w = m.tensor(wa.astype(np.float32), requires_grad=True)
        ((x @ w) * m.tensor(sa)).sum().backward()
        grads.append((x.grad, w.grad))
    for t, e in zip(*grads):
        assert e.dtype == ember.float32 and t.dtype == torch.float32
        np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-5, atol=1e-6)


def test_inference_tensors_cannot_be_saved_for_backward_as_torch():
    """An inference tensor saved by a backward raises torch's RuntimeError; one that no
    backward saves (an addend) takes part as in torch."""
    for m in (torch, ember):
        with m.inference_mode():
            a = m.ones(3)
        w = m.ones(3, requires_grad=True)
        with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
            w * a
        (w + a).sum().backward()
        assert w.grad.tolist() == [1.0, 1.0, 1.0]


# -- norm ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dim,keepdim", [(None, False), (1, True), (-1, False), ((0, 2), False)])
def test_two_norm_derivatives_match_torch_and_are_zero_on_a_zero_slice(dim, keepdim):
    """p=2's gradient (masked at the norm's shape): torch's first derivative, 0 on a slice whose
    norm is 0, and torch's second derivative away from such slices (at one torch's is NaN, the
    point being singular; ember's stays finite); gradcheck and gradgradcheck."""
    x = np.random.default_rng(7).standard_normal((3, 4, 5))
    x[0, 0, 0] = 0.0

    def fn(L, t):
        y = L.norm(t, dim=dim, keepdim=keepdim)
        return (y * L.arange(1.0, 1.0 + y.numel(), dtype=L.float64).reshape(y.shape)).sum()

    def loss(g, t):
        return (g * g.sin()).sum() + (g * t).sum()

    _both(x, fn, loss)
    if dim is not None:   # a slice of zeros: the first derivative 0 there, as torch's
        z = x.copy()
        z[{1: (0, slice(None), 3), -1: (2, 1), (0, 2): (slice(None), 2)}[dim]] = 0.0
        g, gg = _second_order(ember, z, fn, loss)
        want, _ = _second_order(torch, z, fn, loss)
        np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-12)
        assert np.isfinite(gg).all()
    t = ember.tensor(np.random.default_rng(8).standard_normal((3, 4, 5)), dtype=ember.float64,
                     requires_grad=True)
    assert gradcheck(lambda a: ember.norm(a, dim=dim, keepdim=keepdim), (t,))
    assert gradgradcheck(lambda a: ember.norm(a, dim=dim, keepdim=keepdim), (t,))
