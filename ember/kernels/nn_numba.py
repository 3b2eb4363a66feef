"""Numba kernels of softmax cross entropy, softmax, log_softmax and layer_norm over float32 rows
(see ``nn.cross_entropy_loss``, ``nn.log_softmax``), and of batch norm.

Imported lazily (never by ``import ember``); compiled once and cached on disk. Each row (one
sample's class scores, C-contiguous) is read from memory once: its maximum, then the sum of
``exp(x - max)`` while the row is still in cache, give its log-sum-exp ``lse``; the backward
writes ``g * (exp(x - lse) - onehot(target))`` in one pass (the gradient of the logits, without
the dense log-probabilities or nll_loss's dense gradient). ``_exp_softmax`` vectorises (Numba's
own ``np.exp`` calls the C library per element). The sums are reassociated into vector lanes (LLVM
``reassoc``): results may differ from NumPy's pairwise sums in the last bits. A row holding a
NaN gives a NaN ``lse``, a row of -inf a NaN, a row with +inf a NaN, as log_softmax does.
``log_softmax_rows`` writes ``x - lse`` after the same two passes, ``log_softmax_backward_rows``
``grad - exp(result) * sum(grad)`` after a sum pass; ``softmax_rows`` the exponentials times
1 / their sum, ``softmax_backward_rows`` ``result * (grad - sum(grad * result))``.
``*_mid_rows`` are the same over a middle axis: x viewed as (outer, n, inner), vectorised over
the inner lanes (softmax or log_softmax over the channels of NCHW scores). ``scatter_add_rows``
is embedding's backward (``np.add.at`` over rows, in its order).
``masked_softmax_rows`` is attention's scale, mask and softmax in one pass (the step program's
``scaled_masked_softmax``). ``sdpa_probs_rows``, ``sdpa_recompute_rows`` and ``sdpa_dscores_rows`` are fused attention's
row passes between its GEMMs (``attention.sdpa_forward`` / ``sdpa_backward``).
``bn_train_channels``, ``bn_affine_channels`` and ``bn_backward_channels`` are batch norm's
per-channel passes over x viewed as (N, C, M), float32 or float64 (``nn.native_batch_norm``).
``*_rows`` work on rows [lo, hi) and release the GIL (ember's thread pool splits them);
``*_parallel`` run ``parts`` runs of rows in a ``prange`` (Numba's TBB layer).
"""
import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core.extending import intrinsic

from ember.kernels.runtime.nbhelpers import _bits_f32, expf_reduced, run_bounds, sel

# reassociated float sums (vector lanes) and fused multiply-adds; NaN / inf semantics kept
_FAST = {"reassoc", "contract", "nsz"}


@intrinsic
def _maxnum(typingctx, a, b):
    """LLVM ``maxnum`` (the larger, ignoring a NaN): a max reduction of it vectorises, one of
    ``a if a > b else b`` does not (0.95 against 7.1 ms over 7M float32)."""
    if a != b or a not in (types.float32, types.float64):
        return None

    def codegen(context, builder, signature, args):
        t = context.get_value_type(signature.args[0])
        fn = builder.module.declare_intrinsic("llvm.maxnum", [t], ir.FunctionType(t, [t, t]))
        return builder.call(fn, args)
    return a(a, b), codegen


@njit(cache=True, nogil=True, error_model="numpy")
def _exp_softmax(x):
    """float32 exp of a softmax argument ``x - max`` (at most ~0, or NaN): ``exp_f32``'s Cephes
    polynomial (within 2 ulp) without its overflow handling, results below exp(-87) (1.6e-38:
    nothing next to the max's 1) flushed to 0; ~30% fewer instructions (7M values summed: 1.9
    against 2.7 ms)."""
    xc = sel(x < np.float32(-87.0), np.float32(-87.0), x)
    p, n = expf_reduced(xc)
    res = p * _bits_f32(np.uint32((np.int32(n) + 127) << 23))
    res = sel(x < np.float32(-87.0), np.float32(0.0), res)
    return sel(x != x, x, res)


@njit(cache=True, nogil=True, fastmath=_FAST)
def _row_lse(x, r):
    """log(sum(exp(x[r]))) (float64) of row r of x (N, C) float32: the row's max, then the sum
    of exp(x - max) in float32 lanes."""
    m = np.float32(-np.inf)
    for c in range(x.shape[1]):
        m = _maxnum(m, x[r, c])   # skips a NaN, which makes the sum below NaN
    s = np.float32(0.0)
    for c in range(x.shape[1]):
        s += _exp_softmax(x[r, c] - m)
    return np.float64(m) + np.log(np.float64(s))


@njit(cache=True, nogil=True)
def lse_rows(x, lse, lo, hi):
    """lse[r] = the log-sum-exp of row r of x, for rows r in [lo, hi)."""
    for r in range(lo, hi):
        lse[r] = _row_lse(x, r)


@njit(cache=True, nogil=True, parallel=True)
def lse_parallel(x, lse, parts):
    n = x.shape[0]
    for p in prange(parts):
        lo, hi = run_bounds(n, parts, p)
        if lo < hi:
            lse_rows(x, lse, lo, hi)


@njit(cache=True, nogil=True)
def ce_loss_rows(x, target, ignore_index, lse, acc, lo, hi):
    """The mean / sum cross entropy of rows r in [lo, hi) of x (N, C) float32 at class indices
    ``target`` without class weights, in one pass: lse[r] as ``lse_rows``; acc[0] += lse[r] -
    x[r, target[r]] and acc[1] += 1 over the rows whose target is not ``ignore_index`` (float64);
    a target outside [0, C) leaves its row's loss out and its value in acc[2] (acc[3] = 1)."""
    C = x.shape[1]
    for r in range(lo, hi):
        lse[r] = _row_lse(x, r)
        t = target[r]
        if t == ignore_index:
            continue
        if t < 0 or t >= C:
            if acc[3] == 0.0:
                acc[2] = t
                acc[3] = 1.0
            continue
        acc[0] += lse[r] - np.float64(x[r, t])
        acc[1] += 1.0


# no reassoc here: (x - hi) - lo must not become x - (hi + lo)
@njit(cache=True, nogil=True, fastmath={"contract"})
def ce_grad_rows(x, lse, target, ignore_index, g, out, bad, lo, hi):
    """``grad_rows`` with one gradient ``g`` for every row whose target is not
    ``ignore_index`` (0 for those rows: a zero row), lse float64 split into its float32 high
    and low parts here (the mean / sum reductions without class weights). A target outside
    [0, C) zeroes its row and leaves its value in bad[0] (bad[1] = 1)."""
    C = x.shape[1]
    for r in range(lo, hi):
        t = target[r]
        if t == ignore_index or t < 0 or t >= C:
            for c in range(C):
                out[r, c] = np.float32(0.0)
            if t != ignore_index and bad[1] == 0:
                bad[0] = t
                bad[1] = 1
            continue
        a = np.float32(lse[r])
        b = np.float32(lse[r] - np.float64(a))
        for c in range(C):
            out[r, c] = g * _exp_softmax((x[r, c] - a) - b)
        out[r, t] -= g


# no reassoc here: (x - hi) - lo must not become x - (hi + lo)
@njit(cache=True, nogil=True, fastmath={"contract"})
def grad_rows(x, lse_hi, lse_lo, target, g, out, lo, hi):
    """out[r] = g[r] * (exp((x[r] - lse_hi[r]) - lse_lo[r]) - onehot(target[r])) for rows r in
    [lo, hi): the gradient of the logits x (N, C) of sum_r g[r] * (lse[r] - x[r, target[r]]),
    lse = lse_hi + lse_lo (float32 both: x - lse_hi keeps the precision of x - max)."""
    C = x.shape[1]
    for r in range(lo, hi):
        gr = g[r]
        a = lse_hi[r]
        b = lse_lo[r]
        for c in range(C):
            out[r, c] = gr * _exp_softmax((x[r, c] - a) - b)
        out[r, target[r]] -= gr


@njit(cache=True, nogil=True, parallel=True)
def grad_parallel(x, lse_hi, lse_lo, target, g, out, parts):
    n = x.shape[0]
    for p in prange(parts):
        lo, hi = run_bounds(n, parts, p)
        if lo < hi:
            grad_rows(x, lse_hi, lse_lo, target, g, out, lo, hi)



@njit(cache=True, nogil=True, fastmath={"contract"})
def log_softmax_rows(x, out, lo, hi):
    """out[r] = (x[r] - a) - b for rows r in [lo, hi), a + b the row's log-sum-exp (a its
    float32 rounding: x - a keeps the precision of x - max)."""
    for r in range(lo, hi):
        lse = _row_lse(x, r)
        a = np.float32(lse)
        b = np.float32(lse - np.float64(a))
        for c in range(x.shape[1]):
            out[r, c] = (x[r, c] - a) - b


@njit(cache=True, nogil=True, parallel=True)
def log_softmax_parallel(x, out, parts):
    n = x.shape[0]
    for p in prange(parts):
        lo, hi = run_bounds(n, parts, p)
        if lo < hi:
            log_softmax_rows(x, out, lo, hi)


@njit(cache=True, nogil=True, fastmath=_FAST)
def _row_sum(g, r):
    s = np.float32(0.0)
    for c in range(g.shape[1]):
        s += g[r, c]
    return s


@njit(cache=True, nogil=True, fastmath={"contract"})
def log_softmax_backward_rows(grad, result, out, lo, hi):
    """out[r] = grad[r] - exp(result[r]) * sum(grad[r]) for rows r in [lo, hi) (result: the
    log_softmax output, at most ~0)."""
    for r in range(lo, hi):
        s = _row_sum(grad, r)
        for c in range(grad.shape[1]):
            out[r, c] = grad[r, c] - _exp_softmax(result[r, c]) * s


@njit(cache=True, nogil=True, parallel=True)
def log_softmax_backward_parallel(grad, result, out, parts):
    n = grad.shape[0]
    for p in prange(parts):
        lo, hi = run_bounds(n, parts, p)
        if lo < hi:
            log_softmax_backward_rows(grad, result, out, lo, hi)


@njit(cache=True, nogil=True, fastmath=_FAST)
def _row_exp_sum(x, out, r, m):
    """out[r] = exp(x[r] - m) and their float32 sum (lanes reassociated)."""
    s = np.float32(0.0)
    for c in range(x.shape[1]):
        e = _exp_softmax(x[r, c] - m)
        out[r, c] = e
        s += e
    return s


@njit(cache=True, nogil=True, fastmath={"contract"})
def softmax_rows(x, out, lo, hi):
    """out[r] = exp(x[r] - max) * (1 / sum(exp(x[r] - max))) for rows r in [lo, hi): the max,
    then the exponentials stored and summed, then scaled, while the row is in cache (a row
    holding a NaN, +inf, or only -inf is all NaN, as NumPy's and torch's)."""
    for r in range(lo, hi):
        m = np.float32(-np.inf)
        for c in range(x.shape[1]):
            m = _maxnum(m, x[r, c])
        inv = np.float32(1.0) / _row_exp_sum(x, out, r, m)
        for c in range(x.shape[1]):
            out[r, c] *= inv


@njit(cache=True, nogil=True, parallel=True)
def softmax_parallel(x, out, parts):
    n = x.shape[0]
    for p in prange(parts):
        lo, hi = run_bounds(n, parts, p)
        if lo < hi:
            softmax_rows(x, out, lo, hi)


@njit(cache=True, nogil=True, error_model="numpy")
def _masked_scaled(masked, x, scale):
    """-inf where ``masked``, else x * scale rounded to float32 (no contraction into what
    follows: eager's multiply rounds it)."""
    return sel(masked, np.float32(-np.inf), x * scale)


@njit(cache=True, nogil=True, fastmath=_FAST)
def masked_softmax_rows(x, mask, scale, out, lo, hi):
    """out[r] = softmax(where(mask[r % T], -inf, x[r] * scale)) for rows r in [lo, hi) of x
    (N, S), mask (T, S) (attention scores of (..., T, S) with one mask for all leading dims),
    as ``softmax_rows`` computes it but with the masked, scaled row recomputed in each pass
    instead of stored (an exponential pass reading and writing one array does not vectorise:
    1.6 against 0.47 ms on (16384, 64)); the sum's lanes reassociated, so eager's scale,
    masked_fill and softmax up to its last bits. A fully masked row is NaN."""
    t = mask.shape[0]
    for r in range(lo, hi):
        mr = r % t
        m = np.float32(-np.inf)
        for c in range(x.shape[1]):
            m = _maxnum(m, _masked_scaled(mask[mr, c], x[r, c], scale))
        s = np.float32(0.0)
        for c in range(x.shape[1]):
            e = _exp_softmax(_masked_scaled(mask[mr, c], x[r, c], scale) - m)
            out[r, c] = e
            s += e
        inv = np.float32(1.0) / s
        for c in range(x.shape[1]):
            out[r, c] *= inv


@njit(cache=True, nogil=True, parallel=True)
def masked_softmax_parallel(x, mask, scale, out, parts):
    n = x.shape[0]
    for p in prange(parts):
        lo, hi = run_bounds(n, parts, p)
        if lo < hi:
            masked_softmax_rows(x, mask, scale, out, lo, hi)


@njit(cache=True, nogil=True, fastmath=_FAST)
def _row_dot(g, y, r):
    s = np.float32(0.0)
    for c in range(g.shape[1]):
        s += g[r, c] * y[r, c]
    return s


@njit(cache=True, nogil=True, fastmath={"contract"})
def softmax_backward_rows(grad, result, out, lo, hi):
    """out[r] = result[r] * (grad[r] - sum(grad[r] * result[r])) for rows r in [lo, hi) (result:
    the softmax output)."""
    for r in range(lo, hi):
        s = _row_dot(grad, result, r)
        for c in range(grad.shape[1]):
            out[r, c] = result[r, c] * (grad[r, c] - s)


@njit(cache=True, nogil=True, parallel=True)
def softmax_backward_parallel(grad, result, out, parts):
    n = grad.shape[0]
    for p in prange(parts):
        lo, hi = run_bounds(n, parts, p)
        if lo < hi:
            softmax_backward_rows(grad, result, out, lo, hi)


@njit(cache=True, nogil=True, fastmath={"contract"})
def masked_softmax_backward_rows(grad, result, mask, scale, out, lo, hi):
    """out[r] = where(mask[r % T], 0, result[r] * (grad[r] - sum(grad[r] * result[r]))) * scale
    for rows r in [lo, hi) (result: ``masked_softmax_rows``'s output, mask (T, S)): the
    gradient of the scores ``masked_softmax_rows`` read, as ``softmax_backward_rows`` then the
    select and the product computes it, in one pass."""
    t = mask.shape[0]
    zero = np.float32(0.0)
    for r in range(lo, hi):
        mr = r % t
        s = _row_dot(grad, result, r)
        for c in range(grad.shape[1]):
            out[r, c] = sel(mask[mr, c], zero, result[r, c] * (grad[r, c] - s)) * scale


@njit(cache=True, nogil=True, parallel=True)
def masked_softmax_backward_parallel(grad, result, mask, scale, out, parts):
    n = grad.shape[0]
    for p in prange(parts):
        lo, hi = run_bounds(n, parts, p)
        if lo < hi:
            masked_softmax_backward_rows(grad, result, mask, scale, out, lo, hi)


# The attention row passes run over whole rows, the causal mask a select on the column (a loop
# to the row's own length n left most rows' columns to LLVM's scalar remainder, and the zeros
# after it were a memset call per row): (16 * 4 * 64, 64) causal float32 rows, one thread,
# sdpa_probs_rows 735 -> 500 us, sdpa_recompute_rows 410 -> 230 us.
@njit(cache=True, nogil=True, fastmath=_FAST)
def sdpa_probs_rows(s, scale, L, causal, lse, lo, hi):
    """Attention probabilities in place: row r of the scores s (B*H*L, S) float32 becomes
    softmax(s[r] * scale) over its first n columns (n = r % L + 1 under ``causal``, as
    ``np.tri``, else all), zeros after; lse[r] = max + log(sum) (float32; the sum's lanes
    reassociated). A causal row of -inf only (infinite inputs) gives zeros and lse = +inf
    (``attention.sdpa_forward``'s dead row); elsewhere a NaN or infinite score makes the row
    NaN, as the NumPy path."""
    S = s.shape[1]
    ninf = np.float32(-np.inf)
    for r in range(lo, hi):
        n = np.int32(min(r % L + 1, S) if causal else S)
        m = ninf
        for c in range(S):
            m = _maxnum(m, sel(np.int32(c) < n, s[r, c] * scale, ninf))
        if causal and m == ninf:
            for c in range(S):
                s[r, c] = np.float32(0.0)
            lse[r] = np.float32(np.inf)
            continue
        t = np.float32(0.0)
        for c in range(S):
            e = sel(np.int32(c) < n, _exp_softmax(s[r, c] * scale - m), np.float32(0.0))
            s[r, c] = e
            t += e
        inv = np.float32(1.0) / t
        for c in range(S):
            s[r, c] *= inv
        lse[r] = m + np.float32(np.log(t))


@njit(cache=True, nogil=True, parallel=True)
def sdpa_probs_parallel(s, scale, L, causal, lse, parts):
    n = s.shape[0]
    for p in prange(parts):
        lo, hi = run_bounds(n, parts, p)
        if lo < hi:
            sdpa_probs_rows(s, scale, L, causal, lse, lo, hi)


@njit(cache=True, nogil=True, fastmath={"contract"})
def sdpa_recompute_rows(s, scale, L, causal, lse, lo, hi):
    """The probabilities again from the scores s (B*H*L, S) and the forward's lse, in place:
    exp(s[r] * scale - lse[r]) over the row's first n columns (as ``sdpa_probs_rows``), zeros
    after (lse = +inf: zeros)."""
    S = s.shape[1]
    for r in range(lo, hi):
        n = np.int32(min(r % L + 1, S) if causal else S)
        a = lse[r]
        for c in range(S):
            s[r, c] = sel(np.int32(c) < n, _exp_softmax(s[r, c] * scale - a), np.float32(0.0))


@njit(cache=True, nogil=True, parallel=True)
def sdpa_recompute_parallel(s, scale, L, causal, lse, parts):
    n = s.shape[0]
    for p in prange(parts):
        lo, hi = run_bounds(n, parts, p)
        if lo < hi:
            sdpa_recompute_rows(s, scale, L, causal, lse, lo, hi)


@njit(cache=True, nogil=True, fastmath=_FAST)
def sdpa_dscores_rows(ds, p, scale, lo, hi):
    """The scores' gradient in place: ds[r] = (ds[r] - d) * p[r] * scale with ds = grad v^T,
    p the probabilities and d = rowsum(p[r] * ds[r]) (flash attention's D, equal to
    rowsum(grad * out) without dropout; summed while the row is in cache, lanes reassociated:
    (16*4*64, 64) rows, one thread, 213 us with einsum's rowsum(grad * out) -> 94 us)."""
    for r in range(lo, hi):
        d = np.float32(0.0)
        for c in range(ds.shape[1]):
            d += p[r, c] * ds[r, c]
        for c in range(ds.shape[1]):
            ds[r, c] = (ds[r, c] - d) * p[r, c] * scale


@njit(cache=True, nogil=True, parallel=True)
def sdpa_dscores_parallel(ds, p, scale, parts):
    n = ds.shape[0]
    for q in prange(parts):
        lo, hi = run_bounds(n, parts, q)
        if lo < hi:
            sdpa_dscores_rows(ds, p, scale, lo, hi)


# The softmax family over a middle axis: x (outer, n, inner) float32, the reduction over the n
# entries of each of the inner lanes, vectorised over the lanes (in blocks of ``_lanes`` lanes:
# a block's n x lanes values stay in cache over the passes); the sums run in entry order.
@njit(cache=True, nogil=True)
def _lanes(n, inner):
    """Lanes per block: about 16 K values, a multiple of 16, at most ``inner``."""
    b = max(16, (16384 // max(n, 1)) // 16 * 16)
    return min(b, inner)


@njit(cache=True, nogil=True)
def _lane_max(x, o, j0, j1, m):
    L = j1 - j0
    for j in range(L):
        m[j] = np.float32(-np.inf)
    for i in range(x.shape[1]):
        xr = x[o, i, j0:j1]
        for j in range(L):
            m[j] = _maxnum(m[j], xr[j])   # skips a NaN, as ``_row_lse``


@njit(cache=True, nogil=True)
def _lane_exp_sum(x, o, j0, j1, m, s, out):
    """s = the sum over entries of exp(x - m) per lane, each exponential stored in out."""
    L = j1 - j0
    for j in range(L):
        s[j] = np.float32(0.0)
    for i in range(x.shape[1]):
        xr, orow = x[o, i, j0:j1], out[o, i, j0:j1]
        for j in range(L):
            e = _exp_softmax(xr[j] - m[j])
            orow[j] = e
            s[j] += e


@njit(cache=True, nogil=True)
def softmax_mid_rows(x, out, lo, hi):
    """softmax over axis 1 of x (outer, n, inner) for outer indices [lo, hi): per lane its
    max, the exponentials stored and summed, then scaled by 1 / the sum (``softmax_rows``'s
    math per lane)."""
    n, inner = x.shape[1], x.shape[2]
    B = _lanes(n, inner)
    m = np.empty(B, np.float32)
    s = np.empty(B, np.float32)
    for o in range(lo, hi):
        for j0 in range(0, inner, B):
            j1 = min(j0 + B, inner)
            L = j1 - j0
            _lane_max(x, o, j0, j1, m)
            _lane_exp_sum(x, o, j0, j1, m, s, out)
            for j in range(L):
                s[j] = np.float32(1.0) / s[j]
            for i in range(n):
                orow = out[o, i, j0:j1]
                for j in range(L):
                    orow[j] *= s[j]


@njit(cache=True, nogil=True, parallel=True)
def softmax_mid_parallel(x, out, parts):
    n = x.shape[0]
    for p in prange(parts):
        lo, hi = run_bounds(n, parts, p)
        if lo < hi:
            softmax_mid_rows(x, out, lo, hi)


@njit(cache=True, nogil=True)
def log_softmax_mid_rows(x, out, lo, hi):
    """log_softmax over axis 1 of x (outer, n, inner) for outer indices [lo, hi): per lane
    lse = max + log(sum(exp(x - max))) in float64, then (x - a) - b, a + b = lse (a its float32
    rounding), as ``log_softmax_rows``."""
    n, inner = x.shape[1], x.shape[2]
    B = _lanes(n, inner)
    m = np.empty(B, np.float32)
    s = np.empty(B, np.float32)
    a = np.empty(B, np.float32)
    b = np.empty(B, np.float32)
    for o in range(lo, hi):
        for j0 in range(0, inner, B):
            j1 = min(j0 + B, inner)
            L = j1 - j0
            _lane_max(x, o, j0, j1, m)
            _lane_exp_sum(x, o, j0, j1, m, s, out)
            for j in range(L):
                lse = np.float64(m[j]) + np.log(np.float64(s[j]))
                a[j] = np.float32(lse)
                b[j] = np.float32(lse - np.float64(a[j]))
            for i in range(n):
                xr, orow = x[o, i, j0:j1], out[o, i, j0:j1]
                for j in range(L):
                    orow[j] = (xr[j] - a[j]) - b[j]


@njit(cache=True, nogil=True, parallel=True)
def log_softmax_mid_parallel(x, out, parts):
    n = x.shape[0]
    for p in prange(parts):
        lo, hi = run_bounds(n, parts, p)
        if lo < hi:
            log_softmax_mid_rows(x, out, lo, hi)


@njit(cache=True, nogil=True, fastmath={"contract"})
def softmax_backward_mid_rows(grad, result, out, lo, hi):
    """result * (grad - sum(grad * result)) over axis 1 of (outer, n, inner) arrays, for outer
    indices [lo, hi) (``softmax_backward_rows`` per lane)."""
    n, inner = grad.shape[1], grad.shape[2]
    B = _lanes(n, inner)
    s = np.empty(B, np.float32)
    for o in range(lo, hi):
        for j0 in range(0, inner, B):
            j1 = min(j0 + B, inner)
            L = j1 - j0
            for j in range(L):
                s[j] = np.float32(0.0)
            for i in range(n):
                g, r = grad[o, i, j0:j1], result[o, i, j0:j1]
                for j in range(L):
                    s[j] += g[j] * r[j]
            for i in range(n):
                g, r, orow = grad[o, i, j0:j1], result[o, i, j0:j1], out[o, i, j0:j1]
                for j in range(L):
                    orow[j] = r[j] * (g[j] - s[j])


@njit(cache=True, nogil=True, parallel=True)
def softmax_backward_mid_parallel(grad, result, out, parts):
    n = grad.shape[0]
    for p in prange(parts):
        lo, hi = run_bounds(n, parts, p)
        if lo < hi:
            softmax_backward_mid_rows(grad, result, out, lo, hi)


@njit(cache=True, nogil=True, fastmath={"contract"})
def log_softmax_backward_mid_rows(grad, result, out, lo, hi):
    """grad - exp(result) * sum(grad) over axis 1 of (outer, n, inner) arrays, for outer
    indices [lo, hi) (``log_softmax_backward_rows`` per lane)."""
    n, inner = grad.shape[1], grad.shape[2]
    B = _lanes(n, inner)
    s = np.empty(B, np.float32)
    for o in range(lo, hi):
        for j0 in range(0, inner, B):
            j1 = min(j0 + B, inner)
            L = j1 - j0
            for j in range(L):
                s[j] = np.float32(0.0)
            for i in range(n):
                g = grad[o, i, j0:j1]
                for j in range(L):
                    s[j] += g[j]
            for i in range(n):
                g, r, orow = grad[o, i, j0:j1], result[o, i, j0:j1], out[o, i, j0:j1]
                for j in range(L):
                    orow[j] = g[j] - _exp_softmax(r[j]) * s[j]


@njit(cache=True, nogil=True, parallel=True)
def log_softmax_backward_mid_parallel(grad, result, out, parts):
    n = grad.shape[0]
    for p in prange(parts):
        lo, hi = run_bounds(n, parts, p)
        if lo < hi:
            log_softmax_backward_mid_rows(grad, result, out, lo, hi)


@njit(cache=True, nogil=True)
def scatter_add_rows(g, idx, out):
    """out[idx[i]] += g[i] for the rows i of g (N, D) in order, as ``np.add.at`` adds them (the
    same bits); idx within [-len(out), len(out)) (callers check), a negative one from the end."""
    n = out.shape[0]
    for i in range(idx.shape[0]):
        r = idx[i]
        if r < 0:
            r += n
        for c in range(g.shape[1]):
            out[r, c] += g[i, c]


@njit(cache=True, nogil=True, fastmath=_FAST)
def _row_moments(x, r):
    """(mean, 1 / sqrt(var + eps) argument var) of row r of x (N, C) float32: two passes over
    the row while it is in cache (the variance of x - mean, as NumPy's two-pass form)."""
    C = x.shape[1]
    s = np.float32(0.0)
    for c in range(C):
        s += x[r, c]
    mean = s / np.float32(C)
    v = np.float32(0.0)
    for c in range(C):
        d = x[r, c] - mean
        v += d * d
    return mean, v / np.float32(C)


@njit(cache=True, nogil=True, fastmath={"contract"})
def layer_norm_rows(x, w, b, eps, out, lo, hi):
    """out[r] = (x[r] - mean) / sqrt(var + eps) * w + b for rows r in [lo, hi) of x (N, C)
    float32; w, b (C,)."""
    for r in range(lo, hi):
        mean, var = _row_moments(x, r)
        rstd = np.float32(1.0) / np.sqrt(var + eps)
        for c in range(x.shape[1]):
            out[r, c] = (x[r, c] - mean) * rstd * w[c] + b[c]


@njit(cache=True, nogil=True, parallel=True)
def layer_norm_parallel(x, w, b, eps, out, parts):
    n = x.shape[0]
    for p in prange(parts):
        lo, hi = run_bounds(n, parts, p)
        if lo < hi:
            layer_norm_rows(x, w, b, eps, out, lo, hi)


@njit(cache=True, nogil=True, fastmath=_FAST)
def layer_norm_backward_rows(g, x, w, eps, dx, sums, starts, lo, hi):
    """For rows r in [lo, hi): the input gradient of layer_norm, dx[r] = (g w - mean(g w) -
    xhat mean(g w xhat)) * rstd (the statistics recomputed from x), and this run's column
    sums of g * xhat and of g (the weight's and bias's gradients over its rows) in sums[lo, 0]
    and sums[lo, 1] (float64), starts[lo] set: the caller adds the marked rows of ``sums``.
    No (N, C) g * xhat array, no further passes over the rows."""
    C = x.shape[1]
    sw = sums[lo, 0]
    sb = sums[lo, 1]
    for c in range(C):
        sw[c] = 0.0
        sb[c] = 0.0
    for r in range(lo, hi):
        mean, var = _row_moments(x, r)
        rstd = np.float32(1.0) / np.sqrt(var + eps)
        m1 = np.float32(0.0)
        m2 = np.float32(0.0)
        for c in range(C):
            xh = (x[r, c] - mean) * rstd
            gw = g[r, c] * w[c]
            m1 += gw
            m2 += gw * xh
            sw[c] += np.float64(g[r, c] * xh)
            sb[c] += np.float64(g[r, c])
        m1 /= np.float32(C)
        m2 /= np.float32(C)
        for c in range(C):
            xh = (x[r, c] - mean) * rstd
            dx[r, c] = (g[r, c] * w[c] - m1 - xh * m2) * rstd
    starts[lo] = True


@njit(cache=True, nogil=True, parallel=True)
def layer_norm_backward_parallel(g, x, w, eps, dx, sums, starts, parts):
    n = x.shape[0]
    for p in prange(parts):
        lo, hi = run_bounds(n, parts, p)
        if lo < hi:
            layer_norm_backward_rows(g, x, w, eps, dx, sums, starts, lo, hi)


# Batch norm over x viewed as (N, C, M) (C-contiguous, float32 or float64), channels [lo, hi):
# a channel's N runs of M values are read from memory once and stay in cache for the passes
# after the first (ResNet-50's largest channel, (8, ., 112, 112) float32, is 400 KB). The sums
# are float64 whatever the dtype (lanes reassociated), each channel's in a fixed order, so the
# results do not depend on how the channels are split over threads.
@njit(cache=True, nogil=True, fastmath=_FAST)
def _bn_sum(x, c):
    """float64 sum of x[:, c, :]."""
    s = 0.0
    for n in range(x.shape[0]):
        for m in range(x.shape[2]):
            s += np.float64(x[n, c, m])
    return s


@njit(cache=True, nogil=True, fastmath=_FAST)
def _bn_sq_dev(x, c, mu):
    """float64 sum of (x[:, c, :] - mu) ** 2 (mu float64: the variance's second pass)."""
    s = 0.0
    for n in range(x.shape[0]):
        for m in range(x.shape[2]):
            d = np.float64(x[n, c, m]) - mu
            s += d * d
    return s


@njit(cache=True, nogil=True, fastmath={"contract"})
def _bn_affine(x, c, a, b, out):
    """out[:, c, :] = x[:, c, :] * a + b (a, b in x's dtype)."""
    for n in range(x.shape[0]):
        for m in range(x.shape[2]):
            out[n, c, m] = x[n, c, m] * a + b


@njit(cache=True, nogil=True, fastmath={"contract"})
def bn_train_channels(x, w, b, eps, mean, var, scale, shift, out, lo, hi):
    """Training batch norm of channels [lo, hi): mean[c] and the biased var[c] of x[:, c, :]
    (two passes, float64), then out = x * scale[c] + shift[c] with scale = w / sqrt(var + eps),
    shift = b - mean * scale (in x's dtype, as ``nn.native_batch_norm``'s NumPy path)."""
    cnt = x.shape[0] * x.shape[2]
    for c in range(lo, hi):
        mu = _bn_sum(x, c) / cnt
        mean[c] = mu
        var[c] = _bn_sq_dev(x, c, mu) / cnt
        scale[c] = 1.0 / np.sqrt(var[c] + eps)
        scale[c] = w[c] * scale[c]
        shift[c] = b[c] - mean[c] * scale[c]
        _bn_affine(x, c, scale[c], shift[c], out)


@njit(cache=True, nogil=True, parallel=True)
def bn_train_parallel(x, w, b, eps, mean, var, scale, shift, out, parts):
    n = x.shape[1]
    for p in prange(parts):
        lo, hi = run_bounds(n, parts, p)
        if lo < hi:
            bn_train_channels(x, w, b, eps, mean, var, scale, shift, out, lo, hi)


@njit(cache=True, nogil=True)
def bn_affine_channels(x, scale, shift, out, lo, hi):
    """out[:, c, :] = x[:, c, :] * scale[c] + shift[c] for channels [lo, hi) (evaluation)."""
    for c in range(lo, hi):
        _bn_affine(x, c, scale[c], shift[c], out)


@njit(cache=True, nogil=True, parallel=True)
def bn_affine_parallel(x, scale, shift, out, parts):
    n = x.shape[1]
    for p in prange(parts):
        lo, hi = run_bounds(n, parts, p)
        if lo < hi:
            bn_affine_channels(x, scale, shift, out, lo, hi)


@njit(cache=True, nogil=True, fastmath=_FAST)
def _bn_grad_sums(g, x, c, mu):
    """float64 (sum(g), sum(g * (x - mu))) over channel c."""
    sg = 0.0
    sgx = 0.0
    for n in range(x.shape[0]):
        for m in range(x.shape[2]):
            gv = np.float64(g[n, c, m])
            sg += gv
            sgx += gv * (np.float64(x[n, c, m]) - mu)
    return sg, sgx


@njit(cache=True, nogil=True, fastmath={"contract"})
def bn_backward_channels(x, g, mean, invstd, w, training, coef, gx, gw, gb, lo, hi):
    """Batch norm's gradients for channels [lo, hi): gb[c] = sum(g), gw[c] = sum(g * xhat)
    (xhat = (x - mean) * invstd; float64 sums rounded to the dtype), then, when gx has
    elements, gx = a * g + k * (x - mean) + d with a = w * invstd and, in training, k = -a *
    invstd * gw / cnt, d = -a * gb / cnt (the batch statistics' terms; 0 in evaluation).
    coef (C, 2) in x's dtype holds k and d."""
    cnt = x.shape[0] * x.shape[2]
    for c in range(lo, hi):
        mu = mean[c]
        sg, sgx = _bn_grad_sums(g, x, c, np.float64(mu))
        gb[c] = sg
        gw[c] = sgx * invstd[c]
        if gx.size == 0:
            continue
        a = w[c] * invstd[c]
        if training:
            coef[c, 0] = -(np.float64(a) * invstd[c]) * (sgx * invstd[c]) / cnt
            coef[c, 1] = -np.float64(a) * sg / cnt
        else:
            coef[c, 0] = 0.0
            coef[c, 1] = 0.0
        k = coef[c, 0]
        d = coef[c, 1]
        for n in range(x.shape[0]):
            for m in range(x.shape[2]):
                gx[n, c, m] = a * g[n, c, m] + k * (x[n, c, m] - mu) + d


@njit(cache=True, nogil=True, parallel=True)
def bn_backward_parallel(x, g, mean, invstd, w, training, coef, gx, gw, gb, parts):
    n = x.shape[1]
    for p in prange(parts):
        lo, hi = run_bounds(n, parts, p)
        if lo < hi:
            bn_backward_channels(x, g, mean, invstd, w, training, coef, gx, gw, gb, lo, hi)
