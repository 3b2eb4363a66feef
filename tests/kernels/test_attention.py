"""ember/kernels/attention.py: the fused attention forward's saved log-sum-exp and the backward
that recomputes the probabilities from it (the functional against torch: tests/ops/test_nn_ops.py)."""
import numpy as np
import pytest
import torch

from ember.kernels import attention
from ember.kernels.errors import KernelError


def _inputs(seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal(s).astype(dtype) for s in ((2, 3, 5, 4), (2, 3, 7, 4),
                                                              (2, 3, 7, 2)))
    mask = rng.random((5, 7)) > 0.4
    mask[2] = False
    return q, k, v, mask


def test_forward_saves_rows_logsumexp_and_masked_rows_give_zeros():
    q, k, v, mask = _inputs()
    out, lse = attention.sdpa_forward(q, k, v, mask, None, False, 0.5)
    s = torch.tensor(q @ np.swapaxes(k, -1, -2) * 0.5).masked_fill(~torch.tensor(mask), -np.inf)
    want = torch.logsumexp(s, -1).numpy()
    live = mask.any(-1)
    np.testing.assert_allclose(lse[..., live], want[..., live], rtol=1e-13)
    assert np.all(lse[..., 2] == np.inf)  # exp(score - lse) = 0 in the backward
    assert np.all(out[..., 2, :] == 0)
    np.testing.assert_allclose(out, (torch.softmax(s, -1).nan_to_num(0.0) @ torch.tensor(v))
                               .numpy(), atol=1e-13)


def test_backward_from_logsumexp_matches_torch_with_dropout_multiplier():
    q, k, v, mask = _inputs(1)
    drop = (np.random.default_rng(2).random((2, 3, 5, 7)) > 0.3) / 0.7
    out, lse = attention.sdpa_forward(q, k, v, mask, drop, False, 0.5)
    g = np.random.default_rng(3).standard_normal(out.shape)
    dq, dk, dv, dmask = attention.sdpa_backward(g, q, k, v, mask, drop, out, lse, False, 0.5,
                                                (True, True, True, False))
    assert dmask is None
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    s = (tq @ tk.transpose(-1, -2) * 0.5).masked_fill(~torch.tensor(mask), -np.inf)
    p = torch.softmax(s, -1).nan_to_num(0.0) * torch.tensor(drop)
    ty = p @ tv
    np.testing.assert_allclose(out, ty.detach().numpy(), atol=1e-13)
    ty.backward(torch.tensor(g))
    for got, t in ((dq, tq), (dk, tk), (dv, tv)):
        np.testing.assert_allclose(got, t.grad.numpy(), atol=1e-12)


def test_backward_skips_gradients_not_needed():
    q, k, v, _ = _inputs(4, np.float32)
    out, lse = attention.sdpa_forward(q, k, v, None, None, True, 0.5)
    dq, dk, dv, dmask = attention.sdpa_backward(np.ones_like(out), q, k, v, None, None, out, lse,
                                                True, 0.5, (True, False, False, False))
    assert dq.dtype == np.float32 and dq.shape == q.shape
    assert dk is None and dv is None and dmask is None


def test_mismatched_shapes_and_causal_with_mask_raise():
    q, k, v, mask = _inputs()
    with pytest.raises(KernelError, match="do not fit"):
        attention.sdpa_forward(q, k[..., :3], v, None, None, False, 1.0)
    with pytest.raises(KernelError, match="is_causal"):
        attention.sdpa_forward(q, k, v, mask, None, True, 1.0)


@pytest.mark.parametrize("causal,L,S", [(True, 64, 64), (False, 64, 64), (True, 48, 80),
                                        (True, 80, 48), (True, 45, 51), (False, 51, 45)])
def test_float32_rows_run_the_fused_numba_passes_and_match_torch(causal, L, S, monkeypatch):
    """float32 without mask or dropout: scale, causal mask, softmax and log-sum-exp in one
    Numba pass per row (nn_numba.sdpa_probs_rows), the backward's probabilities and score
    gradient in two (sdpa_recompute_rows, sdpa_dscores_rows); against torch's SDPA in float64.
    Row lengths that are no multiple of a vector's lanes (45, 51) included; the backward reads
    the forward's kept probabilities, or recomputes them for an lse it did not return."""
    from ember.kernels import nn
    ran = []
    real = nn._ce_run
    monkeypatch.setattr(nn, "_ce_run", lambda name, *a: ran.append((name, real(name, *a)))
                        or ran[-1][1])
    rng = np.random.default_rng(5)
    q = (rng.standard_normal((4, 4, L, 32)) * 2).astype(np.float32)
    k = (rng.standard_normal((4, 4, S, 32)) * 2).astype(np.float32)
    v = rng.standard_normal((4, 4, S, 16)).astype(np.float32)
    g = rng.standard_normal((4, 4, L, 16)).astype(np.float32)
    scale = 1 / np.sqrt(32)
    out, lse = attention.sdpa_forward(q, k, v, None, None, causal, scale)
    dq, dk, dv, dmask = attention.sdpa_backward(g, q, k, v, None, None, out, lse, causal, scale,
                                                (True, True, True, False))
    # the forward's probabilities are kept for the backward of its own lse array; a copy of
    # that array (not the forward's) has them recomputed, with the same gradients
    assert ran == [("sdpa_probs", True), ("sdpa_dscores", True)]
    recomputed = attention.sdpa_backward(g, q, k, v, None, None, out, lse.copy(), causal, scale,
                                         (True, True, True, False))
    assert ran[2:] == [("sdpa_recompute", True), ("sdpa_dscores", True)]
    for got, again in zip((dq, dk, dv), recomputed):
        np.testing.assert_allclose(got, again, rtol=2e-5, atol=2e-5)
    assert out.dtype == lse.dtype == dq.dtype == dk.dtype == dv.dtype == np.float32
    assert lse.shape == (4, 4, L) and dmask is None
    tq, tk, tv = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (q, k, v))
    s = tq @ tk.transpose(-1, -2) * scale
    if causal:
        s = s.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), -np.inf)
    ty = torch.softmax(s, -1) @ tv
    ty.backward(torch.tensor(g, dtype=torch.float64))
    np.testing.assert_allclose(out, ty.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(lse, torch.logsumexp(s, -1).detach().numpy(), rtol=1e-5,
                               atol=1e-5)
    for got, t in ((dq, tq), (dk, tk), (dv, tv)):
        np.testing.assert_allclose(got, t.grad.numpy(), rtol=1e-4, atol=1e-4)
    # the NumPy passes on the same inputs (the kernels off): the same values
    monkeypatch.setattr(nn, "USE_NUMBA", False)
    out2, lse2 = attention.sdpa_forward(q, k, v, None, None, causal, scale)
    np.testing.assert_allclose(out, out2, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lse, lse2, rtol=1e-6, atol=1e-6)


def test_kept_probabilities_live_as_long_as_the_forwards_lse(monkeypatch):
    """The probabilities a float32 forward keeps for its backward are dropped with its lse
    array; above KEEP_PROBS_BYTES none are kept."""
    import gc
    rng = np.random.default_rng(9)
    q, k, v = (rng.standard_normal((2, 4, 64, 16)).astype(np.float32) for _ in range(3))
    before = len(attention._kept)
    out, lse = attention.sdpa_forward(q, k, v, None, None, True, 0.25)
    kept = attention._kept_probs(lse, q, k)
    if kept is None:      # Numba unavailable or still compiling: the NumPy passes keep nothing
        pytest.skip("the Numba row passes did not run")
    np.testing.assert_allclose(kept.reshape(2, 4, 64, 64).sum(-1), 1.0, rtol=1e-5)
    assert attention._kept_probs(lse.copy(), q, k) is None
    assert attention._kept_probs(lse, q[:, :, :32], k) is None
    del lse, kept
    gc.collect()
    assert len(attention._kept) == before
    monkeypatch.setattr(attention, "KEEP_PROBS_BYTES", 1000)
    out, lse = attention.sdpa_forward(q, k, v, None, None, True, 0.25)
    assert attention._kept_probs(lse, q, k) is None


def test_fused_rows_causal_row_of_minus_inf_is_zeros_with_infinite_lse():
    """A causal row whose live scores are all -inf (infinite inputs) gives zeros and lse +inf,
    as the NumPy passes (a dead row)."""
    rng = np.random.default_rng(6)
    q = rng.standard_normal((4, 4, 64, 32)).astype(np.float32)
    k = rng.standard_normal((4, 4, 64, 32)).astype(np.float32)
    v = rng.standard_normal((4, 4, 64, 8)).astype(np.float32)
    q[0, 0, 0] = -np.inf
    k[0, 0, 0] = 1.0        # row 0 sees only key 0: score -inf
    with np.errstate(invalid="ignore"):   # -inf * keys of both signs above the diagonal
        out, lse = attention.sdpa_forward(q, k, v, None, None, True, 0.25)
    assert lse[0, 0, 0] == np.inf and (out[0, 0, 0] == 0).all()
    assert np.isfinite(out[0, 1:]).all() and np.isfinite(out[1:]).all()


@pytest.mark.parametrize("dtype,mask", [(np.float32, None), (np.float64, None),
                                        (np.float64, "bool")])
def test_four_dim_output_is_laid_out_heads_inner_and_matches_torch(dtype, mask):
    """A (B, H, L, D) output is written into a (B, L, H, D) buffer, as torch's CPU attention
    returns it (``transpose(1, 2)`` of it is C-contiguous, so a multi-head layer's
    ``.contiguous()`` copies nothing), on the Numba row passes and the NumPy path alike; values
    and the backward (which reads that output) as torch's in float64."""
    rng = np.random.default_rng(7)
    B, L, H, D = 3, 64, 4, 8
    qkv = rng.standard_normal((B, L, 3 * H * D)).astype(dtype)   # split + transpose views
    q, k, v = (qkv[..., i * H * D:(i + 1) * H * D].reshape(B, L, H, D).transpose(0, 2, 1, 3)
               for i in range(3))
    m = None if mask is None else np.tril(rng.random((L, L)) > 0.3) | np.eye(L, dtype=bool)
    out, lse = attention.sdpa_forward(q, k, v, m, None, mask is None, 0.3)
    assert out.shape == (B, H, L, D) and out.dtype == dtype
    assert out.transpose(0, 2, 1, 3).flags.c_contiguous
    tq, tk, tv = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (q, k, v))
    tm = torch.ones(L, L, dtype=torch.bool).tril() if m is None else torch.tensor(m)
    ty = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=tm, scale=0.3)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out, ty.detach().numpy(), rtol=tol, atol=tol)
    g = rng.standard_normal(out.shape).astype(dtype)
    dq, dk, dv, _ = attention.sdpa_backward(g, q, k, v, m, None, out, lse, mask is None, 0.3,
                                            (True, True, True, False))
    ty.backward(torch.tensor(g, dtype=torch.float64))
    for got, t in ((dq, tq), (dk, tk), (dv, tv)):
        np.testing.assert_allclose(got, t.grad.numpy(), rtol=10 * tol, atol=10 * tol)


def test_non_four_dim_outputs_stay_c_contiguous():
    q, k, v, _ = _inputs(8)
    out, _ = attention.sdpa_forward(q[0], k[0], v[0], None, None, True, 0.5)
    assert out.shape == (3, 5, 2) and out.flags.c_contiguous
