"""Numba kernels of one LSTM or GRU time step's pointwise part, forward and backward (see
``rnn.lstm_layer``, ``rnn.lstm_layer_backward``, ``rnn.gru_step`` and ``rnn.gru_step_backward``).

Imported lazily (never by ``import ember``); each is compiled on the first step that needs it
(on the background compile thread, the NumPy step serving meanwhile) and cached on disk. The
NumPy step runs 10-20 array operations on (batch, hidden) slices, each a Python call; these do
a step's gates, cell state and output (forward) or the gates' and the state's gradients
(backward) in one call. The recurrent GEMM stays on BLAS, except for a batch of at most
``rnn.LAYER_KERNEL_MAX_BATCH`` rows, where ``forward_layer`` runs a layer's every step, its
recurrent products included, in one call.

Each row runs as a few simple loops over the hidden units, one output region each: LLVM
vectorises those, while one loop writing all six workspace regions and the output (seven
pointers that may alias) stays scalar (measured 158 against 27 us for a (20, 200) forward
step). The forward steps are float32 only: their exp and tanh are ``exp_f32`` / ``tanh_f32``
(vectorised straight-line float32, within 2 ulp); Numba's float64 ``np.exp`` calls the C
library's scalar function (a float64 step: 173 us against NumPy's 64), so float64 runs the
NumPy step. The backward steps are plain arithmetic, any float dtype. The LSTM kernels group
some products differently from the NumPy step (results may differ in the last bits); the GRU
backward step evaluates the NumPy step's expressions in its order (the same bits).
"""
import numpy as np
from numba import njit

from ember.kernels.runtime.nbhelpers import exp_f32, tanh_f32


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


@njit(cache=True, nogil=True, boundscheck=False, fastmath={"reassoc", "contract"})
def _recurrent_rows(h, w, gates):
    """gates = h @ w.T for a few rows ``h`` (B, H) and the weight ``w`` (G, H) as stored: one
    dot product per gate and row, its float32 sum reassociated so that LLVM vectorises it; each
    weight row is read once from L2 for all of ``h``'s rows (in L1)."""
    B, H = h.shape
    for j in range(w.shape[0]):
        wj = w[j]
        for b in range(B):
            hb = h[b]
            s = np.float32(0.0)
            for k in range(H):
                s += wj[k] * hb[k]
            gates[b, j] = s


@njit(cache=True, nogil=True, error_model="numpy", boundscheck=False)
def forward_layer(gx, h0, c0, w_hh, out, ws, reverse, gates):
    """A whole float32 LSTM layer direction of a few rows in one call: each step's recurrent
    product (``_recurrent_rows``) and ``forward_step``, from the last step to the first when
    ``reverse``; ``gates`` (B, 4H) is scratch. Writes ``out`` (T, B, H) and ``ws`` (T, B, 6H)
    as ``rnn.lstm_layer``'s step loop does."""
    T = gx.shape[0]
    H = h0.shape[1]
    for i in range(T):
        t = T - 1 - i if reverse else i
        if i == 0:
            _recurrent_rows(h0, w_hh, gates)
            forward_step(gates, gx[t], c0, 0, ws[t], out[t])
        else:
            p = t + 1 if reverse else t - 1
            _recurrent_rows(out[p], w_hh, gates)
            forward_step(gates, gx[t], ws[p], 5 * H, ws[t], out[t])


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


@njit(cache=True, nogil=True, error_model="numpy", boundscheck=False)
def gru_forward_step(gx, gh, hx, ws, hy):
    """One float32 GRU step from the input's ``gx`` (B, 3H, with b_ih) and the hidden
    projection ``gh`` (B, 3H, with b_hh): writes the workspace ``ws`` (B, 4H: sigmoid r,
    sigmoid z, tanh n, the hidden projection of n) and ``hy`` (B, H)."""
    B, H = hy.shape
    one = np.float32(1.0)
    for b in range(B):
        x_, g_, h_, w_, y_ = gx[b], gh[b], hx[b], ws[b], hy[b]
        for j in range(2 * H):
            w_[j] = one / (one + exp_f32(-(x_[j] + g_[j])))
        for j in range(H):
            w_[3 * H + j] = g_[2 * H + j]
        for j in range(H):      # n's pre-activation in hy: tanh reading ws while writing ws
            y_[j] = x_[2 * H + j] + w_[j] * g_[2 * H + j]    # stays scalar (33 us against 7)
        for j in range(H):
            w_[2 * H + j] = tanh_f32(y_[j])
        for j in range(H):
            n = w_[2 * H + j]
            y_[j] = n + w_[H + j] * (h_[j] - n)


@njit(cache=True, nogil=True, error_model="numpy", boundscheck=False)
def gru_backward_step(dh, ws, hx, dgx, dgh, dhz):
    """The pointwise part of one GRU step's gradients from its workspace ``ws`` (B, 4H): writes
    dgx (B, 3H) the gradient of the input gates, dgh (B, 3H) that of the hidden projection, and
    dhz = dh * z (B, H), the direct part of the gradient of hx."""
    B, H = dh.shape
    one = ws.dtype.type(1.0)
    for b in range(B):
        d_, w_, h_, x_, g_, z_ = dh[b], ws[b], hx[b], dgx[b], dgh[b], dhz[b]
        for j in range(H):
            z, n = w_[H + j], w_[2 * H + j]
            dn = d_[j] * (one - z) * (one - n * n)
            x_[2 * H + j] = dn
            g_[2 * H + j] = dn * w_[j]
        for j in range(H):
            r, dn = w_[j], x_[2 * H + j]
            dr = dn * w_[3 * H + j] * r * (one - r)
            x_[j] = dr
            g_[j] = dr
        for j in range(H):
            z, n = w_[H + j], w_[2 * H + j]
            dz = d_[j] * (h_[j] - n) * z * (one - z)
            x_[H + j] = dz
            g_[H + j] = dz
            z_[j] = d_[j] * z
