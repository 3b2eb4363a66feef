"""Numba kernels for Winograd F(4x4, 3x3): tile gather + input transform, and output transform.

Imported lazily by ``winograd`` (never by ``import ember``); compiled once per dtype and cached on
disk (cache=True). The forward kernels de-interleave tiles once (one stride-4 copy per
(image, channel) pair) so that both transform stages run as unit-stride loops over all tiles of the
pair, which LLVM vectorizes (8x256x14x14 float32, one thread: input 2.8 -> 2.2 ms, output
1.5 -> 0.76 ms, same bits); scratch buffers are allocated once per call, not per pair. All kernels
keep arithmetic in the input dtype (constants come in as arrays of that dtype: a Python int literal
would promote float32 to float64). They are serial on purpose: with
parallel=True (OpenMP layer) next to OpenBLAS's spinning threads the whole Winograd call took
twice as long on 2 cores (27.8 vs 13.9 ms median, 8x64x56x56, K=64). Instead each kernel takes a
range [lo, hi) of (image, channel) pairs and releases the GIL (nogil), so ``parallel.run`` splits
the pairs over ember's own threads with no spinning pool.
"""
import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def input_transform(x, pt, pl, th, tw, V, k, lo, hi, n0, ty0, ty1):
    """V[6a+b, c, ((n-n0)*(ty1-ty0)+ty-ty0)*tw+tx] = (B^T d B)[a, b] for the 6x6 tile d at
    (4ty-pt, 4tx-pl), tile rows ty0 <= ty < ty1, for the (image, channel) pairs n*C + c in
    [lo, hi) (so threads can split the work); V holds the tiles of a block: images n0, n0+1, ...
    and tile rows [ty0, ty1) of each (the whole batch with n0 = 0, ty0 = 0, ty1 = th).

    ``k`` holds the constants (4, 5, 2) in x's dtype.
    """
    N, C, H, W = x.shape
    c4, c5, c2 = k[0], k[1], k[2]
    nty = ty1 - ty0
    T = nty * tw
    Wb = 4 * tw + 2
    zrow = np.zeros(W, dtype=x.dtype)
    t = np.zeros((6, nty, Wb), dtype=x.dtype)
    F = np.empty((6, 6, T), dtype=x.dtype)
    for nc in range(lo, hi):
        n, c = nc // C, nc % C
        for ty in range(nty):
            y0 = 4 * (ty0 + ty) - pt
            r0 = x[n, c, y0] if 0 <= y0 < H else zrow
            r1 = x[n, c, y0 + 1] if 0 <= y0 + 1 < H else zrow
            r2 = x[n, c, y0 + 2] if 0 <= y0 + 2 < H else zrow
            r3 = x[n, c, y0 + 3] if 0 <= y0 + 3 < H else zrow
            r4 = x[n, c, y0 + 4] if 0 <= y0 + 4 < H else zrow
            r5 = x[n, c, y0 + 5] if 0 <= y0 + 5 < H else zrow
            t0, t1, t2 = t[0, ty, pl:pl + W], t[1, ty, pl:pl + W], t[2, ty, pl:pl + W]
            t3, t4, t5 = t[3, ty, pl:pl + W], t[4, ty, pl:pl + W], t[5, ty, pl:pl + W]
            for j in range(W):
                d0, d1, d2, d3, d4, d5 = r0[j], r1[j], r2[j], r3[j], r4[j], r5[j]
                t0[j] = c4 * d0 - c5 * d2 + d4
                t1[j] = d3 + d4 - c4 * (d1 + d2)
                t2[j] = c4 * (d1 - d2) - d3 + d4
                t3[j] = c2 * (d3 - d1) - d2 + d4
                t4[j] = c2 * (d1 - d3) - d2 + d4
                t5[j] = c4 * d1 - c5 * d3 + d5
        for a in range(6):
            for ty in range(nty):
                for s in range(6):
                    f = F[a, s, ty * tw:(ty + 1) * tw]
                    for tx in range(tw):
                        f[tx] = t[a, ty, 4 * tx + s]
        base = (n - n0) * T
        for a in range(6):
            f0, f1, f2, f3, f4, f5 = F[a, 0], F[a, 1], F[a, 2], F[a, 3], F[a, 4], F[a, 5]
            v0, v1, v2 = V[6 * a, c, base:base + T], V[6 * a + 1, c, base:base + T], \
                V[6 * a + 2, c, base:base + T]
            v3, v4, v5 = V[6 * a + 3, c, base:base + T], V[6 * a + 4, c, base:base + T], \
                V[6 * a + 5, c, base:base + T]
            for q in range(T):
                d0, d1, d2, d3, d4, d5 = f0[q], f1[q], f2[q], f3[q], f4[q], f5[q]
                v0[q] = c4 * d0 - c5 * d2 + d4
                v1[q] = d3 + d4 - c4 * (d1 + d2)
                v2[q] = c4 * (d1 - d2) - d3 + d4
                v3[q] = c2 * (d3 - d1) - d2 + d4
                v4[q] = c2 * (d1 - d3) - d2 + d4
                v5[q] = c4 * d1 - c5 * d3 + d5


@njit(cache=True, nogil=True)
def output_transform(M, th, tw, y, k, lo, hi, n0, ty0, ty1):
    """y[n, k, 4ty+a, 4tx+b] = (A^T m A)[a, b] for m = M[:, k, ((n-n0)*(ty1-ty0)+ty-ty0)*tw+tx]
    as 6x6, cropped, for tile rows ty0 <= ty < ty1 and the (image, channel) pairs n*K + k in
    [lo, hi); M holds the tiles of a block as in ``input_transform``.

    ``k`` holds the constants (2, 4, 8) in M's dtype.
    """
    N, K, Ho, Wo = y.shape
    c2, c4, c8 = k[0], k[1], k[2]
    nty = ty1 - ty0
    T = nty * tw
    t = np.empty((4, 6, T), dtype=M.dtype)
    o = np.empty((4, 4, T), dtype=M.dtype)
    for nk in range(lo, hi):
        n, kk = nk // K, nk % K
        base = (n - n0) * T
        for j in range(6):
            m0, m1, m2 = M[j, kk, base:base + T], M[6 + j, kk, base:base + T], \
                M[12 + j, kk, base:base + T]
            m3, m4, m5 = M[18 + j, kk, base:base + T], M[24 + j, kk, base:base + T], \
                M[30 + j, kk, base:base + T]
            s0, s1, s2, s3 = t[0, j], t[1, j], t[2, j], t[3, j]
            for q in range(T):
                a0, a1, a2, a3, a4, a5 = m0[q], m1[q], m2[q], m3[q], m4[q], m5[q]
                s0[q] = a0 + a1 + a2 + a3 + a4
                s1[q] = a1 - a2 + c2 * (a3 - a4)
                s2[q] = a1 + a2 + c4 * (a3 + a4)
                s3[q] = a1 - a2 + c8 * (a3 - a4) + a5
        for a in range(4):
            m0, m1, m2, m3, m4, m5 = t[a, 0], t[a, 1], t[a, 2], t[a, 3], t[a, 4], t[a, 5]
            s0, s1, s2, s3 = o[a, 0], o[a, 1], o[a, 2], o[a, 3]
            for q in range(T):
                a0, a1, a2, a3, a4, a5 = m0[q], m1[q], m2[q], m3[q], m4[q], m5[q]
                s0[q] = a0 + a1 + a2 + a3 + a4
                s1[q] = a1 - a2 + c2 * (a3 - a4)
                s2[q] = a1 + a2 + c4 * (a3 + a4)
                s3[q] = a1 - a2 + c8 * (a3 - a4) + a5
        for ty in range(nty):
            yy0 = 4 * (ty0 + ty)
            for a in range(min(4, Ho - yy0)):
                row = y[n, kk, yy0 + a]
                for b in range(4):
                    ob = o[a, b, ty * tw:(ty + 1) * tw]
                    for tx in range((Wo - b + 3) // 4):
                        row[4 * tx + b] = ob[tx]


@njit(cache=True, nogil=True)
def grad_output_transform(gy, th, tw, GY, k, lo, hi, n0):
    """GY[6a+b, k, ((n-n0)*th+ty)*tw+tx] = (A g A^T)[a, b] for the 4x4 tile g of gy at (4ty, 4tx),
    zero beyond gy's edge (the adjoint of ``output_transform``'s crop), for n*K + k in [lo, hi);
    GY holds the tiles of images n0, n0+1, ...

    ``k`` holds the constants (2, 4, 8) in gy's dtype.
    """
    N, K, Ho, Wo = gy.shape
    c2, c4, c8 = k[0], k[1], k[2]
    Wb = 4 * tw
    rows = np.zeros((4, Wb), dtype=gy.dtype)
    e = np.empty((6, Wb), dtype=gy.dtype)
    for nk in range(lo, hi):
        n, kk = nk // K, nk % K
        for ty in range(th):
            for i in range(4):
                yy = 4 * ty + i
                if yy < Ho:
                    for xx in range(Wo):
                        rows[i, xx] = gy[n, kk, yy, xx]
                else:
                    for xx in range(Wo):
                        rows[i, xx] = 0
            for j in range(Wb):
                g0, g1, g2, g3 = rows[0, j], rows[1, j], rows[2, j], rows[3, j]
                e[0, j] = g0
                e[1, j] = g0 + g1 + g2 + g3
                e[2, j] = g0 - g1 + g2 - g3
                e[3, j] = g0 + c2 * g1 + c4 * g2 + c8 * g3
                e[4, j] = g0 - c2 * g1 + c4 * g2 - c8 * g3
                e[5, j] = g3
            base = ((n - n0) * th + ty) * tw
            for a in range(6):
                for tx in range(tw):
                    j = 4 * tx
                    g0, g1, g2, g3 = e[a, j], e[a, j + 1], e[a, j + 2], e[a, j + 3]
                    GY[6 * a + 0, kk, base + tx] = g0
                    GY[6 * a + 1, kk, base + tx] = g0 + g1 + g2 + g3
                    GY[6 * a + 2, kk, base + tx] = g0 - g1 + g2 - g3
                    GY[6 * a + 3, kk, base + tx] = g0 + c2 * g1 + c4 * g2 + c8 * g3
                    GY[6 * a + 4, kk, base + tx] = g0 - c2 * g1 + c4 * g2 - c8 * g3
                    GY[6 * a + 5, kk, base + tx] = g3


@njit(cache=True, nogil=True, inline="always")
def _g_rows(a0, a1, a2, o0, o1, o2, o3, o4, o5, k):
    """o = G (a0, a1, a2) elementwise along the rows: G's six rows applied to three unit-stride
    vectors. ``k`` holds (1/4, 1/6, 1/12, 1/24)."""
    c4, c6, c12, c24 = k[0], k[1], k[2], k[3]
    for q in range(a0.shape[0]):
        x0, x1, x2 = a0[q], a1[q], a2[q]
        o0[q] = c4 * x0
        o1[q] = -c6 * (x0 + x1 + x2)
        o2[q] = -c6 * (x0 - x1 + x2)
        o3[q] = c24 * x0 + c12 * x1 + c6 * x2
        o4[q] = c24 * x0 - c12 * x1 + c6 * x2
        o5[q] = x2


@njit(cache=True, nogil=True, inline="always")
def _gt_rows(a0, a1, a2, a3, a4, a5, o0, o1, o2, k):
    """o = G^T (a0, ..., a5) elementwise along the rows (the adjoint of ``_g_rows``)."""
    c4, c6, c12, c24 = k[0], k[1], k[2], k[3]
    for q in range(a0.shape[0]):
        x0, x1, x2, x3, x4, x5 = a0[q], a1[q], a2[q], a3[q], a4[q], a5[q]
        o0[q] = c4 * x0 - c6 * (x1 + x2) + c24 * (x3 + x4)
        o1[q] = c6 * (x2 - x1) + c12 * (x3 - x4)
        o2[q] = c6 * (x3 + x4 - x1 - x2) + x5


@njit(cache=True, nogil=True)
def weight_transform(w, U, groups, flip, k, lo, hi):
    """U[6a+b, r*Q + q] = (G v G^T)[a, b] for the rows r in [lo, hi) of the transformed weight,
    where v (3x3) is w[r, q] (U of w itself: R = K rows, Q = C/groups columns) or, when ``flip``,
    the flipped tap w[k, c, ::-1, ::-1] of k = (r // (C/g)) * (K/g) + q, c = r % (C/g) (U of
    the input gradient's flipped, per-group transposed weight, as ``grad_as_forward``'s
    ``flipped_transposed``, without building it: R = C rows, Q = K/g columns).

    Each row's taps are de-interleaved into nine unit-stride planes, then G and G^T run as
    vector loops over the row. ``k`` holds (1/4, 1/6, 1/12, 1/24) in w's dtype.
    """
    K, Cg = w.shape[0], w.shape[1]
    Kg = K // groups
    Q = Kg if flip else Cg
    t = np.empty((9, Q), dtype=w.dtype)
    h = np.empty((6, 3, Q), dtype=w.dtype)
    for r in range(lo, hi):
        if flip:
            k0, c = (r // Cg) * Kg, r % Cg
            for q in range(Q):
                for i in range(3):
                    for j in range(3):
                        t[3 * i + j, q] = w[k0 + q, c, 2 - i, 2 - j]
        else:
            for q in range(Q):
                for i in range(3):
                    for j in range(3):
                        t[3 * i + j, q] = w[r, q, i, j]
        for j in range(3):
            _g_rows(t[j], t[3 + j], t[6 + j], h[0, j], h[1, j], h[2, j], h[3, j], h[4, j],
                    h[5, j], k)
        base = r * Q
        for a in range(6):
            _g_rows(h[a, 0], h[a, 1], h[a, 2], U[6 * a, base:base + Q],
                    U[6 * a + 1, base:base + Q], U[6 * a + 2, base:base + Q],
                    U[6 * a + 3, base:base + Q], U[6 * a + 4, base:base + Q],
                    U[6 * a + 5, base:base + Q], k)


@njit(cache=True, nogil=True)
def weight_transform_adjoint(M, gw, k, lo, hi):
    """gw[r, q] = G^T m G (3x3) for m[a, b] = M[6a+b, r*Q + q], rows r in [lo, hi) of gw
    (R, Q, 3, 3): the adjoint of ``weight_transform`` (not flipped), as vector loops over each
    row, then the nine planes interleaved into gw. ``k`` as in ``weight_transform``."""
    Q = gw.shape[1]
    h = np.empty((3, 6, Q), dtype=M.dtype)
    t = np.empty((9, Q), dtype=M.dtype)
    for r in range(lo, hi):
        base = r * Q
        for b in range(6):
            _gt_rows(M[b, base:base + Q], M[6 + b, base:base + Q], M[12 + b, base:base + Q],
                     M[18 + b, base:base + Q], M[24 + b, base:base + Q],
                     M[30 + b, base:base + Q], h[0, b], h[1, b], h[2, b], k)
        for i in range(3):
            _gt_rows(h[i, 0], h[i, 1], h[i, 2], h[i, 3], h[i, 4], h[i, 5], t[3 * i],
                     t[3 * i + 1], t[3 * i + 2], k)
        for q in range(Q):
            for i in range(3):
                for j in range(3):
                    gw[r, q, i, j] = t[3 * i + j, q]
