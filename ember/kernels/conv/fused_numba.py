"""Numba kernels of a convolution fused with what follows it: the inference plan's convolution
steps (``ember.jit.plan``). The input is padded and unrolled (im2col) into a preallocated column
buffer, one BLAS GEMM forms the sum, and one epilogue kernel adds the bias, the residual and ReLU
(and a max pool) while writing the NCHW result.

Imported lazily (never by ``import ember``); compiled once per dtype and cached on disk. Each
kernel is serial, releases the GIL and works on the images [n0, n1), so a plan splits a batch
over ember's threads.

- ``pad_into(x, ph, pw, xp)``: the input into a preallocated zero-bordered buffer;
- ``im2col(xp, R, S, sh, sw, dh, dw, col)``: xp (N, C, H, W) -> col (C*R*S, N, Ho, Wo); col's
  row order is the weight's (c, r, s) order, so ``w.reshape(K, -1) @ col.reshape(C*R*S, -1)``
  is the convolution in (K, N, Ho*Wo) layout;
- ``conv_epilogue(z, b, res, y, has_res, relu)``: y[n, k, p] = act(z[k, n, p] + b[k] +
  res[n, k, p]) (bias, residual add and ReLU in one pass, into NCHW order);
- ``conv_pool_epilogue(z, b, y, relu, kh, kw, sh, sw)``: the same followed by a max pool
  without padding (every window inside the plane), written only at the pooled size;
- ``im2col_s1`` / ``conv_pool2_epilogue``: the stride-1 im2col and the 2x2 / stride-2 pool
  epilogue without run-time strides (their inner loops vectorise: 3x faster on LeNet);
- ``im2col_t``, ``t_epilogue``, ``t_pool2_epilogue``: the transposed orientation, col (N*Ho*Wo,
  C*R*S) and a (N*Ho*Wo, K) GEMM result;
- ``nchw_epilogue``, ``nchw_pool2_epilogue``: the epilogues of a sum already in NCHW order (from
  ember's convolution engine), and their ``_runs`` drivers: runs of images in a ``prange``.

The arithmetic is eager's: the bias is added to the GEMM's sum, then the residual, then ReLU
(``max(v, 0)``, NaN propagating), and the max pool's first maximum wins, NaN propagating.
"""
from numba import njit, prange

from ember.kernels.runtime.nbhelpers import run_bounds


@njit(inline="always")
def _max4(a0, a1, a2, a3):
    """The 2x2 window's maximum: the first maximum wins, NaN propagates (eager's rule)."""
    m0 = a0 if a0 >= a1 or a0 != a0 else a1
    m1 = a2 if a2 >= a3 or a2 != a2 else a3
    return m0 if m0 >= m1 or m0 != m0 else m1


@njit(cache=True, nogil=True)
def pad_into(x, ph, pw, xp, n0, n1):
    """x (N, C, H, W) into the interior of xp (N, C, H + 2ph, W + 2pw), whose border stays 0."""
    N, C, H, W = x.shape
    for n in range(n0, n1):
        for c in range(C):
            for i in range(H):
                for j in range(W):
                    xp[n, c, i + ph, j + pw] = x[n, c, i, j]


@njit(cache=True, nogil=True)
def im2col(xp, R, S, sh, sw, dh, dw, col, n0, n1):
    """col[(c, r, s), n, oy, ox] = xp[n, c, oy*sh + r*dh, ox*sw + s*dw] (xp already padded)."""
    N, C = xp.shape[0], xp.shape[1]
    Ho, Wo = col.shape[2], col.shape[3]
    for c in range(C):
        for r in range(R):
            for s in range(S):
                row = (c * R + r) * S + s
                for n in range(n0, n1):
                    for oy in range(Ho):
                        q = oy * sh + r * dh
                        if sw == 1:
                            for ox in range(Wo):
                                col[row, n, oy, ox] = xp[n, c, q, ox + s * dw]
                        else:
                            for ox in range(Wo):
                                col[row, n, oy, ox] = xp[n, c, q, ox * sw + s * dw]


@njit(cache=True, nogil=True)
def conv_epilogue(z, b, res, y, has_res, relu, n0, n1):
    """y[n, k, p] = act(z[k, n, p] + b[k] (+ res[n, k, p]))."""
    K, N, P = z.shape
    zero = z.dtype.type(0)
    for n in range(n0, n1):
        for k in range(K):
            bk = b[k]
            if has_res and relu:
                for p in range(P):
                    v = (z[k, n, p] + bk) + res[n, k, p]
                    y[n, k, p] = zero if v < zero else v
            elif has_res:
                for p in range(P):
                    y[n, k, p] = (z[k, n, p] + bk) + res[n, k, p]
            elif relu:
                for p in range(P):
                    v = z[k, n, p] + bk
                    y[n, k, p] = zero if v < zero else v
            else:
                for p in range(P):
                    y[n, k, p] = z[k, n, p] + bk


@njit(cache=True, nogil=True)
def conv_pool_epilogue(z, b, y, relu, kh, kw, sh, sw, n0, n1):
    """y[n, k] = max pool (kh, kw, stride sh, sw, no padding) of act(z[k, n] + b[k]); the
    window maximum comes first (ReLU and the per-channel bias are monotone), NaN propagating."""
    K, N, Ho, Wo = z.shape
    Hp, Wp = y.shape[2], y.shape[3]
    zero = z.dtype.type(0)
    for n in range(n0, n1):
        for k in range(K):
            bk = b[k]
            for i in range(Hp):
                for j in range(Wp):
                    m = z[k, n, i * sh, j * sw]
                    for a in range(kh):
                        for c in range(kw):
                            v = z[k, n, i * sh + a, j * sw + c]
                            m = v if (v > m or v != v) and m == m else m
                    m = m + bk
                    y[n, k, i, j] = zero if (relu and m < zero) else m


@njit(cache=True, nogil=True)
def im2col_s1(xp, R, S, col, n0, n1):
    """``im2col`` for stride 1 and dilation 1 (the common case, its inner loop a plain copy)."""
    N, C = xp.shape[0], xp.shape[1]
    Ho, Wo = col.shape[2], col.shape[3]
    for c in range(C):
        for r in range(R):
            for s in range(S):
                row = (c * R + r) * S + s
                for n in range(n0, n1):
                    for oy in range(Ho):
                        for ox in range(Wo):
                            col[row, n, oy, ox] = xp[n, c, oy + r, ox + s]


@njit(cache=True, nogil=True)
def conv_pool2_epilogue(z, b, y, relu, n0, n1):
    """``conv_pool_epilogue`` for 2x2 windows with stride 2."""
    K, N = z.shape[0], z.shape[1]
    Hp, Wp = y.shape[2], y.shape[3]
    zero = z.dtype.type(0)
    for n in range(n0, n1):
        for k in range(K):
            bk = b[k]
            for i in range(Hp):
                for j in range(Wp):
                    a0 = z[k, n, 2 * i, 2 * j]
                    a1 = z[k, n, 2 * i, 2 * j + 1]
                    a2 = z[k, n, 2 * i + 1, 2 * j]
                    a3 = z[k, n, 2 * i + 1, 2 * j + 1]
                    m = _max4(a0, a1, a2, a3) + bk
                    y[n, k, i, j] = zero if (relu and m < zero) else m


@njit(cache=True, nogil=True)
def nchw_epilogue(z, b, res, y, has_res, relu, n0, n1):
    """``conv_epilogue`` for a convolution result already in (N, K, P) order (the engine's)."""
    K, P = z.shape[1], z.shape[2]
    zero = z.dtype.type(0)
    for n in range(n0, n1):
        for k in range(K):
            bk = b[k]
            for p in range(P):
                v = z[n, k, p] + bk
                if has_res:
                    v = v + res[n, k, p]
                y[n, k, p] = zero if (relu and v < zero) else v


@njit(cache=True, nogil=True)
def nchw_pool2_epilogue(z, b, y, relu, n0, n1):
    """``conv_pool2_epilogue`` for a convolution result in (N, K, Ho, Wo) order."""
    K = z.shape[1]
    Hp, Wp = y.shape[2], y.shape[3]
    zero = z.dtype.type(0)
    for n in range(n0, n1):
        for k in range(K):
            bk = b[k]
            for i in range(Hp):
                for j in range(Wp):
                    a0 = z[n, k, 2 * i, 2 * j]
                    a1 = z[n, k, 2 * i, 2 * j + 1]
                    a2 = z[n, k, 2 * i + 1, 2 * j]
                    a3 = z[n, k, 2 * i + 1, 2 * j + 1]
                    m = _max4(a0, a1, a2, a3) + bk
                    y[n, k, i, j] = zero if (relu and m < zero) else m


@njit(cache=True, nogil=True)
def im2col_t(xp, R, S, sh, sw, dh, dw, Ho, Wo, colt, n0, n1):
    """The transposed column matrix: colt[(n, oy, ox), (c, r, s)] (one image row per output
    pixel), for the (N*Ho*Wo, C*R*S) @ (C*R*S, K) orientation of the GEMM."""
    C = xp.shape[1]
    for n in range(n0, n1):
        for oy in range(Ho):
            for ox in range(Wo):
                row = (n * Ho + oy) * Wo + ox
                for c in range(C):
                    for r in range(R):
                        q = oy * sh + r * dh
                        base = (c * R + r) * S
                        for s in range(S):
                            colt[row, base + s] = xp[n, c, q, ox * sw + s * dw]


@njit(cache=True, nogil=True)
def t_epilogue(zt, b, res, y, has_res, relu, n0, n1):
    """``conv_epilogue`` for a GEMM result in (N*P, K) order: y[n, k, p] = act(zt[n*P + p, k]
    + b[k] (+ res[n, k, p]))."""
    K = zt.shape[1]
    P = y.shape[2]
    zero = zt.dtype.type(0)
    for n in range(n0, n1):
        for k in range(K):
            bk = b[k]
            for p in range(P):
                v = zt[n * P + p, k] + bk
                if has_res:
                    v = v + res[n, k, p]
                y[n, k, p] = zero if (relu and v < zero) else v


@njit(cache=True, nogil=True)
def t_pool2_epilogue(zt, b, y, relu, n0, n1):
    """``conv_pool2_epilogue`` for a GEMM result in (N, Ho, Wo, K) order."""
    K = zt.shape[3]
    Hp, Wp = y.shape[2], y.shape[3]
    zero = zt.dtype.type(0)
    for n in range(n0, n1):
        for k in range(K):
            bk = b[k]
            for i in range(Hp):
                for j in range(Wp):
                    a0 = zt[n, 2 * i, 2 * j, k]
                    a1 = zt[n, 2 * i, 2 * j + 1, k]
                    a2 = zt[n, 2 * i + 1, 2 * j, k]
                    a3 = zt[n, 2 * i + 1, 2 * j + 1, k]
                    m = _max4(a0, a1, a2, a3) + bk
                    y[n, k, i, j] = zero if (relu and m < zero) else m


@njit(cache=True, nogil=True, parallel=True)
def nchw_epilogue_runs(z, b, res, y, has_res, relu, parts):
    """``nchw_epilogue`` over all images in ``parts`` runs of a ``prange`` (Numba's TBB layer:
    its workers take a run within microseconds, where ember's pool costs ~0.1 ms a hand-over)."""
    N = z.shape[0]
    for r in prange(parts):
        lo, hi = run_bounds(N, parts, r)
        if lo < hi:
            nchw_epilogue(z, b, res, y, has_res, relu, lo, hi)


@njit(cache=True, nogil=True, parallel=True)
def nchw_pool2_epilogue_runs(z, b, y, relu, parts):
    """``nchw_pool2_epilogue`` over all images in ``parts`` runs of a ``prange``."""
    N = z.shape[0]
    for r in prange(parts):
        lo, hi = run_bounds(N, parts, r)
        if lo < hi:
            nchw_pool2_epilogue(z, b, y, relu, lo, hi)
