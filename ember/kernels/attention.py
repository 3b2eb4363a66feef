"""Scaled dot-product attention, fused: the forward computes softmax(q k^T * scale + mask) v
per (batch, head) and keeps only each row's log-sum-exp; the backward recomputes the
probabilities from q, k and that log-sum-exp (flash attention's split of the work).

At the sizes a CPU trains (T of 64-1024, head dim 32-128) a product over the stacked heads is
one batched BLAS call, so each pass is: batched GEMM for the scores, the scale/mask/softmax
steps in place on that one buffer, batched GEMM(s) for the results. The one (..., L, S) buffer
is the only score-sized memory a pass holds (the unfused form holds several: scores, the masked
scores, the probabilities, and the autograd graph keeps them all for the backward).
float32 without a mask or dropout runs the steps between the GEMMs as Numba row passes
(``nn_numba.sdpa_*_rows``, chosen per shape as ``nn._ce_run`` does): the forward's scale, causal
mask, softmax and log-sum-exp in one; the backward's probabilities in one and the scores'
gradient in another.
"""
import weakref

import numpy as np

from ember.kernels.errors import KernelError
from ember.kernels.linalg import batched
from ember.kernels.shape import sum_to_shape


def _times_transposed(a, b):
    """a @ b^T over the last two dims as a plain (NN) GEMM of ``a`` with b^T copied
    C-contiguous: OpenBLAS's transposed-operand kernel is slow at attention's short inner
    dimension (the head size) — (16, 4, 64, 32) q k^T, one thread: 468 us as NT, 358 us with
    the copy (~100 us) and an NN GEMM."""
    return batched(a, np.ascontiguousarray(np.swapaxes(b, -1, -2)))


def _scores(q, k, mask, is_causal, scale):
    """q k^T * scale with the causal mask (-inf above the diagonal) and ``mask`` (bool: False
    -> -inf; float: added) applied, in a new C-contiguous (..., L, S) buffer."""
    s = _times_transposed(q, k)
    s *= s.dtype.type(scale)
    L, S = s.shape[-2:]
    if is_causal:
        np.copyto(s, -np.inf, where=~np.tri(L, S, 0, bool))
    if mask is not None:
        if mask.dtype == np.bool_:
            np.copyto(s, -np.inf, where=~mask)
        else:
            s += mask
    return s


def _check(q, k, v, mask, is_causal):
    if q.shape[:-2] != k.shape[:-2] or k.shape[:-1] != v.shape[:-1] or \
            q.shape[-1] != k.shape[-1]:
        raise KernelError(f"scaled_dot_product_attention: query {list(q.shape)}, key "
                          f"{list(k.shape)} and value {list(v.shape)} do not fit")
    if is_causal and mask is not None:
        raise KernelError("scaled_dot_product_attention: explicit attn_mask should not be set "
                          "when is_causal=True")


def _rows(q, k, mask, drop):
    """The scores q k^T (unscaled, unmasked) as C-contiguous rows (B*H*L, S) for the Numba row
    passes (``nn_numba.sdpa_*_rows``): float32 q, k, v without a mask or dropout, rows long
    enough (``nn._ce_numba_fits``); else None (the NumPy passes)."""
    if mask is not None or drop is not None or q.dtype != np.float32 or \
            k.dtype != np.float32 or q.ndim < 2 or k.shape[-2] < 2:
        return None
    from ember.kernels import nn
    s = _times_transposed(q, k)
    rows = s.reshape(-1, s.shape[-1])
    return rows if nn._ce_numba_fits(rows) else None


# The forward's probabilities (float32 rows of the Numba passes) up to KEEP_PROBS_BYTES are kept
# for the backward, which then skips the score GEMM and the exponentials that recompute them
# ((16, 4, 64, 32) causal, one thread: ~0.6 of 1.6 ms). They are kept as long as the forward's
# log-sum-exp array lives (autograd saves it for the backward; a weakref's callback drops them
# with it): one (..., L, S) buffer per attention call, as the unfused form's saved softmax.
KEEP_PROBS_BYTES = 8 << 20
_kept = {}


def _keep_probs(lse, rows):
    """Keep ``rows``, the probabilities of the forward that returned ``lse``, for its
    backward."""
    key = id(lse)
    _kept[key] = (weakref.ref(lse, lambda _, key=key: _kept.pop(key, None)), rows)


def _kept_probs(lse, q, k):
    """The probability rows (B*H*L, S) kept by the forward that returned ``lse`` (this very
    array) for these q (..., L, D) and k (..., S, D); else None (the backward recomputes them)."""
    entry = _kept.get(id(lse))
    if entry is None or entry[0]() is not lse or \
            entry[1].shape != (lse.size, k.shape[-2]) or lse.shape != q.shape[:-1]:
        return None
    return entry[1]


def _run(name, rows, *args):
    from ember.kernels import nn
    return nn._ce_run(name, rows, *args)


def scaled_masked_softmax(a, mask, scale):
    """softmax(where(mask, -inf, a * scale), dim=-1), the internal op the step program runs for
    the unfused attention's ``softmax(masked_fill(s * scale, mask, -inf), -1)``: a boolean
    ``mask`` broadcast to ``a``'s shape. float32 scores with one (T, S) mask for all leading
    dims run one Numba row pass (``nn_numba.masked_softmax_rows``: eager's three ops up to the
    sum's last bits); otherwise those three steps in NumPy."""
    from ember.kernels import nn
    _check_mask(mask, a, "scores")
    m2 = _one_mask(mask, a)
    if m2 is not None:
        s = a.shape[-1]
        out = np.empty(a.shape, a.dtype)
        if _run("masked_softmax", a.reshape(-1, s), m2, np.float32(scale), out.reshape(-1, s)):
            return out
    x = np.multiply(a, scale)
    x = np.where(mask, x.dtype.type(-np.inf), x)
    return nn.softmax(x, -1)


def _check_mask(mask, a, what):
    if mask.dtype != np.bool_ or a.ndim == 0:
        raise KernelError(f"expected a boolean mask and {what} of at least one dimension, got "
                          f"mask {mask.dtype}, {what} {list(a.shape)}")
    try:
        full = np.broadcast_shapes(mask.shape, a.shape)
    except ValueError:
        full = None
    if full != a.shape:
        raise KernelError(f"mask of shape {list(mask.shape)} cannot be broadcast to the "
                          f"{what}' shape {list(a.shape)}")
    if a.dtype.kind != "f":
        raise KernelError(f"expected floating {what}, got {a.dtype}")


def _one_mask(mask, a):
    """The (T, S) mask that ``a``'s (..., T, S) rows share, C-contiguous, where the float32
    row kernels apply (``a`` float32, C-contiguous rows the kernels take, one mask for all
    leading dims); else None."""
    from ember.kernels import nn
    s = a.shape[-1]
    if a.dtype == np.float32 and a.flags.c_contiguous and a.ndim >= 2 and \
            nn._ce_numba_fits(a.reshape(-1, s)) and mask.ndim >= 2 and \
            all(d == 1 for d in mask.shape[:-2]):
        return np.ascontiguousarray(np.broadcast_to(mask.reshape(mask.shape[-2:]),
                                                    a.shape[-2:]))
    return None


def scaled_masked_softmax_backward(grad, y, mask, scale):
    """The gradient of ``scaled_masked_softmax``'s scores: where(mask, 0, softmax's backward of
    ``grad`` at its output ``y``) * scale, the internal op the step program runs for those
    three ops. float32 rows sharing one (T, S) mask run one Numba row pass
    (``nn_numba.masked_softmax_backward_rows``: the three ops' bits); otherwise NumPy."""
    from ember.kernels import nn
    _check_mask(mask, y, "probabilities")
    if grad.shape != y.shape or grad.dtype != y.dtype:
        raise KernelError(f"expected grad_output of the probabilities' shape and dtype "
                          f"{y.dtype}{list(y.shape)}, got {grad.dtype}{list(grad.shape)}")
    m2 = _one_mask(mask, y)
    if m2 is not None:
        s = y.shape[-1]
        g = nn._contiguous_grad(grad)
        out = np.empty(y.shape, y.dtype)
        if _run("masked_softmax_backward", g.reshape(-1, s), y.reshape(-1, s), m2,
                np.float32(scale), out.reshape(-1, s)):
            return out
    dx = nn.softmax_backward(grad, y, -1)
    dx = np.where(mask, dx.dtype.type(0), dx)
    return np.multiply(dx, dx.dtype.type(scale))


def merge_heads(heads):
    """``cat([x.transpose(1, 2).reshape(B, T, H * D) for x in heads], -1)`` of 4-D heads
    (B, H, T, D) of one shape and dtype: one strided copy per head into the (B, T, k, H, D)
    result (the two copies of each head the reshape and the cat make otherwise)."""
    if not heads:
        raise KernelError("expected a non-empty list of heads")
    first = heads[0]
    if first.ndim != 4 or any(h.shape != first.shape or h.dtype != first.dtype for h in heads):
        raise KernelError(f"expected 4-D heads (B, H, T, D) of one shape and dtype, got "
                          f"{[f'{h.dtype}{list(h.shape)}' for h in heads]}")
    b, h, t, d = first.shape
    out = np.empty((b, t, len(heads), h, d), first.dtype)
    for i, x in enumerate(heads):
        out[:, :, i] = x.transpose(0, 2, 1, 3)
    return out.reshape(b, t, len(heads) * h * d)


def _times_values(p, v):
    """p @ v; for 4-D (B, H, L, D) results, written into a buffer laid out as (B, L, H, D), as
    torch's CPU attention returns it: the multi-head layer's ``transpose(1, 2).contiguous()``
    that follows is then a view, not a copy (the GEMMs write the strided rows at the same
    cost)."""
    if p.ndim != 4 or v.ndim != 4:
        return batched(p, v)
    B, H, L = p.shape[:3]
    out = np.empty((B, L, H, v.shape[-1]), np.result_type(p, v)).transpose(0, 2, 1, 3)
    return np.matmul(p, v, out=out)


def sdpa_forward(q, k, v, mask, drop, is_causal, scale):
    """(softmax(q k^T * scale + mask) * drop) v and the rows' log-sum-exp (..., L): +inf for a
    row masked everywhere, whose output is zeros (torch's safe softmax). ``drop`` is None or
    the dropout multiplier (0 or 1/(1-p)) of the probabilities. float32 without a mask or
    dropout: scale, causal mask, softmax and log-sum-exp in one Numba pass per row between the
    two GEMMs (``nn_numba.sdpa_probs_rows``; (16, 4, 64, 32) causal, one thread: 1.70 -> 0.93
    ms; whole-row passes and the plain score GEMM, Intel Xeon under load: 1.20 -> 0.87 ms)."""
    _check(q, k, v, mask, is_causal)
    rows = _rows(q, k, mask, drop) if v.dtype == np.float32 else None
    if rows is not None:
        L = q.shape[-2]
        lse = np.empty(rows.shape[0], np.float32)
        if _run("sdpa_probs", rows, np.float32(scale), L, bool(is_causal), lse):
            p = rows.reshape(q.shape[:-1] + (k.shape[-2],))
            lse = lse.reshape(q.shape[:-1])
            if p.nbytes <= KEEP_PROBS_BYTES:
                _keep_probs(lse, rows)
            return _times_values(p, v), lse
    s = _scores(q, k, mask, is_causal, scale)
    m = np.max(s, axis=-1, keepdims=True) if s.shape[-1] else \
        np.full(s.shape[:-1] + (1,), -np.inf, s.dtype)
    dead = None
    if is_causal or mask is not None or not s.shape[-1]:
        dead = np.isneginf(m)
        if dead.any():
            m[dead] = 0
        else:
            dead = None
    s -= m
    np.exp(s, out=s)
    total = np.sum(s, axis=-1, keepdims=True)
    if dead is not None:
        total[dead] = np.inf  # exp(-inf) / inf: the row's probabilities are zeros
    s /= total
    lse = np.log(total)
    lse += m
    if drop is not None:
        s *= drop
    return _times_values(s, v), lse[..., 0]


def _row_dots(grad, out):
    """rowsum(grad * out) over the last dim, C-contiguous: einsum's one pass without the
    product array ((16, 4, 64, 32) float32, one thread, under load: 320 -> 90 us)."""
    return np.einsum("...d,...d->...", grad, out)


def sdpa_backward(grad, q, k, v, mask, drop, out, lse, is_causal, scale, needs):
    """Gradients (query, key, value, attn_mask) of ``sdpa_forward``'s output: the probabilities
    recomputed as exp(scores - lse) (or kept by the forward), the softmax backward through
    D = rowsum(grad * out) (equal to rowsum(P * dP), dropout included; the float32 Numba rows
    sum P * dP, in cache). The attn_mask gradient (a float mask that
    requires grad) is that of the masked scores summed to the mask's shape; None when not
    needed."""
    fits = grad.dtype == np.float32 and lse.dtype == np.float32 and \
        out.dtype == np.float32 and v.dtype == np.float32
    kept = _kept_probs(lse, q, k) if fits and mask is None and drop is None else None
    rows = kept if kept is not None else _rows(q, k, mask, drop) if fits else None
    if rows is not None:
        L = q.shape[-2]
        lse_rows = np.ascontiguousarray(lse).reshape(-1)
        if kept is not None or \
                _run("sdpa_recompute", rows, np.float32(scale), L, bool(is_causal), lse_rows):
            p = rows.reshape(q.shape[:-1] + (k.shape[-2],))
            dv = batched(np.swapaxes(p, -1, -2), grad) if needs[2] else None
            ds = _times_transposed(grad, v)
            if _run("sdpa_dscores", ds.reshape(rows.shape), rows, np.float32(scale)):
                dq = batched(ds, k) if needs[0] else None
                dk = batched(np.swapaxes(ds, -1, -2), q) if needs[1] else None
                return dq, dk, dv, None
            p = None
    p = _scores(q, k, mask, is_causal, scale)
    p -= lse[..., None]
    np.exp(p, out=p)
    pd = p if drop is None else p * drop
    dv = batched(np.swapaxes(pd, -1, -2), grad) if needs[2] else None
    del pd
    ds = _times_transposed(grad, v)
    if drop is not None:
        ds *= drop
    ds -= _row_dots(grad, out)[..., None]
    ds *= p
    del p
    dmask = None
    if mask is not None and needs[3]:
        dmask = sum_to_shape(ds, mask.shape)
    ds *= ds.dtype.type(scale)
    dq = batched(ds, k) if needs[0] else None
    dk = batched(np.swapaxes(ds, -1, -2), q) if needs[1] else None
    return dq, dk, dv, dmask
