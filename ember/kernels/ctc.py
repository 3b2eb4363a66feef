"""Connectionist temporal classification loss on ndarrays: the forward (alpha) recursion in log
space, vectorised over the batch and the extended label sequence (blank, l1, blank, l2, ...,
blank), one step per time frame; the gradient from the backward (beta) recursion. The gradient is
the derivative of the loss with respect to ``log_probs`` (-expected label occupancy), frames past
an input length get 0. Errors are KernelError naming the bad lengths or labels."""
import numpy as np

from .errors import KernelError
from .reduction import log_sum_exp

_NEG = -np.inf


def _lse(*xs):
    """log(exp(x0) + exp(x1) + ...) elementwise."""
    if any(np.shape(x) != np.shape(xs[0]) for x in xs):
        xs = np.broadcast_arrays(*xs)
    return log_sum_exp(np.stack(xs), 0)


def _setup(log_probs, targets, input_lengths, target_lengths, blank):
    if log_probs.ndim != 3:
        raise KernelError(f"expected log_probs (T, N, C), got shape {list(log_probs.shape)}")
    if log_probs.dtype.kind != "f":
        raise KernelError(f"expected floating-point log_probs, got {log_probs.dtype}")
    T, N, C = log_probs.shape
    il = np.asarray(input_lengths, np.int64).reshape(-1)
    tl = np.asarray(target_lengths, np.int64).reshape(-1)
    if il.shape != (N,) or tl.shape != (N,):
        raise KernelError(f"expected {N} input and target lengths, got {il.size} and {tl.size}")
    if not 0 <= blank < C:
        raise KernelError(f"blank must be in [0, {C}), got {blank}")
    if (il < 0).any() or (il > T).any():
        raise KernelError(f"input lengths must be in [0, {T}], got {il.tolist()}")
    if (tl < 0).any():
        raise KernelError(f"target lengths must be non-negative, got {tl.tolist()}")
    t = np.asarray(targets)
    if t.dtype.kind not in "iu":
        raise KernelError(f"expected integer targets, got {t.dtype}")
    smax = int(tl.max(initial=0))
    lab = np.zeros((N, smax), np.int64)
    if t.ndim == 2:
        if t.shape[0] != N or t.shape[1] < smax:
            raise KernelError(f"targets of shape {list(t.shape)} are too short for target "
                              f"lengths {tl.tolist()}")
        lab[:] = t[:, :smax]
    elif t.ndim == 1:
        if t.size < tl.sum():
            raise KernelError(f"targets hold {t.size} labels, fewer than the target lengths' sum "
                              f"{int(tl.sum())}")
        off = np.concatenate([[0], np.cumsum(tl)[:-1]])
        for n in range(N):
            lab[n, :tl[n]] = t[off[n]:off[n] + tl[n]]
    else:
        raise KernelError(f"expected targets (N, S) or (sum(target_lengths),), got shape "
                          f"{list(t.shape)}")
    inside = np.arange(smax)[None, :] < tl[:, None]
    if ((lab < 0) | (lab >= C))[inside].any():
        raise KernelError(f"target labels must be in [0, {C})")
    L = 2 * smax + 1
    ext = np.full((N, L), blank, np.int64)
    ext[:, 1::2] = np.where(inside, lab, blank)
    valid = np.arange(L)[None, :] < (2 * tl + 1)[:, None]
    # the skip s-2 -> s is allowed onto a label that differs from the label two back
    skip = np.zeros((N, L), bool)
    skip[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
    return T, N, il, tl, ext, valid, skip


def _emissions(log_probs, ext):
    # (T, N, L): log_probs[t, n, ext[n, s]]
    return np.take_along_axis(log_probs, np.broadcast_to(ext[None], (log_probs.shape[0],) +
                                                         ext.shape), axis=2)


def ctc_loss_forward(log_probs, targets, input_lengths, target_lengths, blank, zero_infinity):
    """(negative log likelihood (N,), log_alpha (N, T, L)) of CTC."""
    T, N, il, tl, ext, valid, skip = _setup(log_probs, targets, input_lengths, target_lengths,
                                            int(blank))
    L = ext.shape[1]
    em = _emissions(log_probs, ext).astype(np.float64)
    alpha = np.full((N, T, L), _NEG)
    if T:
        a = np.full((N, L), _NEG)
        a[:, 0] = em[0, :, 0]
        if L > 1:
            a[:, 1] = np.where(tl > 0, em[0, :, 1], _NEG)
        a = np.where(valid, a, _NEG)
        alpha[:, 0] = a
        for t in range(1, T):
            prev = alpha[:, t - 1]
            s1 = np.concatenate([np.full((N, 1), _NEG), prev[:, :-1]], 1)
            s2 = np.concatenate([np.full((N, 2), _NEG), prev[:, :-2]], 1)[:, :L]
            s2 = np.where(skip, s2, _NEG)
            new = np.where(valid, _lse(prev, s1, s2) + em[t], _NEG)
            alpha[:, t] = np.where((t < il)[:, None], new, prev)
    last = np.maximum(il - 1, 0)
    fin = alpha[np.arange(N), last]  # (N, L)
    end = 2 * tl
    ll = _lse(fin[np.arange(N), end], np.where(tl > 0, fin[np.arange(N), np.maximum(end - 1, 0)],
                                               _NEG))
    ll = np.where(il > 0, ll, np.where(tl == 0, 0.0, _NEG))
    nll = -ll
    if zero_infinity:
        nll = np.where(np.isinf(nll), 0.0, nll)
    return nll.astype(log_probs.dtype), alpha.astype(log_probs.dtype)


def ctc_loss_backward(grad, log_probs, targets, neg_log_likelihood, log_alpha, input_lengths,
                      target_lengths, blank, zero_infinity):
    """d(loss)/d(log_probs) (T, N, C) for the per-sample loss gradient ``grad`` (N,)."""
    T, N, il, tl, ext, valid, skip = _setup(log_probs, targets, input_lengths, target_lengths,
                                            int(blank))
    L = ext.shape[1]
    em = _emissions(log_probs, ext).astype(np.float64)
    alpha = log_alpha.astype(np.float64)
    beta = np.full((N, T, L), _NEG)
    end = 2 * tl
    rows = np.arange(N)
    skip_next = np.zeros((N, L), bool)
    skip_next[:, :-2] = skip[:, 2:]
    b = np.full((N, L), _NEG)
    for t in range(T - 1, -1, -1):
        start = (t == il - 1)  # each sample's last frame starts its recursion
        init = np.full((N, L), _NEG)
        init[rows, end] = em[t, rows, end]
        has = tl > 0
        init[rows[has], end[has] - 1] = em[t, rows[has], end[has] - 1]
        n1 = np.concatenate([b[:, 1:], np.full((N, 1), _NEG)], 1)
        n2 = np.concatenate([b[:, 2:], np.full((N, 2), _NEG)], 1)[:, :L]
        n2 = np.where(skip_next, n2, _NEG)
        step = np.where(valid, _lse(b, n1, n2) + em[t], _NEG)
        b = np.where(start[:, None], np.where(valid, init, _NEG),
                     np.where((t < il - 1)[:, None], step, _NEG))
        beta[:, t] = b
    nll = _lse(alpha[rows, np.maximum(il - 1, 0), end],
               np.where(tl > 0, alpha[rows, np.maximum(il - 1, 0), np.maximum(end - 1, 0)],
                        _NEG))
    nll = -np.where(il > 0, nll, np.where(tl == 0, 0.0, _NEG))
    g = np.asarray(grad, np.float64).reshape(N)
    if zero_infinity:
        g = np.where(np.isinf(nll), 0.0, g)
    with np.errstate(invalid="ignore", over="ignore"):
        occ = np.exp(alpha + beta - np.transpose(em, (1, 0, 2)) + nll[:, None, None])  # N,T,L
    occ = np.where(np.isfinite(occ), occ, 0.0) * (-g)[:, None, None]
    occ *= (np.arange(T)[None, :] < il[:, None])[:, :, None]
    out = np.zeros((T, N, log_probs.shape[2]))
    tt, nn, ss = np.meshgrid(np.arange(T), rows, np.arange(L), indexing="ij")
    np.add.at(out, (tt, nn, ext[nn, ss]), np.transpose(occ, (1, 0, 2)))
    return out.astype(log_probs.dtype)
