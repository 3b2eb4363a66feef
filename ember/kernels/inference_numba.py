"""Numba kernels of the inference plan (``ember.jit.plan``): im2col into a preallocated column
buffer and the fused epilogues that follow a convolution's or a linear layer's GEMM.

Imported lazily (never by ``import ember``); compiled once per dtype and cached on disk. Each
kernel is serial and releases the GIL; the GEMM between them runs on BLAS's threads.

- ``im2col(x, R, S, sh, sw, ph, pw, dh, dw, col)``: x (N, C, H, W) -> col (C*R*S, N, Ho, Wo),
  zeros where a tap falls in the padding; col's row order is the weight's (c, r, s) order, so
  ``w.reshape(K, -1) @ col.reshape(C*R*S, -1)`` is the convolution in (K, N, Ho*Wo) layout.
- ``conv_epilogue(z, b, res, y, has_b, has_res, relu)``: y[n, k, p] = act(z[k, n, p] + b[k] +
  res[n, k, p]) (bias, residual add and ReLU in one pass, into NCHW order).
- ``conv_pool_epilogue(z, b, y, has_b, relu, kh, kw, sh, sw)``: the same followed by a max pool
  without padding (every window inside the plane), written only at the pooled size.
- ``bias_act(y, b, has_b, relu)``: y += b, then ReLU, in place on a (M, K) GEMM result.

The arithmetic is eager's: the bias is added to the GEMM's sum, then the residual, then ReLU
(``max(v, 0)``, NaN propagating), and the max pool's first maximum wins, NaN propagating.
"""
import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def im2col(x, R, S, sh, sw, ph, pw, dh, dw, col):
    N, C, H, W = x.shape
    Ho, Wo = col.shape[2], col.shape[3]
    zero = x.dtype.type(0)
    for c in range(C):
        for r in range(R):
            for s in range(S):
                row = (c * R + r) * S + s
                # output columns whose input column q = ox*sw - pw + s*dw lies in [0, W)
                off = s * dw - pw
                lo = 0
                while lo < Wo and lo * sw + off < 0:
                    lo += 1
                hi = Wo
                while hi > lo and (hi - 1) * sw + off >= W:
                    hi -= 1
                for n in range(N):
                    for oy in range(Ho):
                        q = oy * sh - ph + r * dh
                        if q < 0 or q >= H:
                            for ox in range(Wo):
                                col[row, n, oy, ox] = zero
                            continue
                        for ox in range(lo):
                            col[row, n, oy, ox] = zero
                        if sw == 1:
                            for ox in range(lo, hi):
                                col[row, n, oy, ox] = x[n, c, q, ox + off]
                        else:
                            for ox in range(lo, hi):
                                col[row, n, oy, ox] = x[n, c, q, ox * sw + off]
                        for ox in range(hi, Wo):
                            col[row, n, oy, ox] = zero


@njit(cache=True, nogil=True)
def conv_epilogue(z, b, res, y, has_b, has_res, relu):
    K, N, P = z.shape
    zero = z.dtype.type(0)
    for n in range(N):
        for k in range(K):
            bk = b[k] if has_b else zero
            for p in range(P):
                v = z[k, n, p]
                if has_b:
                    v = v + bk
                if has_res:
                    v = v + res[n, k, p]
                if relu and v < zero:
                    v = zero
                y[n, k, p] = v


@njit(cache=True, nogil=True)
def conv_pool_epilogue(z, b, y, has_b, relu, kh, kw, sh, sw):
    K, N, Ho, Wo = z.shape
    Hp, Wp = y.shape[2], y.shape[3]
    zero = z.dtype.type(0)
    for n in range(N):
        for k in range(K):
            bk = b[k] if has_b else zero
            for i in range(Hp):
                for j in range(Wp):
                    best = zero
                    first = True
                    for a in range(kh):
                        for c in range(kw):
                            v = z[k, n, i * sh + a, j * sw + c]
                            if has_b:
                                v = v + bk
                            if relu and v < zero:
                                v = zero
                            if first or v > best or (v != v and best == best):
                                best = v
                                first = False
                    y[n, k, i, j] = best


@njit(cache=True, nogil=True)
def bias_act(y, b, has_b, relu):
    M, K = y.shape
    zero = y.dtype.type(0)
    for m in range(M):
        for k in range(K):
            v = y[m, k]
            if has_b:
                v = v + b[k]
            if relu and v < zero:
                v = zero
            y[m, k] = v
