"""Numba kernels of one LSTM time step's pointwise part, forward and backward (see
``rnn.lstm_layer`` and ``rnn.lstm_layer_backward``).

Imported lazily (never by ``import ember``); compiled on the first LSTM layer that runs (on the
background compile thread, the NumPy step serving meanwhile) and cached on disk. The NumPy step
runs 10-20 array operations on (batch, hidden) slices, each a Python call; these do a step's
gates, cell state and output (forward) or the gates' and the cell state's gradients (backward)
in one call. The recurrent GEMM stays on BLAS.

Each row runs as a few simple loops over the hidden units, one output region each: LLVM
vectorises those, while one loop writing all six workspace regions and the output (seven
pointers that may alias) stays scalar (measured 158 against 27 us for a (20, 200) forward
step). The forward step is float32 only: its exp and tanh are ``exp_f32`` / ``tanh_f32``
(vectorised straight-line float32, within 2 ulp); Numba's float64 ``np.exp`` calls the C
library's scalar function (a float64 step: 173 us against NumPy's 64), so float64 runs the
NumPy step. The backward step is plain arithmetic, any float dtype. Both evaluate the NumPy
path's formulas; products are grouped differently, so results may differ in the last bits.
"""
import numpy as np
from numba import njit

from ember.kernels.pointwise._nbhelpers import exp_f32, tanh_f32


@njit(cache=True, nogil=True, error_model="numpy", boundscheck=False)
def forward_step(gates, gx, c_src, c_col, a, h):
    """One float32 step from the recurrent projection ``gates`` (B, 4H) and the input's ``gx``
    (B, 4H, with both biases): the previous cell state is ``c_src[:, c_col:c_col + H]``; writes
    the workspace row ``a`` (B, 6H: sigmoid i, sigmoid f, tanh g, sigmoid o, tanh(c), c) and
    the output ``h`` (B, H)."""
    B, H = h.shape
    one = np.float32(1.0)
    for b in range(B):
        g_, x_, a_, h_ = gates[b], gx[b], a[b], h[b]
        c_ = c_src[b, c_col:c_col + H]
        for j in range(2 * H):
            a_[j] = one / (one + exp_f32(-(g_[j] + x_[j])))
        for j in range(2 * H, 3 * H):
            a_[j] = tanh_f32(g_[j] + x_[j])
        for j in range(3 * H, 4 * H):
            a_[j] = one / (one + exp_f32(-(g_[j] + x_[j])))
        for j in range(H):
            a_[5 * H + j] = a_[H + j] * c_[j] + a_[j] * a_[2 * H + j]
        for j in range(H):
            a_[4 * H + j] = tanh_f32(a_[5 * H + j])
        for j in range(H):
            h_[j] = a_[3 * H + j] * a_[4 * H + j]


@njit(cache=True, nogil=True, error_model="numpy", boundscheck=False)
def backward_step(dh, d_out, dc, a, c_src, c_col, dg):
    """Gradients of one step from its workspace ``a`` (B, 6H): dh (B, H) the gradient reaching
    h_t from step t+1, d_out (B, H) the output's, dc (B, H) the cell state's (replaced by the
    gradient of c_{t-1}); the previous cell state is ``c_src[:, c_col:c_col + H]``; writes dg
    (B, 4H), the gradient of the gates' pre-activations."""
    B, H = dh.shape
    one = a.dtype.type(1.0)
    for b in range(B):
        dh_, do_, dc_, a_, g_ = dh[b], d_out[b], dc[b], a[b], dg[b]
        c_ = c_src[b, c_col:c_col + H]
        for j in range(H):      # d = dh + d_out; dg's g block holds dct until the last loop
            d = dh_[j] + do_[j]
            o, tc = a_[3 * H + j], a_[4 * H + j]
            g_[3 * H + j] = d * tc * o * (one - o)
            g_[2 * H + j] = d * o * (one - tc * tc) + dc_[j]
        for j in range(H):
            dct, i, f = g_[2 * H + j], a_[j], a_[H + j]
            g_[j] = dct * a_[2 * H + j] * i * (one - i)
            g_[H + j] = dct * c_[j] * f * (one - f)
            dc_[j] = dct * f
        for j in range(H):
            g = a_[2 * H + j]
            g_[2 * H + j] = g_[2 * H + j] * a_[j] * (one - g * g)
