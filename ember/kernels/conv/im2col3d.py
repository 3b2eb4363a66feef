"""3-d convolution by im2col, the one algorithm of ``selector.run_3d``: a strided view of the padded
input (one window per output position) contracted with the weight by BLAS (``np.tensordot``), one
contraction per group; the input gradient scatters the column gradient back one kernel tap at a
time (strided slice adds, no per-element loop). Arrays are (N, C, D, H, W); ``s``, ``d`` are 3
ints, ``p`` three (low, high) pairs, already checked by ``conv3d``.
"""
import numpy as np
from numpy.lib.stride_tricks import as_strided

ND = 3


def _padded(x, p):
    if not any(lo or hi for lo, hi in p):
        return x
    return np.pad(x, ((0, 0), (0, 0)) + tuple(p))


def _cols(xp, k, s, d, out):
    """(N, C, *out, *k) window view of the padded input."""
    n, c = xp.shape[:2]
    st = xp.strides
    return as_strided(xp, (n, c) + tuple(out) + tuple(k),
                      st[:2] + tuple(st[2 + i] * s[i] for i in range(ND))
                      + tuple(st[2 + i] * d[i] for i in range(ND)), writeable=False)


def forward(x, w, s, p, d, g, out):
    """y (N, K, *out) = sum over (c, taps) of the windows of x (N, C, ...) * w (K, C/g, *k)."""
    cols = _cols(_padded(x, p), w.shape[2:], s, d, out)
    n, c = cols.shape[:2]
    cg, kg = c // g, w.shape[0] // g
    red = [1] + list(range(2 + ND, 2 + 2 * ND))
    parts = [np.tensordot(cols[:, i * cg:(i + 1) * cg], w[i * kg:(i + 1) * kg],
                          axes=(red, [1] + list(range(2, 2 + ND)))) for i in range(g)]
    y = parts[0] if g == 1 else np.concatenate(parts, axis=-1)
    return np.ascontiguousarray(np.moveaxis(y, -1, 1))


def input_grad(gy, w, in_shape, s, p, d, g):
    """Adjoint of ``forward``: gx (in_shape) from gy (N, K, *out), w (K, C/g, *k)."""
    n, kk = gy.shape[:2]
    out, k = gy.shape[2:], w.shape[2:]
    c = in_shape[1]
    cg, kg = c // g, kk // g
    # column gradient (N, *out, C, *k)
    parts = [np.tensordot(gy[:, i * kg:(i + 1) * kg], w[i * kg:(i + 1) * kg], axes=([1], [0]))
             for i in range(g)]
    gc = parts[0] if g == 1 else np.concatenate(parts, axis=1 + ND)
    padded = tuple(in_shape[2 + i] + p[i][0] + p[i][1] for i in range(ND))
    gx = np.zeros((n, c) + padded, gy.dtype)
    gc = np.moveaxis(gc, 1 + ND, 1)  # (N, C, *out, *k)
    for tap in np.ndindex(*k):
        sl = tuple(slice(tap[i] * d[i], tap[i] * d[i] + s[i] * (out[i] - 1) + 1, s[i])
                   for i in range(ND))
        gx[(slice(None), slice(None)) + sl] += gc[(Ellipsis,) + tap]
    crop = tuple(slice(p[i][0], p[i][0] + in_shape[2 + i]) for i in range(ND))
    return np.ascontiguousarray(gx[(slice(None), slice(None)) + crop])


def weight_grad(gy, x, w_shape, s, p, d, g):
    """gw (K, C/g, *k) = sum over (n, out) of gy (N, K, *out) * the windows of x (N, C, ...)."""
    k = tuple(w_shape[2:])
    out = gy.shape[2:]
    cols = _cols(_padded(x, p), k, s, d, out)
    kk, c = gy.shape[1], x.shape[1]
    cg, kg = c // g, kk // g
    red = [0] + list(range(2, 2 + ND))
    parts = [np.tensordot(gy[:, i * kg:(i + 1) * kg], cols[:, i * cg:(i + 1) * cg],
                          axes=(red, red)) for i in range(g)]
    return np.ascontiguousarray(parts[0] if g == 1 else np.concatenate(parts, axis=0))
