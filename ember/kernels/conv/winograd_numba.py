"""Numba kernels for Winograd F(4x4, 3x3): tile gather + input transform, output transform, the
gradient's output transform and the weight transform with its adjoint.

Imported lazily by ``winograd`` (never by ``import ember``); compiled once per dtype and cached on
disk (cache=True). The tile transforms work on (channel, image) pairs taken channel-major, in
chunks of about ``CHUNK`` tiles: each pair's plane is copied into a zero-bordered scratch plane,
its tiles' elements are gathered into one row per position in the tile (``_tile_offsets``), and
both transform stages run as unit-stride loops over the whole chunk, which LLVM vectorizes. The
chunk is what makes those loops long: one pair has only th*tw tiles (16 at 14x14, 4 at 7x7),
fewer than one pass of a vectorized loop, and the earlier kernels, which ran their loops per
pair, ran them nearly scalar. From ``PAIR_TILES`` tiles per image on, where a pair's loops are
long enough, the input and output transforms still run one pair at a time. Taken
channel-major, consecutive pairs are consecutive runs of tiles in V, M and GY ((36, channels,
images * tiles), as the GEMMs use them), so the second stage writes (and the output transform
reads) a chunk as one run. Each output is the same expression in the same order as before, so
results are the same bits. All kernels keep arithmetic in the input dtype (constants come in
as arrays of that dtype: a Python int literal would promote float32 to float64). They are
serial on purpose: with parallel=True (OpenMP layer) next to OpenBLAS's spinning threads the
whole Winograd call took twice as long on 2 cores (27.8 vs 13.9 ms median, 8x64x56x56, K=64).
Instead each kernel takes a range [lo, hi) of pairs and releases the GIL (nogil), so
``parallel.run`` splits the pairs over ember's own threads with no spinning pool.
"""
import numpy as np
from numba import njit

CHUNK = 512   # tiles per pass of the vector loops
# From this many tiles per image on, the input and output transforms run one pair at a time
# instead (their loops over the pair's tiles are long enough; the chunks' gather and scatter
# cost more): batch of one, one thread, CPU ms, per pair -> chunked, input / output transform:
# 1x128x28x28 (49 tiles) 0.51 / 0.26 -> 0.62 / 0.45; 1x256x14x14 (16 tiles) 0.52 / 0.21 ->
# 0.41 / 0.25; 8x256x14x14 5.8 / 1.4 -> 3.4 / 1.8 (the gradient's transform: 5.6 -> 2.5).
PAIR_TILES = 32


@njit(cache=True, nogil=True, inline="always")
def _bt_rows(n, a0, a1, a2, a3, a4, a5, o0, o1, o2, o3, o4, o5, c4, c5, c2):
    """o = B^T (a0, ..., a5) elementwise over the first ``n`` entries of unit-stride vectors:
    the input transform's six rows (``c4, c5, c2`` = 4, 5, 2 in the data's dtype)."""
    for q in range(n):
        d0, d1, d2, d3, d4, d5 = a0[q], a1[q], a2[q], a3[q], a4[q], a5[q]
        o0[q] = c4 * d0 - c5 * d2 + d4
        o1[q] = d3 + d4 - c4 * (d1 + d2)
        o2[q] = c4 * (d1 - d2) - d3 + d4
        o3[q] = c2 * (d3 - d1) - d2 + d4
        o4[q] = c2 * (d1 - d3) - d2 + d4
        o5[q] = c4 * d1 - c5 * d3 + d5


@njit(cache=True, nogil=True, inline="always")
def _at_rows(n, a0, a1, a2, a3, a4, a5, o0, o1, o2, o3, c2, c4, c8):
    """o = A^T (a0, ..., a5) elementwise over the first ``n`` entries of unit-stride vectors:
    the output transform's four rows (``c2, c4, c8`` = 2, 4, 8 in the data's dtype)."""
    for q in range(n):
        x0, x1, x2, x3, x4, x5 = a0[q], a1[q], a2[q], a3[q], a4[q], a5[q]
        o0[q] = x0 + x1 + x2 + x3 + x4
        o1[q] = x1 - x2 + c2 * (x3 - x4)
        o2[q] = x1 + x2 + c4 * (x3 + x4)
        o3[q] = x1 - x2 + c8 * (x3 - x4) + x5


@njit(cache=True, nogil=True)
def _tile_offsets(ty0, ty1, tw, width):
    """Flat offset of the top-left element of tile (ty, tx), ty0 <= ty < ty1, in a plane of rows
    ``width`` long whose row 0 is the first row of tile row ty0, in tile order."""
    idx = np.empty((ty1 - ty0) * tw, np.int64)
    for ty in range(ty1 - ty0):
        for tx in range(tw):
            idx[ty * tw + tx] = 4 * ty * width + 4 * tx
    return idx


@njit(cache=True, nogil=True)
def _input_per_pair(x, pt, pl, th, tw, V, k, lo, hi, n0, ty0, ty1, nimg):
    """``input_transform`` one pair at a time, its loops over the pair's tiles (from
    PAIR_TILES tiles per image on)."""
    N, C, H, W = x.shape
    c4, c5, c2 = k[0], k[1], k[2]
    nty = ty1 - ty0
    T = nty * tw
    Wb = 4 * tw + 2
    zrow = np.zeros(W, dtype=x.dtype)
    t = np.zeros((6, nty, Wb), dtype=x.dtype)
    F = np.empty((6, 6, T), dtype=x.dtype)
    for p in range(lo, hi):
        c, n = p // nimg, n0 + p % nimg
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
            _bt_rows(W, r0, r1, r2, r3, r4, r5, t0, t1, t2, t3, t4, t5, c4, c5, c2)
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
            _bt_rows(T, f0, f1, f2, f3, f4, f5, v0, v1, v2, v3, v4, v5, c4, c5, c2)


@njit(cache=True, nogil=True)
def _output_per_pair(M, th, tw, y, k, lo, hi, n0, ty0, ty1, nimg):
    """``output_transform`` one pair at a time, its loops over the pair's tiles (from
    PAIR_TILES tiles per image on)."""
    N, K, Ho, Wo = y.shape
    c2, c4, c8 = k[0], k[1], k[2]
    nty = ty1 - ty0
    T = nty * tw
    t = np.empty((4, 6, T), dtype=M.dtype)
    o = np.empty((4, 4, T), dtype=M.dtype)
    for p in range(lo, hi):
        kk, n = p // nimg, n0 + p % nimg
        base = (n - n0) * T
        for j in range(6):
            m0, m1, m2 = M[j, kk, base:base + T], M[6 + j, kk, base:base + T], \
                M[12 + j, kk, base:base + T]
            m3, m4, m5 = M[18 + j, kk, base:base + T], M[24 + j, kk, base:base + T], \
                M[30 + j, kk, base:base + T]
            s0, s1, s2, s3 = t[0, j], t[1, j], t[2, j], t[3, j]
            _at_rows(T, m0, m1, m2, m3, m4, m5, s0, s1, s2, s3, c2, c4, c8)
        for a in range(4):
            m0, m1, m2, m3, m4, m5 = t[a, 0], t[a, 1], t[a, 2], t[a, 3], t[a, 4], t[a, 5]
            s0, s1, s2, s3 = o[a, 0], o[a, 1], o[a, 2], o[a, 3]
            _at_rows(T, m0, m1, m2, m3, m4, m5, s0, s1, s2, s3, c2, c4, c8)
        for ty in range(nty):
            yy0 = 4 * (ty0 + ty)
            for a in range(min(4, Ho - yy0)):
                row = y[n, kk, yy0 + a]
                for b in range(4):
                    ob = o[a, b, ty * tw:(ty + 1) * tw]
                    for tx in range((Wo - b + 3) // 4):
                        row[4 * tx + b] = ob[tx]


@njit(cache=True, nogil=True)
def input_transform(x, pt, pl, th, tw, V, k, lo, hi, n0, ty0, ty1):
    """V[6a+b, c, (n-n0)*T + (ty-ty0)*tw + tx] = (B^T d B)[a, b] for the 6x6 tile d at
    (4ty-pt, 4tx-pl), tile rows ty0 <= ty < ty1 (T = (ty1-ty0)*tw tiles per image), for the
    pairs p = c*nimg + (n-n0) in [lo, hi), where nimg = V.shape[2] // T images n0, n0+1, ...
    make the block (the whole batch: n0 = 0, ty0 = 0, ty1 = th). V is C-contiguous.

    ``k`` holds the constants (4, 5, 2) in x's dtype.
    """
    N, C, H, W = x.shape
    c4, c5, c2 = k[0], k[1], k[2]
    T = (ty1 - ty0) * tw
    nimg = V.shape[2] // T
    if T >= PAIR_TILES:
        _input_per_pair(x, pt, pl, th, tw, V, k, lo, hi, n0, ty0, ty1, nimg)
        return
    Vf = V.reshape(36, V.shape[1] * V.shape[2])
    Wb = 4 * tw + 2
    rows = 4 * (ty1 - ty0) + 2          # plane row r is input row r0 + r
    plane = np.zeros(rows * Wb, dtype=x.dtype)
    xp = plane.reshape(rows, Wb)
    r0 = 4 * ty0 - pt
    y_lo, y_hi = max(0, r0), min(H, r0 + rows)
    w = min(W, Wb - pl)
    idx = _tile_offsets(ty0, ty1, tw, Wb)
    P = max(1, CHUNK // T)
    D = np.empty((36, P * T), dtype=x.dtype)
    E = np.empty((36, P * T), dtype=x.dtype)
    for p0 in range(lo, hi, P):
        p1 = min(hi, p0 + P)
        L = (p1 - p0) * T
        for p in range(p0, p1):
            c, n = p // nimg, n0 + p % nimg
            for yy in range(y_lo, y_hi):
                xp[yy - r0, pl:pl + w] = x[n, c, yy, :w]
            off = (p - p0) * T
            for i in range(6):
                d0, d1, d2 = D[6 * i], D[6 * i + 1], D[6 * i + 2]
                d3, d4, d5 = D[6 * i + 3], D[6 * i + 4], D[6 * i + 5]
                for q in range(T):
                    e = idx[q] + i * Wb
                    d0[off + q], d1[off + q], d2[off + q] = plane[e], plane[e + 1], plane[e + 2]
                    d3[off + q], d4[off + q], d5[off + q] = plane[e + 3], plane[e + 4], plane[e + 5]
        for j in range(6):     # down the tile's columns: E[6a + j] = (B^T d)[a, j]
            d0, d1, d2, d3, d4, d5 = D[j], D[6 + j], D[12 + j], D[18 + j], D[24 + j], D[30 + j]
            e0, e1, e2, e3, e4, e5 = E[j], E[6 + j], E[12 + j], E[18 + j], E[24 + j], E[30 + j]
            _bt_rows(L, d0, d1, d2, d3, d4, d5, e0, e1, e2, e3, e4, e5, c4, c5, c2)
        b0 = p0 * T
        for a in range(6):
            f0, f1, f2 = E[6 * a], E[6 * a + 1], E[6 * a + 2]
            f3, f4, f5 = E[6 * a + 3], E[6 * a + 4], E[6 * a + 5]
            v0, v1, v2 = Vf[6 * a, b0:b0 + L], Vf[6 * a + 1, b0:b0 + L], Vf[6 * a + 2, b0:b0 + L]
            v3, v4, v5 = Vf[6 * a + 3, b0:b0 + L], Vf[6 * a + 4, b0:b0 + L], \
                Vf[6 * a + 5, b0:b0 + L]
            _bt_rows(L, f0, f1, f2, f3, f4, f5, v0, v1, v2, v3, v4, v5, c4, c5, c2)


@njit(cache=True, nogil=True)
def output_transform(M, th, tw, y, k, lo, hi, n0, ty0, ty1):
    """y[n, kk, 4ty+a, 4tx+b] = (A^T m A)[a, b] for m = M[:, kk, (n-n0)*T + (ty-ty0)*tw + tx] as
    6x6, cropped, for tile rows ty0 <= ty < ty1 and the pairs p = kk*nimg + (n-n0) in [lo, hi)
    (nimg = M.shape[2] // T, as in ``input_transform``). M is C-contiguous.

    ``k`` holds the constants (2, 4, 8) in M's dtype.
    """
    N, K, Ho, Wo = y.shape
    c2, c4, c8 = k[0], k[1], k[2]
    T = (ty1 - ty0) * tw
    nimg = M.shape[2] // T
    if T >= PAIR_TILES:
        _output_per_pair(M, th, tw, y, k, lo, hi, n0, ty0, ty1, nimg)
        return
    Mf = M.reshape(36, M.shape[1] * M.shape[2])
    Wb = 4 * tw
    rows = 4 * (ty1 - ty0)
    plane = np.empty(rows * Wb, dtype=M.dtype)
    yp = plane.reshape(rows, Wb)
    idx = _tile_offsets(ty0, ty1, tw, Wb)
    P = max(1, CHUNK // T)
    t = np.empty((24, P * T), dtype=M.dtype)
    o = np.empty((16, P * T), dtype=M.dtype)
    for p0 in range(lo, hi, P):
        p1 = min(hi, p0 + P)
        L = (p1 - p0) * T
        b0 = p0 * T
        for j in range(6):     # t[6a + j] = (A^T m)[a, j]
            m0, m1, m2 = Mf[j, b0:b0 + L], Mf[6 + j, b0:b0 + L], Mf[12 + j, b0:b0 + L]
            m3, m4, m5 = Mf[18 + j, b0:b0 + L], Mf[24 + j, b0:b0 + L], Mf[30 + j, b0:b0 + L]
            s0, s1, s2, s3 = t[j], t[6 + j], t[12 + j], t[18 + j]
            _at_rows(L, m0, m1, m2, m3, m4, m5, s0, s1, s2, s3, c2, c4, c8)
        for a in range(4):
            m0, m1, m2 = t[6 * a], t[6 * a + 1], t[6 * a + 2]
            m3, m4, m5 = t[6 * a + 3], t[6 * a + 4], t[6 * a + 5]
            s0, s1, s2, s3 = o[4 * a], o[4 * a + 1], o[4 * a + 2], o[4 * a + 3]
            _at_rows(L, m0, m1, m2, m3, m4, m5, s0, s1, s2, s3, c2, c4, c8)
        for p in range(p0, p1):
            kk, n = p // nimg, n0 + p % nimg
            off = (p - p0) * T
            for a in range(4):
                o0, o1, o2, o3 = o[4 * a], o[4 * a + 1], o[4 * a + 2], o[4 * a + 3]
                for q in range(T):
                    e = idx[q] + a * Wb
                    plane[e], plane[e + 1], plane[e + 2], plane[e + 3] = \
                        o0[off + q], o1[off + q], o2[off + q], o3[off + q]
            for r in range(min(rows, Ho - 4 * ty0)):
                y[n, kk, 4 * ty0 + r] = yp[r, :Wo]


@njit(cache=True, nogil=True)
def grad_output_transform(gy, th, tw, GY, k, lo, hi, n0):
    """GY[6a+b, kk, (n-n0)*th*tw + ty*tw + tx] = (A g A^T)[a, b] for the 4x4 tile g of gy at
    (4ty, 4tx), zero beyond gy's edge (the adjoint of ``output_transform``'s crop), for the pairs
    p = kk*nimg + (n-n0) in [lo, hi), where nimg = GY.shape[2] // (th*tw) images n0, n0+1, ...
    make the block. GY is C-contiguous.

    ``k`` holds the constants (2, 4, 8) in gy's dtype.
    """
    N, K, Ho, Wo = gy.shape
    c2, c4, c8 = k[0], k[1], k[2]
    T = th * tw
    nimg = GY.shape[2] // T
    Gf = GY.reshape(36, GY.shape[1] * GY.shape[2])
    Wb = 4 * tw
    plane = np.zeros(4 * th * Wb, dtype=gy.dtype)
    gp = plane.reshape(4 * th, Wb)
    idx = _tile_offsets(0, th, tw, Wb)
    P = max(1, CHUNK // T)
    D = np.empty((16, P * T), dtype=gy.dtype)
    E = np.empty((24, P * T), dtype=gy.dtype)
    for p0 in range(lo, hi, P):
        p1 = min(hi, p0 + P)
        L = (p1 - p0) * T
        for p in range(p0, p1):
            kk, n = p // nimg, n0 + p % nimg
            for yy in range(Ho):
                gp[yy, :Wo] = gy[n, kk, yy]
            off = (p - p0) * T
            for i in range(4):
                d0, d1, d2, d3 = D[4 * i], D[4 * i + 1], D[4 * i + 2], D[4 * i + 3]
                for q in range(T):
                    e = idx[q] + i * Wb
                    d0[off + q], d1[off + q], d2[off + q], d3[off + q] = \
                        plane[e], plane[e + 1], plane[e + 2], plane[e + 3]
        for j in range(4):     # E[4a + j] = (A g)[a, j]
            d0, d1, d2, d3 = D[j], D[4 + j], D[8 + j], D[12 + j]
            e0, e1, e2, e3, e4, e5 = E[j], E[4 + j], E[8 + j], E[12 + j], E[16 + j], E[20 + j]
            for q in range(L):
                g0, g1, g2, g3 = d0[q], d1[q], d2[q], d3[q]
                e0[q] = g0
                e1[q] = g0 + g1 + g2 + g3
                e2[q] = g0 - g1 + g2 - g3
                e3[q] = g0 + c2 * g1 + c4 * g2 + c8 * g3
                e4[q] = g0 - c2 * g1 + c4 * g2 - c8 * g3
                e5[q] = g3
        b0 = p0 * T
        for a in range(6):
            f0, f1, f2, f3 = E[4 * a], E[4 * a + 1], E[4 * a + 2], E[4 * a + 3]
            v0, v1, v2 = Gf[6 * a, b0:b0 + L], Gf[6 * a + 1, b0:b0 + L], Gf[6 * a + 2, b0:b0 + L]
            v3, v4, v5 = Gf[6 * a + 3, b0:b0 + L], Gf[6 * a + 4, b0:b0 + L], \
                Gf[6 * a + 5, b0:b0 + L]
            for q in range(L):
                g0, g1, g2, g3 = f0[q], f1[q], f2[q], f3[q]
                v0[q] = g0
                v1[q] = g0 + g1 + g2 + g3
                v2[q] = g0 - g1 + g2 - g3
                v3[q] = g0 + c2 * g1 + c4 * g2 + c8 * g3
                v4[q] = g0 - c2 * g1 + c4 * g2 - c8 * g3
                v5[q] = g3


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
