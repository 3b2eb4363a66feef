"""Kernels of ember.kernels.nn. cross_entropy at class indices as one op (``cross_entropy_loss``):
loss and logits' gradient against torch on long rows (the Numba kernels) and short ones (NumPy),
float32 and float64, with class weights, ignore_index, label_smoothing, every reduction, classes
on dim 1 of an N-d input and a 1-d input; the Numba and NumPy paths agree (NaN and inf rows
included); gradcheck and double backward in float64. log_softmax: first and second order against
torch, by row blocks. softmax: the Numba rows (forward and backward kernel) against torch, NaN
and inf rows, second order. layer_norm: Numba and NumPy paths against torch, the internal op
``layer_norm_backward`` (all three gradients) too; ``scaled_masked_softmax`` (attention's
scale, mask and softmax in one pass) against torch."""
import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.kernels import nn as K
from ember.kernels.runtime import compiler
from tests.kernels.numba_threads import require_numba_threads, with_and_without_drivers

torch = pytest.importorskip("torch")
rng = np.random.default_rng(0)

# (input shape, Numba path for float32): rows of 1000 classes reach CE_NUMBA_MIN_SIZE (300 of
# them CE_PARALLEL_SIZE, and the NumPy path's row blocks: ROWS_MIN_SIZE); an N-d input's rows
# are its positions
SHAPES = [((300, 1000), True), ((40, 1000), True), ((8, 1000, 2, 3), True), ((7, 11), False),
          ((3, 5, 4), False), ((9,), False)]


def _data(shape, dtype, ignore, seed=0):
    r = np.random.default_rng(seed)
    x = (r.standard_normal(shape) * 3).astype(dtype)
    c = shape[1] if len(shape) > 1 else shape[0]
    tshape = (shape[0],) + shape[2:] if len(shape) > 1 else ()
    t = r.integers(0, c, tshape)
    if ignore and t.ndim:
        t.reshape(-1)[::3] = -100
    w = r.uniform(0.5, 2.0, c).astype(dtype)
    return x, t, w


def _both(x, t, w, **kw):
    """(loss, grad) of ember and of torch, the loss's gradient seeded with ones."""
    out = []
    for lib in (ember, torch):
        xt = lib.tensor(x, requires_grad=True)
        wt = None if w is None else lib.tensor(w)
        fn = F.cross_entropy if lib is ember else torch.nn.functional.cross_entropy
        loss = fn(xt, lib.tensor(t), wt, **kw)
        loss.backward(lib.ones_like(loss))
        out.append((loss.detach().numpy(), xt.grad.numpy()))
    return out


@pytest.mark.parametrize("dtype,tol", [(np.float32, 2e-5), (np.float64, 1e-11)])
@pytest.mark.parametrize("shape,numba", SHAPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted,ignore", [(False, False), (True, True)])
def test_loss_and_grad_match_torch(dtype, tol, shape, numba, reduction, weighted, ignore,
                                   monkeypatch):
    x, t, w = _data(shape, dtype, ignore)
    ran = []
    run = K._ce_run
    monkeypatch.setattr(K, "_ce_run", lambda *a: ran.append(run(*a)) or ran[-1])
    (got, gx), (want, wx) = _both(x, t, w if weighted else None, reduction=reduction)
    assert got.dtype == dtype and got.shape == want.shape and gx.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    np.testing.assert_allclose(gx, wx, rtol=tol, atol=tol)
    # float32 long rows take the Numba kernels (forward and backward), as do short (N, C) rows
    # without class weights, reduced (ce_loss / ce_grad); the others NumPy
    small = len(shape) == 2 and not weighted and reduction != "none"
    assert ran == ([True, True] if (numba or small) and dtype == np.float32 else [])


@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("ignore_index", [-100, 3])
def test_short_rows_loss_and_grad_kernels_match_torch(reduction, ignore_index, monkeypatch):
    """(64, 10) float32 logits (a small classifier's batch) through the one-pass ce_loss /
    ce_grad kernels: loss and gradient against torch with ignored targets, all targets ignored
    (a NaN mean, a zero gradient, as torch), a target out of range torch's IndexError from the
    loss and from the gradient kernel alike."""
    r = np.random.default_rng(12)
    x = (r.standard_normal((64, 10)) * 3).astype(np.float32)
    t = r.integers(0, 10, 64)
    t[::5] = ignore_index if ignore_index < 0 else t[::5]
    ran = []
    run = K._ce_run
    monkeypatch.setattr(K, "_ce_run", lambda *a: ran.append(a[0]) or run(*a))
    for tt in (t, np.full(64, ignore_index)):
        (got, gx), (want, wx) = _both(x, tt, None, reduction=reduction,
                                      ignore_index=ignore_index)
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)
        np.testing.assert_allclose(gx, wx, rtol=2e-6, atol=1e-8)
        assert np.isnan(gx).sum() == 0
    assert ran == ["ce_loss", "ce_grad"] * 2
    bad = t.copy()
    bad[7] = 10
    with pytest.raises(IndexError, match="Target 10 is out of bounds"):
        K.cross_entropy_loss(x, bad, None, reduction, ignore_index)
    _, lse = K.cross_entropy_loss(x, t, None, reduction, ignore_index)
    with pytest.raises(IndexError, match="Target 10 is out of bounds"):
        K.cross_entropy_loss_backward(np.ones((), np.float32), x, lse, bad, None, reduction,
                                      ignore_index)


@pytest.mark.parametrize("shape", [(40, 1000), (5, 7, 3)])
@pytest.mark.parametrize("smoothing", [0.1, 0.3])
def test_label_smoothing_matches_torch(shape, smoothing):
    x, t, w = _data(shape, np.float32, True)
    for weight in (None, w):
        (got, gx), (want, wx) = _both(x, t, weight, label_smoothing=smoothing)
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
        np.testing.assert_allclose(gx, wx, rtol=2e-5, atol=2e-5)


def test_all_targets_ignored_mean_is_nan_and_grad_zero():
    x, t, _ = _data((40, 1000), np.float32, False)
    (got, gx), (want, wx) = _both(x, np.full_like(t, 3), None, ignore_index=3)
    assert np.isnan(got) and np.isnan(want)
    assert not gx.any() and not wx.any()


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_numba_and_numpy_paths_agree_with_nan_and_inf_rows(reduction, monkeypatch):
    x, t, w = _data((300, 1000), np.float32, True)
    assert x.size >= K.ROWS_MIN_SIZE and x.size >= K.CE_PARALLEL_SIZE
    x[1, 5] = np.nan
    x[2] = -np.inf
    x[3, 7] = np.inf
    x[4, 0] = 1e30      # a huge logit: loss = 1e30 - x[target] or 0, exp(x - lse) exact
    t[4] = 0
    runs = []
    for use in (True, False):
        monkeypatch.setattr(K, "USE_NUMBA", use)
        loss, lse = K.cross_entropy_loss(x, t, w, reduction)
        g = np.ones_like(loss)
        runs.append((loss, lse, K.cross_entropy_loss_backward(g, x, lse, t, w, reduction)))
    (l1, s1, g1), (l2, s2, g2) = runs
    np.testing.assert_allclose(s1, s2, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(l1, l2, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g1, g2, rtol=1e-5, atol=1e-7)
    assert np.isnan(s1[1:4]).all() and np.isfinite(s1[np.r_[0, 4:300]]).all()
    if reduction == "none":
        assert l1[4] == 0 and (np.isnan(l1[1:4]) | (t[1:4] == -100)).all()


def test_huge_logits_keep_float32_precision():
    # lse ~ 1e4: exp(x - lse) from a float32 lse would lose ~1e-3 relative
    x, t, _ = _data((40, 1000), np.float32, False)
    x += 1e4
    (got, gx), (want, wx) = _both(x, t, None)
    np.testing.assert_allclose(gx, wx, rtol=1e-4, atol=1e-9)


@pytest.mark.parametrize("shape", [(4, 6), (3, 5, 2), (6,)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_gradcheck_and_gradgradcheck_float64(shape, reduction):
    x, t, w = _data(shape, np.float64, len(shape) > 1)
    if t.ndim and (t == -100).all():
        t[...] = 1
    xe = ember.tensor(x, requires_grad=True)
    te, we = ember.tensor(t), ember.tensor(w)
    fn = lambda a: F.cross_entropy(a, te, we, reduction=reduction)  # noqa: E731
    assert ember.autograd.gradcheck(fn, (xe,))
    assert ember.autograd.gradgradcheck(fn, (xe,))


def test_double_backward_matches_torch():
    x, t, w = _data((6, 1000), np.float64, True)
    v = np.random.default_rng(3).standard_normal(x.shape)
    got = []
    for lib, fn in ((ember, F.cross_entropy), (torch, torch.nn.functional.cross_entropy)):
        xt = lib.tensor(x, requires_grad=True)
        loss = fn(xt, lib.tensor(t), lib.tensor(w))
        (g,) = lib.autograd.grad(loss, (xt,), create_graph=True)
        (h,) = lib.autograd.grad((g * lib.tensor(v)).sum(), (xt,))
        got.append((g.detach().numpy(), h.numpy()))
    np.testing.assert_allclose(got[0][0], got[1][0], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got[0][1], got[1][1], rtol=1e-10, atol=1e-12)


def test_traced_cross_entropy_is_one_op_and_runs_backward():
    x, t, _ = _data((40, 1000), np.float32, False)
    xe = ember.tensor(x, requires_grad=True)
    fn = ember.jit.trace(lambda a, b: F.cross_entropy(a, b), (xe, ember.tensor(t)))
    assert [n.kind for n in fn.graph.nodes] == ["cross_entropy_loss"]
    fn(xe, ember.tensor(t)).backward()
    (_, _), (want, wx) = _both(x, t, None)
    np.testing.assert_allclose(xe.grad.numpy(), wx, rtol=2e-5, atol=2e-5)


def _forward_backward_match_torch(name, x, v, dim, tol):
    """F.<name>(x, dim) and its input gradient for the upstream v, ember's against torch's
    (within tol, ember's in x's dtype); returns ember's (output, input gradient)."""
    got = []
    for lib, fn in ((ember, getattr(F, name)), (torch, getattr(torch.nn.functional, name))):
        xt = lib.tensor(x, requires_grad=True)
        y = fn(xt, dim)
        y.backward(lib.tensor(v))
        got.append((y.detach().numpy(), xt.grad.numpy()))
    for a, b in zip(*got):
        assert a.dtype == x.dtype
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
    return got[0]


def _nonfinite_rows():
    """float32 (300, 1000) rows with a NaN, all -inf, an inf and a 1e30 (rows 1 to 4), and an
    upstream gradient for them."""
    x = np.random.default_rng(5).standard_normal((300, 1000)).astype(np.float32)
    x[1, 5] = np.nan
    x[2] = -np.inf
    x[3, 7] = np.inf
    x[4, 0] = 1e30
    return x, np.random.default_rng(6).standard_normal(x.shape).astype(np.float32)


@pytest.mark.parametrize("dtype,tol", [(np.float32, 2e-5), (np.float64, 1e-11)])
@pytest.mark.parametrize("shape,dim,numba", [((300, 1000), 1, True), ((4, 10, 1000), -1, True),
                                             ((300, 1000), 0, True), ((8, 21, 64, 64), 1, True),
                                             ((7, 11), 1, False), ((7, 11), 0, False)])
def test_log_softmax_forward_backward_match_torch(dtype, tol, shape, dim, numba, monkeypatch):
    """float32 over the last dimension: nn_numba's row kernels; over another (a middle axis of
    32 K elements or more): its ``*_mid`` kernels; the rest NumPy."""
    r = np.random.default_rng(4)
    x = (r.standard_normal(shape) * 3).astype(dtype)
    v = r.standard_normal(shape).astype(dtype)
    ran = []
    run = K._ce_run
    monkeypatch.setattr(K, "_ce_run", lambda *a: ran.append(run(*a)) or ran[-1])
    _forward_backward_match_torch("log_softmax", x, v, dim, tol)
    assert ran == ([True, True] if numba and dtype == np.float32 else [])


def test_log_softmax_numba_and_numpy_paths_agree_with_nan_and_inf_rows(monkeypatch):
    x, g = _nonfinite_rows()
    runs = []
    for use in (True, False):
        monkeypatch.setattr(K, "USE_NUMBA", use)
        with np.errstate(invalid="ignore"):
            y = K.log_softmax(x, 1)
            runs.append((y, K.log_softmax_backward(g, y, 1)))
    (y1, g1), (y2, g2) = runs
    np.testing.assert_allclose(y1, y2, rtol=1e-6, atol=1e-5)
    np.testing.assert_allclose(g1, g2, rtol=1e-5, atol=1e-5)
    assert np.isnan(y1[1:4]).all() and np.isfinite(y1[np.r_[0, 5:300]]).all()


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_middle_axis_kernels_and_numpy_agree_with_nan_and_inf_columns(name, monkeypatch):
    """Over dim 0 of (1000, 300) float32 (``*_mid`` kernels): a column holding a NaN, only
    -inf or an inf is all NaN, as NumPy's path gives; the rest and the gradients agree."""
    x, g = _nonfinite_rows()
    x, g = np.ascontiguousarray(x.T), np.ascontiguousarray(g.T)
    forward = getattr(K, name)
    runs = []
    for use in (True, False):
        monkeypatch.setattr(K, "USE_NUMBA", use)
        with np.errstate(invalid="ignore", over="ignore"):
            y = forward(x, 0)
            gx = (K.softmax_input_grad(g, y, 0, np.float32) if name == "softmax"
                  else K.log_softmax_backward(g, y, 0))
            if gx is None:   # (softmax without the kernel: the formula)
                gx = y * (g - (g * y).sum(0, keepdims=True))
            runs.append((y, gx))
    (y1, g1), (y2, g2) = runs
    np.testing.assert_allclose(y1, y2, rtol=1e-6, atol=1e-5)
    np.testing.assert_allclose(g1, g2, rtol=1e-5, atol=1e-5)
    assert np.isnan(y1[:, 1:4]).all() and np.isfinite(y1[:, np.r_[0, 5:300]]).all()


def _causal_scores(shape, dtype, seed):
    """Attention-like scores: standard normal times 3 with -inf above the diagonal of the last
    two dimensions (each row keeps at least its diagonal)."""
    x = (np.random.default_rng(seed).standard_normal(shape) * 3).astype(dtype)
    if len(shape) == 4:
        x[..., np.triu(np.ones(shape[-2:], bool), 1)] = -np.inf
    return x


@pytest.mark.parametrize("dtype,tol", [(np.float32, 2e-6), (np.float64, 1e-12)])
@pytest.mark.parametrize("shape,dim,numba", [((16, 4, 64, 64), -1, True), ((300, 1000), 1, True),
                                             ((300, 1000), 0, True), ((8, 21, 64, 64), 1, True),
                                             ((7, 11), 1, False)])
def test_softmax_forward_backward_match_torch(dtype, tol, shape, dim, numba, monkeypatch):
    """float32 rows over the last dimension run nn_numba's softmax_rows and, as the backward
    kernel, softmax_backward_rows (one pass each; the attention's causal -inf entries give
    exact zeros); over another dimension its ``*_mid`` kernels; the rest NumPy and the
    formula."""
    x = _causal_scores(shape, dtype, 7)
    v = np.random.default_rng(8).standard_normal(shape).astype(dtype)
    ran = []
    run = K._ce_run
    monkeypatch.setattr(K, "_ce_run", lambda *a: ran.append((a[0], run(*a))) or ran[-1][1])
    y, gx = _forward_backward_match_torch("softmax", x, v, dim, tol)
    if len(shape) == 4 and dim == -1:
        assert (y[np.isneginf(x)] == 0).all() and (gx[np.isneginf(x)] == 0).all()
    mid = "_mid" if dim % len(shape) != len(shape) - 1 else ""
    assert ran == ([("softmax" + mid, True), ("softmax_backward" + mid, True)]
                   if numba and dtype == np.float32 else [])


def test_softmax_numba_and_numpy_paths_agree_with_nan_and_inf_rows(monkeypatch):
    x, g = _nonfinite_rows()
    x[5, 1:] = -np.inf
    runs = []
    for use in (True, False):
        monkeypatch.setattr(K, "USE_NUMBA", use)
        with np.errstate(invalid="ignore"):
            y = K.softmax(x, 1)
            gx = K.softmax_input_grad(g, y, 1, np.float32)
            runs.append((y, gx))
    (y1, g1), (y2, g2) = runs
    assert g2 is None    # without the kernel the formula runs
    np.testing.assert_allclose(y1, y2, rtol=1e-6, atol=1e-7)
    ref = y2 * (g - (g * y2).sum(1, keepdims=True))
    np.testing.assert_allclose(g1, ref, rtol=1e-5, atol=1e-6)
    assert np.isnan(y1[1:4]).all() and np.isfinite(y1[np.r_[0, 4:300]]).all()
    np.testing.assert_array_equal(y1[4], np.eye(1000, dtype=np.float32)[0])
    np.testing.assert_array_equal(y1[5], y1[4])


@pytest.mark.parametrize("which", ["softmax", "log_softmax"])
def test_softmax_backward_kernels_take_a_broadcast_gradient(which):
    """The gradient of a ``sum`` (ones with stride 0) runs the row kernels too (made contiguous
    first), with the contiguous gradient's result and torch's."""
    pytest.importorskip("numba")      # (the tests compile kernels synchronously: conftest)
    x = np.random.default_rng(11).standard_normal((32, 64, 128)).astype(np.float32)
    y = K.softmax(x, -1) if which == "softmax" else K.log_softmax(x, -1)
    g = np.broadcast_to(np.float32(1.5), x.shape)
    assert not g.flags.c_contiguous
    grad = (lambda gr: K.softmax_input_grad(gr, y, -1, np.float32)) if which == "softmax" \
        else (lambda gr: K.log_softmax_backward(gr, y, -1))
    got = grad(g)
    assert got is not None
    np.testing.assert_array_equal(got, grad(np.ascontiguousarray(g)))
    xt = torch.tensor(x, requires_grad=True)
    ((torch.softmax if which == "softmax" else torch.log_softmax)(xt, -1) * 1.5).sum().backward()
    # log_softmax's gradient 1.5 - exp(y) * 192 cancels: its float32 terms are ~1.5 (an ulp
    # ~1.2e-7), results ~0.03; the forward's y may also differ from torch's in its last bit
    np.testing.assert_allclose(got, xt.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_softmax_kernel_backward_second_order_matches_torch():
    """create_graph runs the formula (differentiable), a plain backward the kernel: both as
    torch on rows the kernel takes."""
    x = _causal_scores((2, 2, 64, 64), np.float32, 9)
    w = np.random.default_rng(10).standard_normal(x.shape).astype(np.float32)
    grads = []
    for lib in (ember, torch):
        xt = lib.tensor(x, requires_grad=True)
        (g,) = lib.autograd.grad((lib.softmax(xt, -1) * lib.tensor(w)).sum(), xt,
                                 create_graph=True)
        (gg,) = lib.autograd.grad((g * g).sum(), xt)
        (g1,) = lib.autograd.grad((lib.softmax(xt, -1) * lib.tensor(w)).sum(), xt)
        grads.append([a.detach().numpy() for a in (g, gg, g1)])
    for e, t in zip(*grads):
        assert e.dtype == np.float32
        np.testing.assert_allclose(e, t, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape,dim,dtype", [((4, 7), 1, None), ((3, 4, 5), 0, None),
                                             ((5,), -1, "float64"), ((), 0, None)])
def test_log_softmax_backward_matches_torch_first_and_second_order(shape, dim, dtype):
    """The first-order gradient is computed in NumPy (in place); create_graph keeps ember ops."""
    torch = pytest.importorskip("torch")
    import ember
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal(shape).astype(np.float64 if dtype else np.float32)
    grads = []
    for lib in (ember, torch):
        xt = lib.tensor(x, requires_grad=True)
        y = lib.log_softmax(xt, dim, dtype=getattr(lib, dtype) if dtype else None)
        (g,) = lib.autograd.grad((y * lib.tensor(w)).sum(), xt, create_graph=True)
        (gg,) = lib.autograd.grad((g * g).sum(), xt)
        (g1,) = lib.autograd.grad((lib.log_softmax(xt, dim) * lib.tensor(w.astype(np.float32)))
                                  .sum(), xt)
        grads.append([a.detach().numpy() for a in (g, gg, g1)])
    for e, t in zip(*grads):
        assert e.dtype == np.float32 and e.shape == shape
        np.testing.assert_allclose(e, t, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape,dim", [((70, 5000), 1), ((3, 90, 3000), -1), ((700, 400), 0)])
def test_log_softmax_by_row_blocks_equals_whole_array(shape, dim, monkeypatch):
    from ember.kernels import nn as nn_kernels
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    g = rng.standard_normal(shape).astype(np.float32)
    blocked = nn_kernels.log_softmax(x, dim), None
    blocked = blocked[0], nn_kernels.log_softmax_backward(g, blocked[0], dim)
    monkeypatch.setattr(nn_kernels, "ROWS_MIN_SIZE", 1 << 62)
    whole = nn_kernels.log_softmax(x, dim)
    whole = whole, nn_kernels.log_softmax_backward(g, whole, dim)
    for b, w in zip(blocked, whole):
        assert b.dtype == np.float32 and b.shape == shape
        np.testing.assert_array_equal(b, w)
    ref = x - x.max(dim, keepdims=True)
    ref = ref - np.log(np.exp(ref.astype(np.float64)).sum(dim, keepdims=True))
    np.testing.assert_allclose(blocked[0], ref, rtol=1e-5, atol=1e-5)


# layer_norm: float32 rows of at least LN_NUMBA_MIN_SIZE elements run nn_numba's one-pass
# forward and backward kernels, the others NumPy; both against torch
@pytest.mark.parametrize("dtype,tol", [(np.float32, 3e-4), (np.float64, 1e-11)])
@pytest.mark.parametrize("shape,ns,numba", [((16, 64, 128), (128,), True),
                                            ((8, 40, 6, 20), (6, 20), True),
                                            ((3, 4), (4,), False)])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_forward_backward_match_torch(dtype, tol, shape, ns, numba, affine,
                                                 monkeypatch):
    r = np.random.default_rng(5)
    arrays = [(r.standard_normal(shape) * 3 + 1).astype(dtype),
              r.standard_normal(ns).astype(dtype), r.standard_normal(ns).astype(dtype)]
    g = r.standard_normal(shape).astype(dtype)
    ran = []
    run = K._ce_run
    monkeypatch.setattr(K, "_ce_run", lambda *a: ran.append((a[0], run(*a))) or ran[-1][1])
    got = []
    for lib, fn in ((ember, F.layer_norm), (torch, torch.nn.functional.layer_norm)):
        ts = [lib.tensor(a, requires_grad=True) for a in arrays]
        y = fn(ts[0], ns, *(ts[1:] if affine else (None, None)))
        y.backward(lib.tensor(g))
        got.append([y.detach().numpy()] + [t.grad.numpy() for t in ts[:3 if affine else 1]])
    for a, b in zip(*got):
        assert a.dtype == dtype
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
    want = ["layer_norm", "layer_norm_backward"] if numba and dtype == np.float32 else []
    assert [name for name, ok in ran if ok] == want


def test_layer_norm_backward_kernel_numba_equals_numpy_and_skips_unneeded(monkeypatch):
    r = np.random.default_rng(6)
    x = r.standard_normal((64, 128)).astype(np.float32)
    w = r.standard_normal(128).astype(np.float32)
    g = r.standard_normal((64, 128)).astype(np.float32)
    fast = K.layer_norm_backward(g, x, w, (128,), 1e-5, (True, True, True))
    monkeypatch.setattr(K, "_ce_run", lambda *a: False)
    slow = K.layer_norm_backward(g, x, w, (128,), 1e-5, (True, True, True))
    for a, b in zip(fast, slow):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
    gx, gw, gb = K.layer_norm_backward(g, x, None, (128,), 1e-5, (True, False, False))
    assert gw is None and gb is None and gx.shape == x.shape


def test_layer_norm_gradgradcheck_float64():
    from ember.autograd.gradcheck import gradcheck, gradgradcheck
    r = np.random.default_rng(7)
    x, w, b = (ember.tensor(r.standard_normal(s), requires_grad=True)
               for s in ((3, 5), (5,), (5,)))
    assert gradcheck(lambda a, c, d: F.layer_norm(a, (5,), c, d), (x, w, b))
    assert gradgradcheck(lambda a, c, d: F.layer_norm(a, (5,), c, d), (x, w, b))


@pytest.mark.parametrize("dtype,tol", [(np.float32, 3e-4), (np.float64, 1e-11)])
@pytest.mark.parametrize("shape,ns", [((16, 64, 128), (128,)), ((8, 40, 6, 20), (6, 20)),
                                      ((3, 4), (4,))])
def test_layer_norm_backward_op_gives_all_three_gradients_as_torch(dtype, tol, shape, ns):
    """The internal op ``layer_norm_backward`` (what a traced backward records): input, weight
    and bias gradients against torch's autograd of layer_norm; nothing requires grad after it."""
    r = np.random.default_rng(8)
    x, w, b = ((r.standard_normal(s) * 3 + 1).astype(dtype) for s in (shape, ns, ns))
    g = r.standard_normal(shape).astype(dtype)
    ts = [torch.tensor(a, requires_grad=True) for a in (x, w, b)]
    torch.nn.functional.layer_norm(ts[0], ns, ts[1], ts[2], 1e-5).backward(torch.tensor(g))
    ex, ew = ember.tensor(x, requires_grad=True), ember.tensor(w, requires_grad=True)
    got = ember.autograd._generated.functions.layer_norm_backward(ember.tensor(g), ex, ew,
                                                                   ns, 1e-5)
    assert len(got) == 3
    for a, t in zip(got, ts):
        assert a.dtype == ex.dtype and not a.requires_grad and a.shape == tuple(t.shape)
        np.testing.assert_allclose(a.numpy(), t.grad.numpy(), rtol=tol, atol=tol)


def test_layer_norm_backward_op_errors_name_the_op_and_shapes():
    f = ember.autograd._generated.functions.layer_norm_backward
    x = ember.randn(3, 4)
    with pytest.raises(Exception, match=r"layer_norm_backward.*\[3, 5\]"):
        f(ember.randn(3, 5), x, ember.randn(4), (4,), 1e-5)
    with pytest.raises(Exception, match=r"layer_norm_backward.*float64"):
        f(ember.randn(3, 4, dtype=ember.float64), x, ember.randn(4), (4,), 1e-5)


@pytest.mark.parametrize("dtype,tol", [(np.float32, 2e-6), (np.float64, 1e-14)])
@pytest.mark.parametrize("shape,dim", [((16, 4, 64, 64), -1), ((8, 21, 30), 1), ((3, 5), 0),
                                       ((6,), 0)])
def test_softmax_backward_op_equals_torchs(dtype, tol, shape, dim):
    """The internal op ``softmax_backward`` (what a traced backward records for softmax):
    torch's ``_softmax_backward_data`` over the last, a middle and the first dim, in the
    operands' dtype; nothing requires grad after it."""
    r = np.random.default_rng(11)
    y = torch.softmax(torch.tensor(r.standard_normal(shape).astype(dtype)), dim)
    g = torch.tensor(r.standard_normal(shape).astype(dtype))
    want = torch._softmax_backward_data(g, y, dim, y.dtype).numpy()
    got = ember.autograd._generated.functions.softmax_backward(
        ember.tensor(g.numpy(), requires_grad=True), ember.tensor(y.numpy()), dim)
    assert got.dtype == ember.tensor(want).dtype and not got.requires_grad
    np.testing.assert_allclose(got.numpy(), want, rtol=tol, atol=tol)


def test_softmax_backward_op_errors_name_the_op_shapes_and_dim():
    f = ember.autograd._generated.functions.softmax_backward
    with pytest.raises(Exception, match=r"softmax_backward.*\[3, 5\].*\[3, 4\]"):
        f(ember.randn(3, 5), ember.randn(3, 4), 1)
    with pytest.raises(Exception, match=r"softmax_backward.*dimension 2 out of range"):
        f(ember.randn(3, 4), ember.randn(3, 4), 2)


@pytest.mark.parametrize("dtype,tol", [(np.float32, 2e-7), (np.float64, 1e-15)])
@pytest.mark.parametrize("shape,mask_shape,numba", [((16, 4, 64, 64), (1, 1, 64, 64), True),
                                                    ((8, 64, 80), (64, 80), True),
                                                    ((4, 2, 64, 64), (4, 1, 64, 64), False),
                                                    ((3, 5), (5,), False)])
def test_scaled_masked_softmax_as_torch(dtype, tol, shape, mask_shape, numba, monkeypatch):
    """The internal op ``scaled_masked_softmax``: softmax(masked_fill(x * scale, mask, -inf))
    against torch's three ops, a fully masked row NaN as torch's; float32 scores with one mask
    for all leading dims run the Numba row pass (once compiled), others NumPy."""
    r = np.random.default_rng(9)
    x = (r.standard_normal(shape) * 4).astype(dtype)
    mask = r.random(mask_shape) < 0.3
    if len(mask_shape) >= 2:
        mask[..., 1, :] = True   # a fully masked row
    scale = 0.17677669529663687
    want = torch.softmax(torch.tensor(x).mul(scale).masked_fill(torch.tensor(mask),
                                                                 float("-inf")), -1).numpy()
    ran = []
    run = K._ce_run
    monkeypatch.setattr(K, "_ce_run", lambda *a: ran.append((a[0], run(*a))) or ran[-1][1])
    compiler.wait_compiles()
    for _ in range(2):   # the first call may queue the kernel's compile (NumPy meanwhile)
        got = ember.autograd._generated.functions.scaled_masked_softmax(
            ember.tensor(x), ember.tensor(mask), scale).numpy()
        compiler.wait_compiles()
    assert got.dtype == dtype and got.shape == x.shape
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    assert np.isnan(got).sum() == np.isnan(want).sum()
    assert ("masked_softmax" in [name for name, _ in ran]) == (numba and dtype == np.float32)


def test_scaled_masked_softmax_errors_name_the_op_and_shapes():
    f = ember.autograd._generated.functions.scaled_masked_softmax
    with pytest.raises(Exception, match=r"scaled_masked_softmax.*\[3, 5\].*\[2, 4\]"):
        f(ember.randn(2, 4), ember.zeros(3, 5, dtype=ember.bool), 0.5)
    with pytest.raises(Exception, match=r"scaled_masked_softmax.*boolean"):
        f(ember.randn(2, 4), ember.zeros(2, 4), 0.5)


@pytest.mark.parametrize("dtype,tol", [(np.float32, 2e-6), (np.float64, 1e-14)])
@pytest.mark.parametrize("shape,mask_shape,numba", [((16, 4, 64, 64), (1, 1, 64, 64), True),
                                                    ((8, 64, 80), (64, 80), True),
                                                    ((4, 2, 64, 64), (4, 1, 64, 64), False),
                                                    ((3, 5), (5,), False)])
def test_scaled_masked_softmax_backward_as_torch(dtype, tol, shape, mask_shape, numba,
                                                 monkeypatch):
    """The internal op ``scaled_masked_softmax_backward``: the gradient of the scores through
    torch's masked_fill(x * scale), softmax (a fully masked row: NaN where unmasked, as
    torch's); float32 probabilities sharing one mask run the Numba row pass, the three ops'
    bits (softmax_backward, the select, the product); others NumPy."""
    r = np.random.default_rng(10)
    x = (r.standard_normal(shape) * 4).astype(dtype)
    g = r.standard_normal(shape).astype(dtype)
    mask = r.random(mask_shape) < 0.3
    if len(mask_shape) >= 2:
        mask[..., 1, :] = True
    scale = 0.17677669529663687
    tx = torch.tensor(x, requires_grad=True)
    y = torch.softmax(tx.mul(scale).masked_fill(torch.tensor(mask), float("-inf")), -1)
    y.backward(torch.tensor(g))
    ran = []
    run = K._ce_run
    monkeypatch.setattr(K, "_ce_run", lambda *a: ran.append((a[0], run(*a))) or ran[-1][1])
    fns = ember.autograd._generated.functions
    yd = y.detach().numpy()
    compiler.wait_compiles()
    for _ in range(2):   # the first call may queue the kernel's compile (NumPy meanwhile)
        got = fns.scaled_masked_softmax_backward(ember.tensor(g), ember.tensor(yd),
                                                 ember.tensor(mask), scale).numpy()
        compiler.wait_compiles()
    assert got.dtype == dtype and got.shape == x.shape
    np.testing.assert_allclose(got, tx.grad.numpy(), rtol=tol, atol=tol)
    assert np.isnan(got).sum() == np.isnan(tx.grad.numpy()).sum()
    three = fns.mul(fns.where(ember.tensor(mask), 0.0, fns.softmax_backward(
        ember.tensor(g), ember.tensor(yd), -1)), scale).numpy()
    np.testing.assert_array_equal(got, three)
    assert ("masked_softmax_backward" in [n for n, _ in ran]) == (numba and dtype == np.float32)


def test_scaled_masked_softmax_backward_errors_name_the_op_and_shapes():
    f = ember.autograd._generated.functions.scaled_masked_softmax_backward
    m = ember.zeros(2, 4, dtype=ember.bool)
    with pytest.raises(Exception, match=r"scaled_masked_softmax_backward.*\[2, 5\]"):
        f(ember.randn(2, 5), ember.randn(2, 4), m, 0.5)
    with pytest.raises(Exception, match=r"scaled_masked_softmax_backward.*\[3, 5\]"):
        f(ember.randn(2, 4), ember.randn(2, 4), ember.zeros(3, 5, dtype=ember.bool), 0.5)


@pytest.mark.parametrize("shape,dim", [((5, 0, 0), -1), ((0, 3), 1), ((3, 0), -1), ((2, 0, 4), 2)])
def test_softmax_of_empty_inputs_as_torch(shape, dim):
    """softmax / log_softmax and their backward on inputs with no elements: empty results of the
    input's shape (the float32 row kernel's reshape raised on (5, 0, 0))."""
    for name in ("softmax", "log_softmax"):
        x = ember.zeros(shape, requires_grad=True)
        tx = torch.zeros(shape, requires_grad=True)
        y, ty = getattr(ember, name)(x, dim), getattr(torch, name)(tx, dim)
        assert y.shape == tuple(ty.shape) and y.dtype == ember.float32
        y.sum().backward()
        ty.sum().backward()
        assert x.grad.shape == tuple(tx.grad.shape)


# batch norm: float32/float64 inputs of at least BN_NUMBA_MIN_SIZE elements run nn_numba's
# per-channel kernels (x viewed as (N, C, M)), the others NumPy; both against torch
def _bn_case(shape, dtype, seed=8):
    r = np.random.default_rng(seed)
    c = shape[1]
    return ((r.standard_normal(shape) * 2 + 3).astype(dtype), r.standard_normal(c).astype(dtype),
            r.standard_normal(c).astype(dtype), r.standard_normal(c).astype(dtype),
            (r.random(c) + 0.5).astype(dtype), r.standard_normal(shape).astype(dtype))


@pytest.mark.parametrize("dtype,tol", [(np.float32, 2e-4), (np.float64, 1e-10)])
@pytest.mark.parametrize("shape", [(300, 41), (7, 13, 61), (8, 16, 9, 7), (3, 5, 7, 9, 11),
                                   (2, 3)])
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_forward_backward_match_torch(dtype, tol, shape, training, affine,
                                                 monkeypatch):
    x, w, b, rm, rv, g = _bn_case(shape, dtype)
    ran = []
    run = K._bn_run
    monkeypatch.setattr(K, "_bn_run", lambda *a: ran.append((a[0], run(*a))) or ran[-1][1])
    got = []
    for lib in (ember, torch):
        ts = [lib.tensor(a, requires_grad=True) for a in (x, w, b)]
        stats = [lib.tensor(a) for a in (rm, rv)]
        fn = F.batch_norm if lib is ember else torch.nn.functional.batch_norm
        y = fn(ts[0], stats[0], stats[1], *(ts[1:] if affine else (None, None)),
               training=training, momentum=0.3, eps=1e-4)
        y.backward(lib.tensor(g))
        got.append([y.detach().numpy()] + [t.numpy() for t in stats] +
                   [t.grad.numpy() for t in ts[:3 if affine else 1]])
    for a, b_ in zip(*got):
        assert a.dtype == dtype
        np.testing.assert_allclose(a, b_, rtol=tol, atol=tol)
    numba = x.size >= K.BN_NUMBA_MIN_SIZE and compiler.kernel_module("ember.kernels.nn_numba")
    want = ["train" if training else "affine", "backward"] if numba else []
    assert [name for name, ok in ran if ok] == want


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_kernels_equal_numpy_path(dtype, training, monkeypatch):
    """The Numba kernels and the NumPy path agree in value (not in bits: float64 per-channel
    sums against NumPy's pairwise ones in the dtype, fused multiply-adds), with and without the
    weight, for each set of needed gradients; a non-contiguous input runs the kernels too."""
    if compiler.kernel_module("ember.kernels.nn_numba") is None:
        pytest.skip("Numba unavailable")
    x, w, b, rm, rv, g = _bn_case((6, 40, 5, 9), dtype, 9)
    x = np.swapaxes(np.swapaxes(x, 2, 3).copy(), 2, 3)     # non-contiguous, same values
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for weight, bias in ((w, b), (None, None)):
        runs = []
        for use in (True, False):
            monkeypatch.setattr(K, "USE_NUMBA", use)
            out, mean, var = K.native_batch_norm(x, weight, bias, rm, rv, training, 0.1, 1e-5)
            grads = [K.native_batch_norm_backward(g, x, weight, mean, var, training, 1e-5, needs)
                     for needs in ((True, True, True), (False, True, True), (True, False, False))]
            runs.append((out, mean, var, grads))
        (o1, m1, v1, g1), (o2, m2, v2, g2) = runs
        for a, b_ in ((o1, o2), (m1, m2), (v1, v2)):
            assert a.dtype == dtype and a.shape == b_.shape
            np.testing.assert_allclose(a, b_, rtol=tol, atol=tol)
        for ga, gb_ in zip(g1, g2):
            for a, b_ in zip(ga, gb_):
                assert (a is None) == (b_ is None)
                if a is not None:
                    assert a.dtype == dtype and a.shape == b_.shape
                    np.testing.assert_allclose(a, b_, rtol=50 * tol, atol=50 * tol)
        assert g1[1][0] is None and g1[2][1] is None and g1[2][2] is None


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_kernels_gradcheck_float64(training, monkeypatch):
    from ember.autograd.gradcheck import gradcheck
    monkeypatch.setattr(K, "BN_NUMBA_MIN_SIZE", 0)
    r = np.random.default_rng(10)
    x, w, b = (ember.tensor(r.standard_normal(s), requires_grad=True)
               for s in ((4, 3, 5), (3,), (3,)))
    rm, rv = ember.tensor(r.standard_normal(3)), ember.tensor(r.random(3) + 0.5)
    ran = []
    run = K._bn_run
    monkeypatch.setattr(K, "_bn_run", lambda *a: ran.append((a[0], run(*a))) or ran[-1][1])
    assert gradcheck(lambda a, c, d: F.batch_norm(a, rm, rv, c, d, training=training, momentum=0.0),
                     (x, w, b))
    if compiler.kernel_module("ember.kernels.nn_numba") is not None:
        assert ("backward", True) in ran


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_kernel_bits_do_not_depend_on_the_thread_count(training, monkeypatch):
    """Each channel's sums run in one fixed order whichever thread takes the channel: the
    outputs and gradients have the same bits at 1, 2 and 3 threads (the split over channels
    forced from any size)."""
    if compiler.kernel_module("ember.kernels.nn_numba") is None:
        pytest.skip("Numba unavailable")
    monkeypatch.setattr(K, "BN_PARALLEL_SIZE", 0)
    x, w, b, rm, rv, g = _bn_case((4, 37, 11, 10), np.float32, 14)
    ran = []
    run = K._bn_run
    monkeypatch.setattr(K, "_bn_run", lambda *a: ran.append(run(*a)) or ran[-1])
    before = ember.get_num_threads()
    outs = []
    try:
        for n in (1, 2, 3):
            ember.set_num_threads(n)
            out, mean, var = K.native_batch_norm(x, w, b, rm, rv, training, 0.1, 1e-5)
            grads = K.native_batch_norm_backward(g, x, w, mean, var, training, 1e-5,
                                                 (True, True, True))
            outs.append((out, mean, var) + tuple(grads))
    finally:
        ember.set_num_threads(before)
    assert ran == [True] * 6
    for other in outs[1:]:
        for a, b_ in zip(outs[0], other):
            assert a.tobytes() == b_.tobytes()


def _bn_errors(shape, spread, seed):
    """Max errors (relative to the float64 reference's RMS) of ember's and torch's float32
    training batch norm: output, batch mean, batch var, then the input's and weight's gradients
    (``native_batch_norm_backward`` from the forward's statistics) on post-ReLU activations
    whose mean (3) is far from their spread."""
    r = np.random.default_rng(seed)
    x = 3 + spread * np.maximum(r.standard_normal(shape), 0)
    c = shape[1]
    w, b = 1 + 0.1 * r.standard_normal(c), 0.1 * r.standard_normal(c)
    g = r.standard_normal(shape)
    axes = (0,) + tuple(range(2, len(shape)))

    def run_torch(dtype):
        xt, wt, bt = (torch.tensor(a, dtype=dtype, requires_grad=True) for a in (x, w, b))
        rm, rv = torch.zeros(c, dtype=dtype), torch.zeros(c, dtype=dtype)
        y = torch.nn.functional.batch_norm(xt, rm, rv, wt, bt, training=True, momentum=1.0)
        (y * torch.tensor(g, dtype=dtype)).sum().backward()
        n = x.size // c
        return [t.detach().numpy().astype(np.float64) for t in
                (y, rm, rv * (n - 1) / n, xt.grad, wt.grad)]

    ref, tor = run_torch(torch.float64), run_torch(torch.float32)
    f = np.float32
    out, mean, var = K.native_batch_norm(x.astype(f), w.astype(f), b.astype(f), None, None,
                                         True, 0.1, 1e-5)
    gx, gw, _ = K.native_batch_norm_backward(g.astype(f), x.astype(f), w.astype(f), mean, var,
                                             True, 1e-5, (True, True, True))
    ours = [out, mean, var, gx, gw]

    def err(a, rf):
        return float(np.max(np.abs(np.asarray(a, np.float64) - rf)) / np.sqrt(np.mean(rf * rf)))
    assert np.allclose(ref[1], x.mean(axis=axes))
    return [err(o, rf) for o, rf in zip(ours, ref)], [err(t, rf) for t, rf in zip(tor, ref)]


@pytest.mark.parametrize("shape,spread", [((2, 16, 8, 8), 0.01), ((2, 16, 32, 32), 0.01),
                                          ((8, 64, 8, 8), 0.02), ((2, 256, 4, 4), 0.05),
                                          ((2, 16, 8, 8), 1.0), ((64, 32), 0.02)])
def test_batch_norm_numpy_path_float32_error_within_torchs(shape, spread, monkeypatch):
    """The NumPy path's float32 training batch norm (inputs below BN_NUMBA_MIN_SIZE, and any
    input while the Numba kernels compile) is as accurate as torch's against float64: its mean
    is not a one-pass float32 sum, its output not x * scale + (bias - mean * scale) (whose
    rounded shift cancels against x * scale when the mean is far from the spread)."""
    monkeypatch.setattr(K, "USE_NUMBA", False)
    for seed in range(3):
        ours, theirs = _bn_errors(shape, spread, seed)
        for name, e, t in zip(("output", "mean", "var", "grad input", "grad weight"), ours,
                              theirs):
            assert e <= 1.5 * t + 1e-7, (name, seed, e, t)


def test_while_a_prange_driver_compiles_the_pool_runs_its_runs_with_its_bits(monkeypatch):
    """Row and channel kernels wait for their one-thread kernel only: until its ``prange``
    driver is compiled (1-2 s more each), a call on TBB runs the kernel over ember's pool in the
    driver's runs, so softmax, layer_norm (the backward's column sums per run, added in run
    order), cross entropy and batch norm keep their bits when the driver takes over."""
    from ember.kernels.runtime import threads
    if compiler.kernel_module("ember.kernels.nn_numba") is None:
        pytest.skip("Numba unavailable")
    if threads.parallel_layer() != "tbb":
        pytest.skip("Numba's TBB threading layer is not available")
    require_numba_threads(2)
    r = np.random.default_rng(21)
    x = r.standard_normal((1029, 130)).astype(np.float32)   # 1029 rows: 8 runs of 129 and less
    g = r.standard_normal(x.shape).astype(np.float32)
    w, b = r.standard_normal(130).astype(np.float32), r.standard_normal(130).astype(np.float32)
    t = r.integers(0, 130, 1029)
    bx, bw, bb, rm, rv, bg = _bn_case((4, 37, 30, 40), np.float32, 3)

    def run():
        y = K.softmax(x, 1)
        loss, lse = K.cross_entropy_loss(x, t)[:2]
        out, mean, var = K.native_batch_norm(bx, bw, bb, rm, rv, True, 0.1, 1e-5)
        return ((y, K.softmax_input_grad(g, y, 1, np.float32), K.layer_norm(x, w, b, (130,)),
                 loss, K.cross_entropy_loss_backward(np.float32(1.0), x, lse, t), out)
                + tuple(K.layer_norm_backward(g, x, w, (130,), 1e-5, (True, True, True)))
                + tuple(K.native_batch_norm_backward(bg, bx, bw, mean, var, True, 1e-5,
                                                     (True, True, True))))
    drivers, pool, asked, runs = with_and_without_drivers(monkeypatch, run)
    assert asked == ["bn_backward_parallel", "bn_train_parallel", "grad_parallel",
                     "layer_norm_backward_parallel", "layer_norm_parallel", "lse_parallel",
                     "softmax_backward_parallel", "softmax_parallel"]
    assert (1029, 8) in runs and (37, 8) in runs
    for a_, b_ in zip(drivers, pool):
        np.testing.assert_array_equal(a_, b_)
