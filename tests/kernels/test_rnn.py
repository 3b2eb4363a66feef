"""Recurrent kernels (ember.kernels.rnn): the whole-layer LSTM kernels (preallocated buffers, the
Numba backward step of rnn_numba and the NumPy steps, one weight-gradient GEMM) against the
per-step kernels."""
import numpy as np
import pytest

from ember.kernels import rnn

rng = np.random.default_rng(0)


def _reference(gx, h0, c0, w, d_out, d_h, d_c, reverse):
    """The layer as a loop of lstm_step / lstm_step_backward."""
    T = gx.shape[0]
    order = list(range(T - 1, -1, -1)) if reverse else list(range(T))
    h, c, saved, outs = h0, c0, {}, [None] * T
    for t in order:
        hy, cy, ws = rnn.lstm_step(gx[t], h, c, w)
        saved[t] = (ws, h, c)
        outs[t], h, c = hy, hy, cy
    dgx, dw = [None] * T, np.zeros_like(w)
    for t in reversed(order):
        ws, hp, cp = saved[t]
        dg, d_h, d_c, dwt = rnn.lstm_step_backward(d_h + d_out[t], d_c, ws, hp, cp, w)
        dgx[t], dw = dg, dw + dwt
    return np.stack(outs), h, c, np.stack(dgx), d_h, d_c, dw


@pytest.mark.parametrize("use_numba", [True, False])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 2e-5)])
def test_lstm_layer_forward_backward_equal_the_step_kernels(reverse, dtype, tol, use_numba,
                                                           monkeypatch):
    if use_numba:
        from ember.kernels.pointwise import has_compiler
        from ember.kernels.runtime import compiler
        if not has_compiler():
            pytest.skip("numba not importable")
        monkeypatch.setattr(compiler, "compile_mode", lambda: "sync")
    else:
        monkeypatch.setattr(rnn, "USE_NUMBA", False)
    calls = []
    real = rnn._step_kernel
    monkeypatch.setattr(rnn, "_step_kernel",
                        lambda *a: calls.append((a[0], real(*a))) or calls[-1][1])
    T, B, H = 7, 3, 5
    gx = rng.standard_normal((T, B, 4 * H)).astype(dtype)
    h0, c0 = (rng.standard_normal((B, H)).astype(dtype) for _ in range(2))
    w = (rng.standard_normal((4 * H, H)) * 0.5).astype(dtype)
    d_out = rng.standard_normal((T, B, H)).astype(dtype)
    d_h, d_c = (rng.standard_normal((B, H)).astype(dtype) for _ in range(2))
    out, hT, cT, ws = rnn.lstm_layer(gx, h0, c0, w, reverse)
    r_out, r_h, r_c, r_dgx, r_dh, r_dc, r_dw = _reference(gx, h0, c0, w, d_out, d_h, d_c,
                                                         reverse)
    for got, ref in [(out, r_out), (hT, r_h), (cT, r_c)]:
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)
    d_h0, d_c0 = d_h.copy(), d_c.copy()
    grads = rnn.lstm_layer_backward(d_out, d_h, d_c, ws, out, h0, c0, w, reverse)
    np.testing.assert_array_equal(d_h, d_h0)      # the incoming gradients are not written to
    np.testing.assert_array_equal(d_c, d_c0)
    for got, ref in zip(grads, (r_dgx, r_dh, r_dc, r_dw)):
        assert got.dtype == np.dtype(dtype) and got.shape == ref.shape
        np.testing.assert_allclose(got, ref, rtol=10 * tol, atol=10 * tol)
    # the forward kernels are float32 only (float64 runs NumPy's exp / tanh); three rows run the
    # whole layer in one call (``forward_layer``), or, without Numba, ask for the step kernel too
    forward = ["forward_layer"] if use_numba else ["forward_layer", "forward_step"]
    names = forward * (dtype == np.float32) + ["backward_step"]
    assert [n for n, _ in calls] == names
    assert all((k is not None) == use_numba for _, k in calls)


def test_lstm_layer_of_no_steps_returns_the_initial_states():
    h0, c0 = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    out, h, c, ws = rnn.lstm_layer(np.zeros((0, 2, 12)), h0, c0, np.zeros((12, 3)))
    assert out.shape == (0, 2, 3) and ws.shape == (0, 2, 18)
    np.testing.assert_array_equal(h, h0)
    np.testing.assert_array_equal(c, c0)
    assert h is not h0 and c is not c0


def test_lstm_layer_runs_numpy_while_its_step_kernels_compile(monkeypatch):
    """Under "background" the first forward and backward queue their kernels' compiles (the
    whole-layer kernel of a two-row layer, then the step kernels) and run NumPy."""
    from tests.kernels.test_rnn_numba import uncompiled_step_kernels
    fresh, queued = uncompiled_step_kernels(monkeypatch, "forward_layer", "forward_step",
                                            "backward_step")
    gx = rng.standard_normal((4, 2, 12)).astype(np.float32)
    h0, c0 = np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float32)
    w = rng.standard_normal((12, 3)).astype(np.float32)
    out, h, c, ws = rnn.lstm_layer(gx, h0, c0, w)
    grads = rnn.lstm_layer_backward(out, h, c, ws, out, h0, c0, w)
    assert [q.rsplit(".", 1)[-1] for q in queued] == ["forward_layer", "forward_step",
                                                      "backward_step"]
    assert not fresh.forward_layer.overloads and not fresh.forward_step.overloads and \
        not fresh.backward_step.overloads
    monkeypatch.setattr(rnn, "USE_NUMBA", False)
    ref = rnn.lstm_layer(gx, h0, c0, w)
    for a, b in zip((out, h, c, ws) + grads,
                    ref + rnn.lstm_layer_backward(ref[0], ref[1], ref[2], ref[3], ref[0], h0, c0,
                                                  w)):
        np.testing.assert_array_equal(a, b)


def test_lstm_layer_backward_of_a_broadcast_output_gradient():
    """The gradient of ``out.sum()`` arrives as a broadcast (stride-0) array."""
    gx = rng.standard_normal((5, 2, 12))
    h0, c0, w = np.zeros((2, 3)), np.zeros((2, 3)), rng.standard_normal((12, 3))
    out, h, c, ws = rnn.lstm_layer(gx, h0, c0, w)
    ones = np.broadcast_to(np.ones(()), out.shape)
    zeros = np.zeros((2, 3))
    got = rnn.lstm_layer_backward(ones, zeros, zeros, ws, out, h0, c0, w)
    ref = rnn.lstm_layer_backward(np.ones(out.shape), zeros, zeros, ws, out, h0, c0, w)
    for a, b in zip(got, ref):
        np.testing.assert_array_equal(a, b)
