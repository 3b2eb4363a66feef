"""The float32 Numba row kernels of ember.kernels.nn called directly against torch in float64:
log-sum-exp, softmax and log_softmax (forward and backward), layer_norm (forward, and its
backward's per-run column sums), embedding's gradient scatter (np.add.at's bits); rows [lo, hi)
written alone; NaN and all -inf rows."""
import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.kernels import nn as K
from ember.kernels.runtime import compiler

torch = pytest.importorskip("torch")
rng = np.random.default_rng(0)


@pytest.fixture
def nb():
    mod = compiler.kernel_module("ember.kernels.nn_numba")
    if mod is None:
        pytest.skip("Numba unavailable")
    return mod


def _rows(n=9, c=37):
    x = (rng.standard_normal((n, c)) * 3).astype(np.float32)
    x[2, 5] = np.nan
    x[4] = -np.inf
    return x


def test_lse_softmax_log_softmax_rows_match_torch(nb):
    x = _rows()
    t = torch.tensor(x, dtype=torch.float64)
    lse = np.full(x.shape[0], -7.0)
    nb.lse_rows(x, lse, 0, 4)
    nb.lse_rows(x, lse, 4, x.shape[0])
    rows = [0, 1, 2, 3, 5, 6, 7, 8]     # row 4, all -inf, is cross_entropy's NaN either way
    np.testing.assert_allclose(lse[rows], torch.logsumexp(t, 1).numpy()[rows], rtol=1e-5,
                               atol=1e-5)
    for kernel, ref in ((nb.softmax_rows, torch.softmax(t, 1)),
                        (nb.log_softmax_rows, torch.log_softmax(t, 1))):
        out = np.full_like(x, 7.0)
        kernel(x, out, 1, x.shape[0])
        assert (out[0] == 7.0).all()                   # row 0 is outside [1, N)
        kernel(x, out, 0, 1)
        np.testing.assert_allclose(out, ref.numpy(), rtol=1e-5, atol=1e-6)
    assert np.isnan(out[2]).all() and np.isnan(out[4]).all()


def test_softmax_and_log_softmax_backward_rows_match_torch(nb):
    x = (rng.standard_normal((6, 29)) * 2).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    for fwd, bwd, tfn in ((nb.softmax_rows, nb.softmax_backward_rows, torch.softmax),
                          (nb.log_softmax_rows, nb.log_softmax_backward_rows,
                           torch.log_softmax)):
        y = np.empty_like(x)
        fwd(x, y, 0, x.shape[0])
        gx = np.empty_like(x)
        bwd(g, y, gx, 0, x.shape[0])
        t = torch.tensor(x, dtype=torch.float64, requires_grad=True)
        tfn(t, 1).backward(torch.tensor(g, dtype=torch.float64))
        np.testing.assert_allclose(gx, t.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_layer_norm_rows_match_torch(nb):
    x = (rng.standard_normal((11, 40)) * 2 + 1).astype(np.float32)
    w, b = rng.standard_normal(40).astype(np.float32), rng.standard_normal(40).astype(np.float32)
    out = np.empty_like(x)
    nb.layer_norm_rows(x, w, b, np.float32(1e-5), out, 0, 11)
    ref = torch.nn.functional.layer_norm(*(torch.tensor(a, dtype=torch.float64)
                                           for a in (x,)), (40,), torch.tensor(w, dtype=torch.float64),
                                         torch.tensor(b, dtype=torch.float64))
    np.testing.assert_allclose(out, ref.numpy(), rtol=1e-4, atol=1e-5)


def test_layer_norm_backward_kernel_runs_leave_their_column_sums_at_their_first_row():
    """nn_numba.layer_norm_backward_rows over runs of rows: each run's sums of g * xhat and g
    (the weight's and bias's gradients) land in sums[lo] with starts[lo] marked; the marked
    rows add up to the weight and bias gradients (torch, float64), dx row by row."""
    from ember.kernels.runtime import compiler
    nb = compiler.kernel_module("ember.kernels.nn_numba")
    if nb is None:
        pytest.skip("Numba unavailable")
    r = np.random.default_rng(12)
    x = (r.standard_normal((37, 24)) * 2 + 1).astype(np.float32)
    w = r.standard_normal(24).astype(np.float32)
    g = r.standard_normal((37, 24)).astype(np.float32)
    dx = np.empty_like(x)
    sums = np.full((37, 2, 24), np.nan)
    starts = np.zeros(37, np.bool_)
    for lo, hi in ((0, 5), (5, 30), (30, 37)):
        nb.layer_norm_backward_rows(g, x, w, np.float32(1e-5), dx, sums, starts, lo, hi)
    assert np.flatnonzero(starts).tolist() == [0, 5, 30]
    total = sums[starts].sum(axis=0)
    tx, tw, tb = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (x, w, w))
    torch.nn.functional.layer_norm(tx, (24,), tw, tb).backward(torch.tensor(g, dtype=torch.float64))
    np.testing.assert_allclose(total[0], tw.grad.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(total[1], tb.grad.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("padding_idx,scale", [(None, False), (3, False), (-2, False),
                                               (None, True)])
def test_embedding_backward_scatter_kernel_same_bits_as_add_at_and_torch(dtype, padding_idx,
                                                                        scale, monkeypatch):
    """The weight's gradient (nn_numba.scatter_add_rows: the rows added in index order) has
    np.add.at's bits, repeated indices included, and torch's values."""
    r = np.random.default_rng(11)
    idx = r.integers(0, 65, (16, 64))
    w = r.standard_normal((65, 128)).astype(dtype)
    v = r.standard_normal((16, 64, 128)).astype(dtype)
    calls = []
    from ember.kernels.runtime import compiler
    nb = compiler.kernel_module("ember.kernels.nn_numba")
    real = nb.scatter_add_rows
    monkeypatch.setattr(nb, "scatter_add_rows", lambda *a: calls.append(1) or real(*a))
    got = K.embedding_backward(v, idx, 65, padding_idx, scale)
    assert calls == ([] if scale and dtype == np.float32 else [1])  # float32 / counts: float64
    want = np.zeros((65, 128), dtype)
    g = v.reshape(-1, 128)
    if scale:
        g = g / np.bincount(idx.reshape(-1), minlength=65)[idx.reshape(-1)][:, None]
    np.add.at(want, idx.reshape(-1), g)
    if padding_idx is not None:
        want[padding_idx] = 0
    assert got.dtype == dtype and got.tobytes() == want.tobytes()
    wt = torch.tensor(w, requires_grad=True)
    torch.nn.functional.embedding(torch.tensor(idx), wt, padding_idx=padding_idx,
                                  scale_grad_by_freq=scale).backward(torch.tensor(v))
    we = ember.tensor(w, requires_grad=True)
    F.embedding(ember.tensor(idx), we, padding_idx=padding_idx,
                scale_grad_by_freq=scale).backward(ember.tensor(v))
    np.testing.assert_allclose(we.grad.numpy(), wt.grad.numpy(), rtol=1e-5, atol=1e-5)
    assert we.grad.numpy().dtype == dtype




@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batch_norm_channel_kernels_write_their_channels_only_and_match_torch(nb, dtype):
    """bn_train_channels / bn_backward_channels over channels [lo, hi) of x (N, C, M): each
    call writes its channels only; together torch's batch norm (float64) and its gradients."""
    r = np.random.default_rng(13)
    x = (r.standard_normal((5, 7, 23)) * 3 + 10).astype(dtype)
    g = r.standard_normal(x.shape).astype(dtype)
    w, b = r.standard_normal(7).astype(dtype), r.standard_normal(7).astype(dtype)
    mean, var, scale, shift = (np.full(7, 99.0, dtype) for _ in range(4))
    out = np.full_like(x, 99.0)
    nb.bn_train_channels(x, w, b, dtype(1e-5), mean, var, scale, shift, out, 2, 5)
    assert (out[:, :2] == 99).all() and (out[:, 5:] == 99).all() and (mean[:2] == 99).all()
    for lo, hi in ((0, 2), (5, 7)):
        nb.bn_train_channels(x, w, b, dtype(1e-5), mean, var, scale, shift, out, lo, hi)
    tx, tw, tb = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (x, w, b))
    y = torch.nn.functional.batch_norm(tx, None, None, tw, tb, training=True, eps=1e-5)
    y.backward(torch.tensor(g, dtype=torch.float64))
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out, y.detach().numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(mean, x.astype(np.float64).mean((0, 2)), rtol=tol)
    np.testing.assert_allclose(var, x.astype(np.float64).var((0, 2)), rtol=tol)
    invstd = (1 / np.sqrt(var + dtype(1e-5))).astype(dtype)
    gx, gw, gb = np.full_like(x, 99.0), np.full(7, 99.0, dtype), np.full(7, 99.0, dtype)
    coef = np.empty((7, 2), dtype)
    for lo, hi in ((0, 3), (3, 7)):
        nb.bn_backward_channels(x, g, mean, invstd, w, True, coef, gx, gw, gb, lo, hi)
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=20 * tol, atol=20 * tol)
    np.testing.assert_allclose(gw, tw.grad.numpy(), rtol=20 * tol, atol=20 * tol)
    np.testing.assert_allclose(gb, tb.grad.numpy(), rtol=20 * tol, atol=20 * tol)
