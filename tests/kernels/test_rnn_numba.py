"""The fused float32 LSTM forward step (rnn_numba.forward_step) against the NumPy step, torch,
and the argument types it is compiled for."""
import numpy as np
import pytest

from ember.kernels import rnn

rng = np.random.default_rng(3)


@pytest.fixture
def sync_numba(monkeypatch):
    from ember.kernels.pointwise import has_compiler
    from ember.kernels.runtime import compiler
    if not has_compiler():
        pytest.skip("numba not importable")
    monkeypatch.setattr(compiler, "compile_mode", lambda: "sync")
    from ember.kernels import rnn_numba
    return rnn_numba


def _layer_inputs(T, B, H, scale, dtype=np.float32):
    gx = (rng.standard_normal((T, B, 4 * H)) * scale).astype(dtype)
    h0, c0 = (rng.standard_normal((B, H)).astype(dtype) for _ in range(2))
    w = (rng.standard_normal((4 * H, H)) * 0.3).astype(dtype)
    return gx, h0, c0, w


def _numpy_layer(monkeypatch, *args):
    with monkeypatch.context() as m:
        m.setattr(rnn, "USE_NUMBA", False)
        return rnn.lstm_layer(*args)


# the kernel a float32 layer of 4 rows runs: BLAS's product per step and ``forward_step``, or
# the whole layer in ``forward_layer`` (its products' sums in another order: a looser bound)
KERNELS = [("forward_step", 0, 2e-6), ("forward_layer", 4, 1e-5)]


@pytest.mark.parametrize("kernel,max_batch,tol", KERNELS)
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("scale", [1.0, 40.0])     # 40: saturated gates, exp beyond float32
def test_fused_forward_equals_the_numpy_step(sync_numba, monkeypatch, reverse, scale, kernel,
                                             max_batch, tol):
    monkeypatch.setattr(rnn, "LAYER_KERNEL_MAX_BATCH", max_batch)
    args = _layer_inputs(9, 4, 33, scale)
    calls = []
    real = rnn._step_kernel
    monkeypatch.setattr(rnn, "_step_kernel",
                        lambda *a: calls.append((a[0], real(*a))) or calls[-1][1])
    got = rnn.lstm_layer(*args, reverse)
    assert [n for n, k in calls if k is not None] == [kernel]
    ref = _numpy_layer(monkeypatch, *args, reverse)
    for g, r in zip(got, ref):
        assert g.dtype == np.float32 and g.shape == r.shape
        assert np.isfinite(g).all()
        np.testing.assert_allclose(g, r, rtol=tol, atol=tol)


@pytest.mark.parametrize("kernel,max_batch,tol", KERNELS)
def test_fused_forward_propagates_nan_to_its_batch_row_only(sync_numba, monkeypatch, kernel,
                                                            max_batch, tol):
    monkeypatch.setattr(rnn, "LAYER_KERNEL_MAX_BATCH", max_batch)
    gx, h0, c0, w = _layer_inputs(4, 3, 8, 1.0)
    gx[1, 2, 5] = np.nan
    out, h, c, ws = rnn.lstm_layer(gx, h0, c0, w)
    ref = _numpy_layer(monkeypatch, gx, h0, c0, w)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref[0]))
    assert not np.isnan(out[:, :2]).any() and np.isnan(out[1:, 2]).any()
    np.testing.assert_allclose(out, ref[0], rtol=tol, atol=tol)


def test_fused_forward_of_read_only_and_strided_states_compiles_no_new_variant(sync_numba,
                                                                             monkeypatch):
    """Initial states that are read-only or strided are copied to the one compiled layout."""
    gx, h0, c0, w = _layer_inputs(3, 4, 6, 1.0)
    rnn.lstm_layer(gx, h0, c0, w)
    n_sigs = len(sync_numba.forward_step.signatures)
    ro = c0.copy()
    ro.setflags(write=False)
    strided = np.asfortranarray(c0)
    gx_ro = gx.copy()
    gx_ro.setflags(write=False)
    ref = _numpy_layer(monkeypatch, gx, h0, c0, w)
    for g, c in [(gx, ro), (gx, strided), (gx_ro, c0)]:
        got = rnn.lstm_layer(g, h0, c, w)
        for a, b in zip(got, ref):
            np.testing.assert_allclose(a, b, rtol=2e-6, atol=2e-6)
    assert len(sync_numba.forward_step.signatures) == n_sigs


def test_float64_layer_runs_the_numpy_forward_step(sync_numba, monkeypatch):
    args = _layer_inputs(5, 2, 7, 2.0, np.float64)
    got = rnn.lstm_layer(*args)
    ref = _numpy_layer(monkeypatch, *args)
    for a, b in zip(got, ref):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_layers_forward_and_backward_match_torch(sync_numba, kind, dtype):
    """nn.LSTM / nn.GRU (2 layers) on the fused steps: outputs, final states and every
    gradient as torch's, from the same weights."""
    torch = pytest.importorskip("torch")
    import ember
    T, B, I, H = 6, 5, 7, 9
    x = rng.standard_normal((T, B, I)).astype(dtype)
    res = []
    for lib in (ember, torch):
        m = getattr(lib.nn, kind)(I, H, 2)
        if lib is torch:    # the same weights in both
            with torch.no_grad():
                for p, q in zip(m.parameters(), ref_params):
                    p.copy_(torch.from_numpy(q))
        else:
            ref_params = [p.detach().numpy().copy() for p in m.parameters()]
        m = m.double() if dtype == "float64" else m
        xt = lib.tensor(x, requires_grad=True)
        out, state = m(xt)
        h, c = state if kind == "LSTM" else (state, state)
        (out.sum() + (h * h).sum() + c.sum()).backward()
        res.append([out.detach().numpy(), h.detach().numpy(), c.detach().numpy(),
                    xt.grad.numpy()] + [p.grad.numpy() for p in m.parameters()])
    tol = 2e-5 if dtype == "float32" else 1e-10
    for e, t in zip(*res):
        assert e.dtype == np.dtype(dtype)
        np.testing.assert_allclose(e, t, rtol=tol, atol=tol)


@pytest.mark.parametrize("reverse", [False, True])
def test_lstm_layer_gradcheck_float64(sync_numba, reverse):
    """First and second order through the fused layer (Numba backward step, float64)."""
    import ember
    from ember.autograd import gradcheck, gradgradcheck
    from ember.autograd._generated import functions as G
    T, B, H = 3, 2, 3
    gx, h0, c0 = (ember.tensor(rng.standard_normal(s), requires_grad=True)
                  for s in [(T, B, 4 * H), (B, H), (B, H)])
    w = ember.tensor(rng.standard_normal((4 * H, H)) * 0.5, requires_grad=True)

    def f(gx, h0, c0, w):
        out, h, c, _ = G.lstm_layer(gx, h0, c0, w, reverse)
        return out, h, c

    assert gradcheck(f, (gx, h0, c0, w))
    assert gradgradcheck(f, (gx, h0, c0, w))


def _gru_inputs(B, H, scale, dtype=np.float32):
    gx = (rng.standard_normal((B, 3 * H)) * scale).astype(dtype)
    hx = rng.standard_normal((B, H)).astype(dtype)
    w = (rng.standard_normal((3 * H, H)) * 0.3).astype(dtype)
    b = rng.standard_normal(3 * H).astype(dtype)
    return gx, hx, w, b


@pytest.mark.parametrize("scale", [1.0, 40.0])
@pytest.mark.parametrize("bias", [True, False])
def test_fused_gru_step_equals_the_numpy_step(sync_numba, monkeypatch, scale, bias):
    gx, hx, w, b = _gru_inputs(6, 37, scale)
    b = b if bias else None
    dh = rng.standard_normal(hx.shape).astype(np.float32)
    calls = []
    real = rnn._step_kernel
    monkeypatch.setattr(rnn, "_step_kernel",
                        lambda *a: calls.append((a[0], real(*a))) or calls[-1][1])
    hy, ws = rnn.gru_step(gx, hx, w, b)
    grads = rnn.gru_step_backward(dh, ws, hx, w)
    assert [n for n, k in calls if k is not None] == ["gru_forward_step", "gru_backward_step"]
    with monkeypatch.context() as m:
        m.setattr(rnn, "USE_NUMBA", False)
        ref_hy, ref_ws = rnn.gru_step(gx, hx, w, b)
        ref_grads = rnn.gru_step_backward(dh, ws, hx, w)    # from the same workspace
    for g, r in [(hy, ref_hy), (ws, ref_ws)]:
        assert g.dtype == np.float32 and g.shape == r.shape and np.isfinite(g).all()
        np.testing.assert_allclose(g, r, rtol=2e-6, atol=2e-6)
    for g, r in zip(grads, ref_grads):         # the same formulas in the same order
        assert g.dtype == np.float32 and g.shape == r.shape
        np.testing.assert_array_equal(g, r)


def test_gru_step_of_other_layouts_runs_the_compiled_variant_or_numpy(sync_numba, monkeypatch):
    """float64 forward and read-only / strided arrays: results as NumPy's, and no second
    compiled variant of the kernels."""
    gx, hx, w, b = _gru_inputs(4, 5, 1.0)
    rnn.gru_step_backward(hx, rnn.gru_step(gx, hx, w, b)[1], hx, w)
    n_sigs = (len(sync_numba.gru_forward_step.signatures),
              len(sync_numba.gru_backward_step.signatures))
    ro = hx.copy()
    ro.setflags(write=False)
    cases = [(gx, ro), (np.asfortranarray(gx), np.asfortranarray(hx))]
    for g, h in cases:
        hy, ws = rnn.gru_step(g, h, w, b)
        d = rnn.gru_step_backward(np.broadcast_to(np.float32(1), h.shape), ws, h, w)
        with monkeypatch.context() as m:
            m.setattr(rnn, "USE_NUMBA", False)
            ref = rnn.gru_step(g, h, w, b)
            ref_d = rnn.gru_step_backward(np.ones(h.shape, np.float32), ws, h, w)
        for a, r in zip((hy, ws) + d, ref + ref_d):
            np.testing.assert_allclose(a, r, rtol=2e-6, atol=2e-6)
    assert (len(sync_numba.gru_forward_step.signatures),
            len(sync_numba.gru_backward_step.signatures)) == n_sigs
    args = _gru_inputs(3, 4, 2.0, np.float64)
    got = rnn.gru_step(*args)
    with monkeypatch.context() as m:
        m.setattr(rnn, "USE_NUMBA", False)
        ref = rnn.gru_step(*args)
    for a, r in zip(got, ref):
        np.testing.assert_array_equal(a, r)


def test_gru_step_runs_numpy_while_its_kernels_compile(monkeypatch):
    """Under "background" the first GRU step and its backward queue their kernels' compiles
    and return NumPy's results."""
    fresh, queued = uncompiled_step_kernels(monkeypatch, "gru_forward_step", "gru_backward_step")
    gx, hx, w, b = _gru_inputs(3, 4, 1.0)
    hy, ws = rnn.gru_step(gx, hx, w, b)
    grads = rnn.gru_step_backward(hy, ws, hx, w)
    assert [q.rsplit(".", 1)[-1] for q in queued] == ["gru_forward_step", "gru_backward_step"]
    assert not fresh.gru_forward_step.overloads and not fresh.gru_backward_step.overloads
    monkeypatch.setattr(rnn, "USE_NUMBA", False)
    ref = rnn.gru_step(gx, hx, w, b)
    for a, r in zip((hy, ws) + grads, ref + rnn.gru_step_backward(ref[0], ref[1], hx, w)):
        np.testing.assert_array_equal(a, r)


def test_gru_step_gradcheck_float64(sync_numba):
    """First and second order through gru_step (Numba backward step, float64)."""
    import ember
    from ember.autograd import gradcheck, gradgradcheck
    from ember.autograd._generated import functions as G
    B, H = 2, 3
    gx, hx, w, b = (ember.tensor(rng.standard_normal(s) * 0.7, requires_grad=True)
                    for s in [(B, 3 * H), (B, H), (3 * H, H), (3 * H,)])

    def f(gx, hx, w, b):
        return G.gru_step(gx, hx, w, b)[0]

    assert gradcheck(f, (gx, hx, w, b))
    assert gradgradcheck(f, (gx, hx, w, b))


def uncompiled_step_kernels(monkeypatch, *names):
    """Fresh (never compiled) copies of ``rnn_numba``'s kernels ``names`` in place of the module,
    under "background" compilation with the compile queue recorded instead of run: returns
    (the namespace of kernels, the list of queued compile and disk-cache load names; a tier's
    second choice, queued while Numba imports, is left out)."""
    numba = pytest.importorskip("numba")
    from types import SimpleNamespace
    from ember.kernels import rnn_numba
    from ember.kernels.runtime import compiler
    fresh = SimpleNamespace(**{n: numba.njit(getattr(rnn_numba, n).py_func) for n in names})
    monkeypatch.setattr(rnn, "_kernels", lambda: fresh)
    monkeypatch.setattr(compiler, "_tiers", {})
    queued = []
    monkeypatch.setattr(compiler, "submit", lambda key, name, job, **kw:
                        None if name.startswith("tier ") else queued.append(name))
    monkeypatch.setattr(compiler, "compile_mode", lambda: "background")
    return fresh, queued


@pytest.mark.parametrize("B", [1, 2, 8])
@pytest.mark.parametrize("kind", ["lstm_layer", "lstm_step", "gru_step"])
def test_recurrent_steps_read_the_weight_in_place(sync_numba, kind, B):
    """The recurrent product reads weight_hh as stored: no transposed copy of it is allocated
    (the old ``lstm_layer`` copied ``w_hh.T`` on every call, 38 ms at hidden size 1024)."""
    import tracemalloc
    H = 256
    gates = 4 if kind != "gru_step" else 3
    w = (rng.standard_normal((gates * H, H)) * 0.1).astype(np.float32)
    h, c = (rng.standard_normal((B, H)).astype(np.float32) for _ in range(2))
    gx = rng.standard_normal((1, B, gates * H)).astype(np.float32)
    run = {"lstm_layer": lambda: rnn.lstm_layer(gx, h, c, w),
           "lstm_step": lambda: rnn.lstm_step(gx[0], h, c, w),
           "gru_step": lambda: rnn.gru_step(gx[0], h, w, None)}[kind]
    run()                                  # compiles (sync), picks its tiers
    tracemalloc.start()
    try:
        run()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < w.nbytes // 4, (kind, peak, w.nbytes)


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_one_token_steps_follow_every_weight_update_as_torch(sync_numba, kind):
    """A batch of one, one token (the sampler's step, the weights' matrix-vector path):
    outputs and gradients as torch's, and after each way of changing the weights (an optimizer
    step, an in-place edit under no_grad, an update through ``.data``, which has its own
    version counter) the next forward uses the new values: nothing derived from the weights is
    kept between calls."""
    torch = pytest.importorskip("torch")
    import ember
    I, H = 96, 160
    xs = [rng.standard_normal((1, 1, I)).astype(np.float32) for _ in range(4)]
    mods = {}
    for lib in (ember, torch):
        lib.manual_seed(0)
        m = getattr(lib.nn, kind)(I, H)
        if lib is torch:
            with torch.no_grad():
                for p, q in zip(m.parameters(), mods[ember].parameters()):
                    p.copy_(torch.from_numpy(q.detach().numpy().copy()))
        mods[lib] = m

    def run(lib, x, train):
        m = mods[lib]
        xt = lib.tensor(x, requires_grad=train)
        out, _ = m(xt)
        if train:
            m.zero_grad()
            (out * out).sum().backward()
            return [out.detach().numpy().copy(), xt.grad.numpy().copy()] + \
                [p.grad.numpy().copy() for p in m.parameters()]
        return [out.detach().numpy().copy()]

    def update(lib, how):
        m = mods[lib]
        w = getattr(m, "weight_hh_l0")
        if how == "step":
            opt = lib.optim.SGD(m.parameters(), lr=0.5)
            opt.step()
        elif how == "no_grad":
            with lib.no_grad():
                w.mul_(-1.5)
                m.weight_ih_l0[:3].fill_(0.25)
        else:
            w.data.add_(w.data * 0.5)

    for x, how in zip(xs, [None, "step", "no_grad", "data"]):
        if how is not None:
            for lib in (ember, torch):
                update(lib, how)
        for train in (False, True):
            got, ref = run(ember, x, train), run(torch, x, train)
            for e, t in zip(got, ref):
                np.testing.assert_allclose(e, t, rtol=1e-4, atol=1e-5)
