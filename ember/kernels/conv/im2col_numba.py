"""Numba kernels of the col2im that the input gradient runs after its GEMM: ``add_runs`` for
the stride-1 rows path (``im2col._input_grad_rows``), ``add_strided`` for other strides
(``im2col.col2im``); and ``flip_transpose``, the weight of the stride-1 input gradient run as a
forward pass (``grad_as_forward.flipped_transposed``).

Imported lazily (never by ``import ember``), compiled once per dtype and cached on disk. One
plane at a time: the plane's padded accumulator (a few KiB, in L1) is zeroed, every tap's run
of ``Ho*Wp`` contiguous products is added at its offset, and the crop is written into the
gradient. The NumPy path makes R*S passes over the whole sub-batch's accumulator instead (LeNet
conv2's input gradient, 25 taps over (384, 200) planes: 1.0 ms of adds against 0.2 ms here).
"""
import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def add_runs(taps, offsets, Wp, pt, pl, acc, out):
    """out (P, H, W) = crop at (pt, pl) of sum over t of taps[p, t] (P, T, Lp) placed at
    ``offsets[t]`` of each flattened padded plane (rows of Wp); acc is a scratch plane of at
    least ``max(offsets) + Lp`` elements."""
    P, T, Lp = taps.shape
    H, W = out.shape[1], out.shape[2]
    for p in range(P):
        acc[:] = 0
        for t in range(T):
            # slices, so the inner loop indexes from 0 and vectorizes (``acc[off + i]`` would
            # keep Numba's negative-index wraparound per element: 3.5x slower)
            run = acc[offsets[t]:offsets[t] + Lp]
            src = taps[p, t]
            for i in range(Lp):
                run[i] += src[i]
        for h in range(H):
            row = acc[(pt + h) * Wp + pl:]
            dst = out[p, h]
            for w in range(W):
                dst[w] = row[w]



@njit(cache=True, nogil=True)
def add_strided(gcols, by_channel, sh, sw, dh, dw, Wp, pt, pl, acc, out):
    """out (n, C, H, W) = crop at (pt, pl) of the col2im of the columns ``gcols``: (n*C, R, S, 1,
    Ho, Wo) per image, or (C, R, S, n, Ho, Wo) when ``by_channel``. Tap (r, s)'s (Ho, Wo)
    products are added at rows r*dh + i*sh, columns s*dw + j*sw of the plane's padded
    accumulator ``acc`` (rows of Wp, at least Hp*Wp elements), taps in order, as
    ``im2col.col2im``'s slice adds."""
    R, S, Ho, Wo = gcols.shape[1], gcols.shape[2], gcols.shape[4], gcols.shape[5]
    n, C, H, W = out.shape
    for q in range(n * C):
        m, c = q // C, q % C
        a, b = (c, m) if by_channel else (q, 0)
        acc[:] = 0
        for r in range(R):
            for s in range(S):
                for i in range(Ho):
                    row = acc[(r * dh + i * sh) * Wp + s * dw:]
                    src = gcols[a, r, s, b, i]
                    for j in range(Wo):
                        row[j * sw] += src[j]
        for h in range(H):
            row = acc[(pt + h) * Wp + pl:]
            dst = out[m, c, h]
            for w in range(W):
                dst[w] = row[w]


FLIP_BLOCK = 32


@njit(cache=True, nogil=True)
def flip_transpose(w, out):
    """out[g, c, k, t] = w[g, k, c, T-1-t] for w (groups, K/g, C/g, T) and out (groups, C/g, K/g,
    T): the taps reversed (R and S flipped) and each group's (K/g, C/g) transposed, in blocks of
    FLIP_BLOCK x FLIP_BLOCK filters so both sides stay in cache. NumPy's copy of the transposed,
    reversed view moves 9-element runs with negative strides: 512x512 3x3 7.2 ms against 2.7."""
    G, Kg, Cg, T = w.shape
    for g in range(G):
        for k0 in range(0, Kg, FLIP_BLOCK):
            k1 = min(Kg, k0 + FLIP_BLOCK)
            for c0 in range(0, Cg, FLIP_BLOCK):
                for c in range(c0, min(Cg, c0 + FLIP_BLOCK)):
                    for k in range(k0, k1):
                        src, dst = w[g, k, c], out[g, c, k]
                        for t in range(T):
                            dst[t] = src[T - 1 - t]
