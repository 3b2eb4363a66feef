"""Kernels of the recurrent layers: the fused LSTM / GRU time steps and whole LSTM layers,
forward and backward.

ndarrays in, ndarrays out; no Tensor, autograd or tracing here.
"""
import numpy as np

from ember.kernels import linalg
from ember.kernels.errors import KernelError
from ember.kernels.runtime.threads import FREE, LIMITED, blas_mode


def _sigmoid(a):
    out = np.negative(a)
    np.exp(out, out=out)
    out += 1.0
    np.reciprocal(out, out=out)
    return out


def lstm_step(gx, hx, cx, w_hh):
    """One LSTM time step (torch gate order i, f, g, o).

    ``gx`` (B, 4H) is the input projection plus both biases; returns (hy, cy, workspace) where the
    workspace (B, 5H) holds the activated gates and tanh(cy) for the backward pass.
    Raises KernelError for inconsistent shapes.
    """
    H = cx.shape[-1]       # hx is (B, H), or (B, proj_size) for a projected LSTM
    if gx.shape[-1] != 4 * H or w_hh.shape != (4 * H, hx.shape[-1]):
        raise KernelError(f"lstm_step: gates {list(gx.shape)}, hidden {list(hx.shape)}, cell "
                          f"{list(cx.shape)} and weight_hh {list(w_hh.shape)} do not fit "
                          f"(expected 4*hidden gates)")
    gates = gx + linalg.linear(hx, w_hh)
    ws = np.empty(gates.shape[:-1] + (5 * H,), gates.dtype)
    ws[..., :2 * H] = _sigmoid(gates[..., :2 * H])
    np.tanh(gates[..., 2 * H:3 * H], out=ws[..., 2 * H:3 * H])
    ws[..., 3 * H:4 * H] = _sigmoid(gates[..., 3 * H:])
    i, f, g, o = ws[..., :H], ws[..., H:2 * H], ws[..., 2 * H:3 * H], ws[..., 3 * H:4 * H]
    cy = f * cx
    cy += i * g
    tc = np.tanh(cy, out=ws[..., 4 * H:])
    hy = o * tc
    return hy, cy, ws


def lstm_step_backward(dh, dc, ws, hx, cx, w_hh):
    """Gradients (d_gx, d_hx, d_cx, d_w_hh) of ``lstm_step`` from its workspace."""
    H = ws.shape[-1] // 5
    i, f, g, o, tc = (ws[..., k * H:(k + 1) * H] for k in range(5))
    dct = dh * o * (1.0 - tc * tc)
    dct += dc
    dgates = np.empty(ws.shape[:-1] + (4 * H,), ws.dtype)
    dgates[..., :H] = dct * g * i * (1.0 - i)
    dgates[..., H:2 * H] = dct * cx * f * (1.0 - f)
    dgates[..., 2 * H:3 * H] = dct * i * (1.0 - g * g)
    dgates[..., 3 * H:] = dh * tc * o * (1.0 - o)
    return dgates, dgates @ w_hh, dct * f, dgates.T @ hx


def gru_step(gx, hx, w_hh, b_hh):
    """One GRU time step (torch gate order r, z, n).

    ``gx`` (B, 3H) is the input projection plus b_ih; returns (hy, workspace) where the workspace
    (B, 4H) holds r, z, n and the hidden projection of the n gate.
    Raises KernelError for inconsistent shapes.
    """
    H = hx.shape[-1]
    if gx.shape[-1] != 3 * H or w_hh.shape != (3 * H, H):
        raise KernelError(f"gru_step: gates {list(gx.shape)}, hidden {list(hx.shape)} and "
                          f"weight_hh {list(w_hh.shape)} do not fit (expected 3*hidden gates)")
    gh = linalg.linear(hx, w_hh)
    if b_hh is not None:
        gh += b_hh
    ws = np.empty(gx.shape[:-1] + (4 * H,), gx.dtype)
    if gx.ndim == 2 and gx.dtype == np.float32 and gh.dtype == gx.dtype and len(gx):
        gx, hx = _kernel_array(gx), _kernel_array(hx)    # (float64: NumPy's exp / tanh)
        hy = np.empty(hx.shape, gx.dtype)
        step = _step_kernel("gru_forward_step", gx, gh, hx, ws, hy)
        if step is not None:
            step(gx, gh, hx, ws, hy)
            return hy, ws
    with np.errstate(over="ignore"):     # exp(-x) of a saturated gate: sigmoid 0, as torch
        ws[..., :2 * H] = _sigmoid(gx[..., :2 * H] + gh[..., :2 * H])
    r, z = ws[..., :H], ws[..., H:2 * H]
    ws[..., 3 * H:] = gh[..., 2 * H:]
    n = np.tanh(gx[..., 2 * H:] + r * gh[..., 2 * H:], out=ws[..., 2 * H:3 * H])
    hy = n + z * (hx - n)
    return hy, ws


def gru_step_backward(dh, ws, hx, w_hh):
    """Gradients (d_gx, d_hx, d_w_hh, d_b_hh) of ``gru_step`` from its workspace."""
    H = hx.shape[-1]
    if ws.ndim == 2 and len(ws) and dh.dtype == ws.dtype and hx.dtype == ws.dtype:
        dhk, wsk, hxk = _kernel_array(dh), _kernel_array(ws), _kernel_array(hx)
        dgx = np.empty(ws.shape[:-1] + (3 * H,), ws.dtype)
        dgh, dhz = np.empty_like(dgx), np.empty_like(dhk)
        step = _step_kernel("gru_backward_step", dhk, wsk, hxk, dgx, dgh, dhz)
        if step is not None:
            step(dhk, wsk, hxk, dgx, dgh, dhz)
            dhx = dgh @ w_hh
            dhx += dhz                          # (dh * z + dgh @ w_hh, as below)
            return dgx, dhx, dgh.T @ hx, dgh.sum(axis=0)
    r, z, n, ghn = (ws[..., k * H:(k + 1) * H] for k in range(4))
    dn = dh * (1.0 - z) * (1.0 - n * n)
    dgx = np.empty(ws.shape[:-1] + (3 * H,), ws.dtype)
    dgx[..., :H] = dn * ghn * r * (1.0 - r)
    dgx[..., H:2 * H] = dh * (hx - n) * z * (1.0 - z)
    dgx[..., 2 * H:] = dn
    dgh = dgx.copy()
    dgh[..., 2 * H:] *= r
    return dgx, dh * z + dgh @ w_hh, dgh.T @ hx, dgh.sum(axis=0)


USE_NUMBA = True


def _kernels():
    """The Numba module (``rnn_numba``), or None when Numba is unavailable, disabled, or its
    first import is still running on the compile thread (NumPy meanwhile)."""
    if not USE_NUMBA:
        return None
    from ember.kernels.runtime.compiler import kernel_module
    return kernel_module("ember.kernels.rnn_numba")


def _step_kernel(name, *args):
    """Kernel ``name`` of ``rnn_numba`` for these (C-contiguous, one-dtype) arrays, or None: the
    caller runs its NumPy step. The kernel's exp / tanh and NumPy's differ in the last bits, so
    the choice is made per shape by ``compiler.tier``: the kernel when it can run, else NumPy
    (not compiled yet: queued on the compile thread under "background", and the kernel once it
    is; or Numba unavailable); under ``use_deterministic_algorithms`` the first choice is kept
    for the process. ``USE_NUMBA = False`` always runs NumPy."""
    arrays = [x for x in args if isinstance(x, np.ndarray)]
    dt = arrays[0].dtype
    if not USE_NUMBA or dt.kind != "f" or dt.itemsize < 4 or any(x.dtype != dt for x in arrays):
        return None
    from ember.kernels.runtime import compiler
    key = ("rnn", name, dt.str) + tuple(x.shape for x in arrays)
    return compiler.tier(key, lambda: _ready_kernel(name, args))


def _ready_kernel(name, args):
    nb = _kernels()
    if nb is None:
        return None
    from ember.kernels.runtime import compiler
    kernel = getattr(nb, name)
    return kernel if compiler.ready(kernel, compiler.signature(*args)) else None


def lstm_layer(gx, h0, c0, w_hh, reverse=False):
    """A whole LSTM layer direction over time: ``gx`` (T, B, 4H) input projections (with both
    biases), initial states (B, H). Returns (out (T, B, H), h_T, c_T, workspace (T, B, 6H) of
    activated gates, tanh(c_t) and c_t). ``reverse`` runs from the last step to the first.
    Raises KernelError for inconsistent shapes.
    """
    T = gx.shape[0]
    H = h0.shape[-1]
    if gx.ndim != 3 or gx.shape[-1] != 4 * H or w_hh.shape != (4 * H, H):
        raise KernelError(f"lstm_layer: gates {list(gx.shape)}, hidden {list(h0.shape)} and "
                          f"weight_hh {list(w_hh.shape)} do not fit (expected (T, B, 4*hidden))")
    out = np.empty(gx.shape[:2] + (H,), gx.dtype)
    ws = np.empty(gx.shape[:2] + (6 * H,), gx.dtype)
    # the per-step (B, H) @ (H, 4H) GEMMs run on one BLAS thread (LIMITED): on an idle 2-core
    # machine two threads are faster (word-LM layer forward 3.2 vs 3.8 ms), but when another
    # process holds a core each step waits for the second BLAS thread to be scheduled:
    # measured 1.5-3x slower, and runs of 540 ms instead of 8 (35 steps)
    with blas_mode(LIMITED):
        _lstm_layer_loop(gx, h0, c0, w_hh, out, ws, reverse)
    if T == 0:
        return out, h0.copy(), c0.copy(), ws
    last = 0 if reverse else T - 1
    return out, out[last].copy(), ws[last, :, 5 * H:].copy(), ws


def _kernel_array(x):
    """``x`` as a C-contiguous, writeable array (a copy when it is not), so that a step kernel
    always sees the argument types it was compiled for."""
    if x.flags.c_contiguous and x.flags.writeable:
        return x
    return np.array(x, order="C", copy=True)


def _hidden_product(h, w_hh, out):
    """``h @ w_hh.T`` into ``out`` (a new array when None), reading the weight (4H, H) as it is
    stored: BLAS's transposed product, never a transposed copy (one per call cost more than the
    steps: 38 ms for hidden size 1024). At a batch of one this is also faster than
    ``linalg.linear``'s matrix-vector kernel, whose per-call work a step pays 35 times a
    sequence (one thread-count sync, the parts split): (1, 200) x (800, 200) 17.7 against
    29.6 us, hidden 1024 277 against 338 us, quiet 2-core AMD EPYC."""
    return np.matmul(h, w_hh.T, out=out)


# A float32 layer of at most this many rows runs in one Numba call (``rnn_numba.forward_layer``:
# every step's recurrent product as dot products in the kernel, no Python between steps), where
# more rows take BLAS's product per step and the step kernel; a layer of one row only while its
# weight_hh fits LAYER_KERNEL_ONE_ROW_MAX_BYTES (a core's L2). AMD EPYC (Zen 4), 35 steps, us
# per layer, min of three medians, per-step loop / one call: hidden 200, rows 1 390-443 /
# 319-398, 2 3289-3307 / 712-719 (OpenBLAS's product of two rows packs the weight each step), 4
# 3521-3638 / 1458-1606, 8 4128-4398 / 2749-2896, 20 6245 / 8203; hidden 650, rows 1 3503-3712 /
# 3777-3842, 2 34186 / 7395, 8 41726 / 29285, 20 57319 / 76183.
LAYER_KERNEL_MAX_BATCH = 8
LAYER_KERNEL_ONE_ROW_MAX_BYTES = 1 << 20


def _lstm_layer_loop(gx, h0, c0, w_hh, out, ws, reverse):
    T = gx.shape[0]
    H = h0.shape[-1]
    order = range(T - 1, -1, -1) if reverse else range(T)
    step = None
    if T and gx.dtype == h0.dtype == w_hh.dtype == np.float32:   # (float64: NumPy's exp,
        gx = _kernel_array(gx)                                  # tanh; see rnn_numba)
        c0 = _kernel_array(c0)
        gates = np.empty(gx.shape[1:], gx.dtype)
        if gx.shape[1] <= LAYER_KERNEL_MAX_BATCH and (
                gx.shape[1] > 1 or w_hh.nbytes <= LAYER_KERNEL_ONE_ROW_MAX_BYTES):
            h0, w_hh = _kernel_array(h0), _kernel_array(w_hh)
            layer = _step_kernel("forward_layer", gx, h0, c0, w_hh, out, ws, bool(reverse),
                                 gates)
            if layer is not None:
                layer(gx, h0, c0, w_hh, out, ws, bool(reverse), gates)
                return
        step = _step_kernel("forward_step", gates, gx[0], c0, 0, ws[0], out[0])
    if step is not None:
        h, c_src, c_col = h0, c0, 0
        for t in order:
            step(_hidden_product(h, w_hh, gates), gx[t], c_src, c_col, ws[t], out[t])
            h, c_src, c_col = out[t], ws[t], 5 * H
        return
    with np.errstate(over="ignore"):     # exp(-x) of a saturated gate: sigmoid 0, as torch
        _lstm_numpy_steps(gx, h0, c0, w_hh, out, ws, order)


def _lstm_numpy_steps(gx, h0, c0, w_hh, out, ws, order):
    H = h0.shape[-1]
    h, c = h0, c0
    for t in order:
        gates = _hidden_product(h, w_hh, None)   # (measured: faster than writing the slices of
        gates += gx[t]                            # ws in place)
        a = ws[t]
        a[:, :2 * H] = _sigmoid(gates[:, :2 * H])
        np.tanh(gates[:, 2 * H:3 * H], out=a[:, 2 * H:3 * H])
        a[:, 3 * H:4 * H] = _sigmoid(gates[:, 3 * H:])
        cn = a[:, 5 * H:]
        np.multiply(a[:, H:2 * H], c, out=cn)
        cn += a[:, :H] * a[:, 2 * H:3 * H]
        np.tanh(cn, out=a[:, 4 * H:5 * H])
        np.multiply(a[:, 3 * H:4 * H], a[:, 4 * H:5 * H], out=out[t])
        h, c = out[t], cn


def lstm_layer_backward(d_out, d_hT, d_cT, ws, out, h0, c0, w_hh, reverse=False):
    """Gradients (d_gx, d_h0, d_c0, d_w_hh) of ``lstm_layer`` from its outputs and workspace;
    the recurrent weight gradient is one GEMM over all steps."""
    T = ws.shape[0]
    H = h0.shape[-1]
    dt = ws.dtype
    dgx = np.empty(ws.shape[:2] + (4 * H,), dt)
    dh = np.array(d_hT, dtype=np.result_type(d_hT, dt), copy=True)
    dc = np.array(d_cT, dtype=np.result_type(d_cT, dt), copy=True)
    if reverse:
        h_prev = np.concatenate([out[1:], h0[None]], 0)
    else:
        h_prev = np.concatenate([h0[None], out[:-1]], 0)
    with blas_mode(LIMITED):    # small per-step GEMMs: one BLAS thread (see lstm_layer)
        _lstm_backward_loop(d_out, ws, c0, w_hh, dgx, dh, dc, reverse)
    with blas_mode(FREE):       # one (4H, T*B) @ (T*B, H) GEMM: all threads
        d_w = dgx.reshape(-1, 4 * H).T @ h_prev.reshape(-1, H)
    return dgx, dh, dc, d_w


def _lstm_backward_loop(d_out, ws, c0, w_hh, dgx, dh, dc, reverse):
    """Backwards through time, in place: fills ``dgx``; ``dh`` / ``dc`` end as d_h0 / d_c0."""
    T = ws.shape[0]
    H = dh.shape[-1]
    c0k = _kernel_array(c0)
    d_outk = _kernel_array(d_out)     # (a broadcast gradient, e.g. of a sum: copied)
    step = (_step_kernel("backward_step", dh, d_outk[0], dc, ws[0], c0k, 0, dgx[0])
            if T and ws.flags.c_contiguous else None)
    if step is not None:
        for t in (range(T) if reverse else range(T - 1, -1, -1)):
            prev = t + 1 if reverse else t - 1
            if prev < 0 or prev >= T:
                step(dh, d_outk[t], dc, ws[t], c0k, 0, dgx[t])
            else:
                step(dh, d_outk[t], dc, ws[t], ws[prev], 5 * H, dgx[t])
            np.matmul(dgx[t], w_hh, out=dh)
        return
    dct = np.empty_like(dh)
    tmp = np.empty_like(dh)
    for t in (range(T) if reverse else range(T - 1, -1, -1)):
        prev = t + 1 if reverse else t - 1
        c_prev = c0 if prev < 0 or prev >= T else ws[prev, :, 5 * H:]
        a = ws[t]
        i, f, g, o, tc = (a[:, k * H:(k + 1) * H] for k in range(5))
        dh += d_out[t]
        np.multiply(tc, tc, out=dct)              # dct = dh * o * (1 - tc^2) + dc
        np.subtract(1.0, dct, out=dct)
        dct *= o
        dct *= dh
        dct += dc
        dg = dgx[t]
        di, df, dgg, do = (dg[:, k * H:(k + 1) * H] for k in range(4))
        np.subtract(1.0, a[:, :2 * H], out=dg[:, :2 * H])      # i (1 - i), f (1 - f)
        dg[:, :2 * H] *= a[:, :2 * H]
        np.multiply(dct, g, out=tmp)
        di *= tmp
        np.multiply(dct, c_prev, out=tmp)
        df *= tmp
        np.multiply(g, g, out=dgg)                # dct * i * (1 - g^2)
        np.subtract(1.0, dgg, out=dgg)
        dgg *= i
        dgg *= dct
        np.subtract(1.0, o, out=do)               # dh * tc * o * (1 - o)
        do *= o
        do *= tc
        do *= dh
        np.matmul(dg, w_hh, out=dh)
        np.multiply(dct, f, out=dc)
