"""Numba kernel of ``thin``: the stride-1 forward pass of layers with few multiply-adds per
output pixel (LeNet's first layer, C=1, K=6, 5x5: 150). Imported lazily, compiled once per dtype
and cached on disk."""
from numba import njit


@njit(cache=True, nogil=True)
def rows_forward(xp, w, offsets, acc, y, lo, hi):
    """y[n] (K, Ho, Wo) for images [lo, hi) of xp (N, C, plane): each plane zero-padded,
    flattened in rows of Wp = acc.shape[1] // Ho elements, with spare elements after it; w is
    (K, C, T) with the T taps at ``offsets`` into a plane; acc (K, Ho*Wp) is scratch.

    For every tap one axpy over the Ho*Wp contiguous outputs of a plane (Wp - Wo junk columns
    per row, dropped by the crop), so the inner loop vectorizes along the image rows whatever K
    is (the register-blocked ``direct`` kernel vectorizes along K: 6 of 16 lanes busy here)."""
    K, C, T = w.shape
    Ho, Wo = y.shape[2], y.shape[3]
    L = acc.shape[1]
    Wp = L // Ho
    for n in range(lo, hi):
        acc[:] = 0
        for k in range(K):
            a = acc[k]
            for c in range(C):
                plane = xp[n, c]
                for t in range(T):
                    wv = w[k, c, t]
                    # slices index from 0, so the loop vectorizes (no negative-index wraparound)
                    src = plane[offsets[t]:]
                    for i in range(L):
                        a[i] += wv * src[i]
        for k in range(K):
            a = acc[k]
            out = y[n, k]
            for i in range(Ho):
                row = a[i * Wp:]
                dst = out[i]
                for j in range(Wo):
                    dst[j] = row[j]
