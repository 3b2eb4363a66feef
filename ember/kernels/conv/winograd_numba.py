"""Numba kernels for Winograd F(4x4, 3x3): tile gather + input transform, and output transform.

Imported lazily by ``winograd`` (never by ``import ember``); compiled once per dtype and cached on
disk (cache=True). Both kernels work on one row of tiles at a time so the inner loops run along
contiguous memory, and keep arithmetic in the input dtype (constants come in as arrays of that
dtype: a Python int literal would promote float32 to float64). They are serial on purpose: with
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
    Wb = 4 * tw + 2
    for nc in range(lo, hi):
        n, c = nc // C, nc % C
        rows = np.zeros((6, Wb), dtype=x.dtype)
        t = np.empty((6, Wb), dtype=x.dtype)
        for ty in range(ty0, ty1):
            y0 = 4 * ty - pt
            for i in range(6):
                yy = y0 + i
                if 0 <= yy < H:
                    for xx in range(W):
                        rows[i, xx + pl] = x[n, c, yy, xx]
                else:
                    for xx in range(W):
                        rows[i, xx + pl] = 0
            for j in range(Wb):
                d0, d1, d2, d3, d4, d5 = rows[0, j], rows[1, j], rows[2, j], rows[3, j], \
                    rows[4, j], rows[5, j]
                t[0, j] = c4 * d0 - c5 * d2 + d4
                t[1, j] = d3 + d4 - c4 * (d1 + d2)
                t[2, j] = c4 * (d1 - d2) - d3 + d4
                t[3, j] = c2 * (d3 - d1) - d2 + d4
                t[4, j] = c2 * (d1 - d3) - d2 + d4
                t[5, j] = c4 * d1 - c5 * d3 + d5
            base = ((n - n0) * (ty1 - ty0) + ty - ty0) * tw
            for a in range(6):
                for tx in range(tw):
                    j = 4 * tx
                    d0, d1, d2, d3, d4, d5 = t[a, j], t[a, j + 1], t[a, j + 2], t[a, j + 3], \
                        t[a, j + 4], t[a, j + 5]
                    V[6 * a + 0, c, base + tx] = c4 * d0 - c5 * d2 + d4
                    V[6 * a + 1, c, base + tx] = d3 + d4 - c4 * (d1 + d2)
                    V[6 * a + 2, c, base + tx] = c4 * (d1 - d2) - d3 + d4
                    V[6 * a + 3, c, base + tx] = c2 * (d3 - d1) - d2 + d4
                    V[6 * a + 4, c, base + tx] = c2 * (d1 - d3) - d2 + d4
                    V[6 * a + 5, c, base + tx] = c4 * d1 - c5 * d3 + d5


@njit(cache=True, nogil=True)
def output_transform(M, th, tw, y, k, lo, hi, n0, ty0, ty1):
    """y[n, k, 4ty+a, 4tx+b] = (A^T m A)[a, b] for m = M[:, k, ((n-n0)*(ty1-ty0)+ty-ty0)*tw+tx]
    as 6x6, cropped, for tile rows ty0 <= ty < ty1 and the (image, channel) pairs n*K + k in
    [lo, hi); M holds the tiles of a block as in ``input_transform``.

    ``k`` holds the constants (2, 4, 8) in M's dtype.
    """
    N, K, Ho, Wo = y.shape
    c2, c4, c8 = k[0], k[1], k[2]
    for nk in range(lo, hi):
        n, kk = nk // K, nk % K
        t = np.empty((4, 6, tw), dtype=M.dtype)
        out = np.empty((4, 4 * tw), dtype=M.dtype)
        for ty in range(ty0, ty1):
            base = ((n - n0) * (ty1 - ty0) + ty - ty0) * tw
            for j in range(6):
                for tx in range(tw):
                    m0, m1, m2 = M[j, kk, base + tx], M[6 + j, kk, base + tx], \
                        M[12 + j, kk, base + tx]
                    m3, m4, m5 = M[18 + j, kk, base + tx], M[24 + j, kk, base + tx], \
                        M[30 + j, kk, base + tx]
                    t[0, j, tx] = m0 + m1 + m2 + m3 + m4
                    t[1, j, tx] = m1 - m2 + c2 * (m3 - m4)
                    t[2, j, tx] = m1 + m2 + c4 * (m3 + m4)
                    t[3, j, tx] = m1 - m2 + c8 * (m3 - m4) + m5
            for a in range(4):
                for tx in range(tw):
                    m0, m1, m2 = t[a, 0, tx], t[a, 1, tx], t[a, 2, tx]
                    m3, m4, m5 = t[a, 3, tx], t[a, 4, tx], t[a, 5, tx]
                    out[a, 4 * tx] = m0 + m1 + m2 + m3 + m4
                    out[a, 4 * tx + 1] = m1 - m2 + c2 * (m3 - m4)
                    out[a, 4 * tx + 2] = m1 + m2 + c4 * (m3 + m4)
                    out[a, 4 * tx + 3] = m1 - m2 + c8 * (m3 - m4) + m5
            for a in range(min(4, Ho - 4 * ty)):
                for xx in range(Wo):
                    y[n, kk, 4 * ty + a, xx] = out[a, xx]


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
