"""The engine: layouts, outputs, in-place and overlapping operands, scalars, float16, threads."""
import threading

import numpy as np
import pytest

from ember.kernels.runtime import threads
from ember.kernels.pointwise import Expr, apply, compile_pointwise, engine, has_compiler

pytestmark = pytest.mark.skipif(not has_compiler(), reason="numba not importable")
BACKENDS = ["numba", "numpy"]

# w = max(tanh(x * y + s), x), m = x > y, for a Python-scalar input s
MIXED = Expr(("x", "y", "s"), [("t", "mul", ("x", "y")), ("u", "add", ("t", "s")), ("v", "tanh", ("u",)),
                               ("w", "maximum", ("v", "x")), ("m", "gt", ("x", "y"))], ("w", "m"))


def _mixed_ref(x, y, s):
    return np.maximum(np.tanh(x * y + np.float32(s)), x), x > y


def _layouts(rng):
    base = rng.standard_normal((6, 7, 8)).astype(np.float32)
    other = rng.standard_normal((6, 7, 8)).astype(np.float32)
    return {
        "contiguous": (base, other),
        "transposed": (base.transpose(2, 0, 1), other.transpose(2, 0, 1)),
        "mixed_order": (base.transpose(2, 0, 1), np.ascontiguousarray(other.transpose(2, 0, 1))),
        "sliced_negative": (base[::2, 1:, ::-1], other[::2, 1:, 7::-1]),
        "broadcast": (base, other[:1, :, :1]),
        "fortran": (np.asfortranarray(base), np.asfortranarray(other)),
        "zero_dim": (base[0, 0, 0].copy().reshape(()), other[1, 1, 1].copy().reshape(())),
        "size_zero": (base[:, :0], other[:, :0]),
    }


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "mixed_order", "sliced_negative", "broadcast",
                                    "fortran", "zero_dim", "size_zero"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_layouts_float32(layout, backend):
    x, y = _layouts(np.random.default_rng(1))[layout]
    kernel = compile_pointwise(MIXED, (x, y, float))
    w, m = kernel(x, y, 0.25, backend=backend)
    ew, em = _mixed_ref(x, y, 0.25)
    assert w.shape == ew.shape and w.dtype == np.float32 and m.dtype == np.bool_
    np.testing.assert_allclose(w, ew, rtol=2e-6, atol=1e-6)
    np.testing.assert_array_equal(m, em)


def test_outputs_follow_the_inputs_memory_order():
    x = np.random.default_rng(2).standard_normal((64, 300)).astype(np.float32)
    w, m = compile_pointwise(MIXED, (x, x, float))(x.T, x.T, 1.0, backend="numba")
    assert w.flags.f_contiguous and m.flags.f_contiguous


INT_EXPR = Expr(("a", "b", "c"), [("s", "add", ("a", "b")), ("p", "mul", ("s", 3)), ("q", "maximum", ("p", "b")),
                                  ("r", "where", ("c", "q", "a")), ("n", "neg", ("r",)), ("d", "div", ("n", "b"))],
                ("n", "d"))


@pytest.mark.parametrize("dtype", ["int64", "uint8"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_integer_wraparound_and_broadcast(dtype, backend):
    rng = np.random.default_rng(3)
    a = rng.integers(0, 120, (40, 50)).astype(dtype)
    b = rng.integers(1, 120, (50,)).astype(dtype)
    c = rng.integers(0, 2, (40, 1)).astype(bool)
    n, d = compile_pointwise(INT_EXPR, (a, b, c))(a.T.copy().T, b, c, backend=backend)
    with np.errstate(over="ignore"):
        r = np.where(c, np.maximum((a + b) * np.array(3, dtype), b), a)
        en = -r
    np.testing.assert_array_equal(n, en)
    assert n.dtype == dtype and d.dtype == np.float32
    np.testing.assert_allclose(d, en.astype(np.float32) / b.astype(np.float32), rtol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_float16_mixed_with_float32_and_int(backend):
    rng = np.random.default_rng(4)
    h = rng.standard_normal((300, 70)).astype(np.float16)
    i = rng.integers(-5, 5, (70,)).astype(np.int64)
    e = Expr(("h", "i"), [("a", "mul", ("h", "i")), ("b", "sigmoid", ("a",)), ("c", "cast", ("b", "float32")),
                          ("d", "add", ("c", "h"))], ("b", "d"))
    b, d = compile_pointwise(e, (h, i))(h.T.T, i, backend=backend)
    a = (h.astype(np.float32) * i).astype(np.float16)  # torch: float16 * int64 -> float16
    eb = (1 / (1 + np.exp(-a.astype(np.float32)))).astype(np.float16)
    assert b.dtype == np.float16 and d.dtype == np.float32
    np.testing.assert_array_equal(b, eb)
    np.testing.assert_allclose(d, eb.astype(np.float32) + h.astype(np.float32), rtol=1e-6)


def test_float16_conversions_are_exact():
    bits = np.arange(1 << 16, dtype=np.uint16)
    halves = bits.view(np.float16)
    (wide,) = apply(Expr(("h",), [("f", "cast", ("h", "float32"))], ("f",)), halves, backend="numba")
    np.testing.assert_array_equal(wide.view(np.uint32), halves.astype(np.float32).view(np.uint32))
    rng = np.random.default_rng(5)
    f = rng.integers(0, 1 << 32, 1 << 18, dtype=np.uint64).astype(np.uint32).view(np.float32)
    edges = np.array([65504, 65519.996, 65520, 6.1035156e-05, 5.9604645e-08, 2.9802322e-08, 2.9802326e-08,
                      1.0009766, 1.0004883, 1.0014648, -0.0, np.inf, -np.inf], np.float32)
    f = np.concatenate([f, edges, -edges])
    (narrow,) = apply(Expr(("f",), [("h", "cast", ("f", "float16"))], ("h",)), f, backend="numba")
    with np.errstate(over="ignore"):
        expected = f.astype(np.float16)
    finite = ~np.isnan(f)
    np.testing.assert_array_equal(narrow[finite].view(np.uint16), expected[finite].view(np.uint16))
    assert np.isnan(narrow[~finite]).all()


def test_fast_float32_exp_tanh_accuracy():
    x = np.concatenate([np.linspace(-110, 110, 200001), np.linspace(-1, 1, 20001)]).astype(np.float32)
    e = Expr(("x",), [("e", "exp", ("x",)), ("t", "tanh", ("x",)), ("s", "sigmoid", ("x",))], ("e", "t", "s"))
    got = apply(e, x, backend="numba")
    x64 = x.astype(np.float64)
    with np.errstate(over="ignore"):
        refs = [r.astype(np.float32) for r in (np.exp(x64), np.tanh(x64), 1 / (1 + np.exp(-x64)))]
    for g, ref in zip(got, refs):
        normal = np.abs(ref) >= np.finfo(np.float32).tiny
        ulp = np.abs(g.view(np.int32).astype(np.int64) - ref.view(np.int32).astype(np.int64))
        assert ulp[normal].max() <= 3
        assert np.abs(g[~normal] - ref[~normal]).max() <= np.finfo(np.float32).tiny  # underflow to 0 allowed


ADD1 = Expr(("x", "y"), [("t", "mul", ("x", "y")), ("r", "add", ("t", 1.0))], ("r",))


@pytest.mark.parametrize("backend", BACKENDS)
def test_in_place_output_is_an_input(backend):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((100, 30)).astype(np.float32)
    y = rng.standard_normal(30).astype(np.float32)
    expected = x * y + 1
    (r,) = apply(ADD1, x, y, out=x, backend=backend)
    assert r is x
    np.testing.assert_allclose(x, expected, rtol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_partial_overlap_between_input_and_output(backend):
    rng = np.random.default_rng(7)
    base = rng.standard_normal(1001).astype(np.float32)
    ones = np.ones(1000, np.float32)
    x, out = base[1:], base[:-1]  # out[i] shares memory with x[i - 1]
    expected = x * ones + 1
    apply(ADD1, x, ones, out=out, backend=backend)
    np.testing.assert_allclose(out, expected, rtol=1e-6)

    sq = rng.standard_normal((50, 50)).astype(np.float32)
    expected = sq.T * sq + 1
    apply(ADD1, sq.T, sq, out=sq, backend=backend)  # out is the transpose of an input
    np.testing.assert_allclose(sq, expected, rtol=1e-6)

    v = rng.standard_normal(64).astype(np.float32)
    expected = v[:, None] * np.ones((64, 64), np.float32) + 1
    grid = np.empty((64, 64), np.float32)
    grid[0] = v
    apply(ADD1, grid[0][:, None], np.ones((64, 64), np.float32), out=grid, backend=backend)  # broadcast input
    np.testing.assert_allclose(grid, expected, rtol=1e-6)


def test_out_with_a_wider_dtype_and_errors():
    x = np.ones((10, 4), np.float32)
    k = compile_pointwise(ADD1, (x, x))
    wide = np.empty((10, 4), np.float64)
    (r,) = k(x, x, out=wide, backend="numba")
    assert r is wide and (wide == 2).all()
    with pytest.raises(TypeError, match="can't be cast"):
        k(x, x, out=np.empty((10, 4), np.int32))
    with pytest.raises(ValueError, match="shape"):
        k(x, x, out=np.empty((10, 5), np.float32))
    ro = np.empty((10, 4), np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        k(x, x, out=ro)
    with pytest.raises(ValueError, match="share memory"):
        k(x, x, out=np.lib.stride_tricks.as_strided(np.empty(4, np.float32), (10, 4), (0, 4)))
    with pytest.raises(TypeError, match="dtype float32"):
        k(x.astype(np.float64), x)
    with pytest.raises(ValueError, match="broadcast"):
        k(x, np.ones(3, np.float32))
    with pytest.raises(TypeError, match="operands"):
        k(x)
    both = Expr(("x",), [("a", "neg", ("x",)), ("b", "abs", ("x",))], ("a", "b"))
    buf = np.empty((10, 4), np.float32)
    with pytest.raises(ValueError, match="two outputs"):
        apply(both, x, out=(buf, buf))


def test_scalar_inputs_do_not_recompile():
    x = np.arange(20000, dtype=np.int32)
    k = compile_pointwise(Expr(("x", "lr"), [("y", "mul", ("x", "lr"))], ("y",)), (x, float))
    for lr in (0.5, 0.25, 3):
        (y,) = k(x, lr)
        assert y.dtype == np.float32
        np.testing.assert_allclose(y, x.astype(np.float32) * np.float32(lr), rtol=1e-7)
    assert len(k._variants) == 1
    with pytest.raises(TypeError, match="scalar"):
        k(x, np.ones(3))


def test_thread_count_and_python_threads():
    rng = np.random.default_rng(8)
    x = rng.standard_normal(300000).astype(np.float32)
    y = rng.standard_normal(300000).astype(np.float32)
    k = compile_pointwise(ADD1, (x, y))
    before = threads.get_num_threads()
    try:
        threads.set_num_threads(1)
        (one,) = k(x, y)
        threads.set_num_threads(2)
        (two,) = k(x, y)
    finally:
        threads.set_num_threads(before)
    np.testing.assert_array_equal(one, two)
    results = [None] * 4

    def work(i):
        results[i] = k(x, y)[0]
    workers = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    for r in results:
        np.testing.assert_array_equal(r, one)


@pytest.mark.skipif(not has_compiler(), reason="numba not importable")
@pytest.mark.parametrize("layer", ["pool", "tbb"])
@pytest.mark.parametrize("n_threads", [2, 3])
def test_parallel_split_on_every_layout(n_threads, layer, monkeypatch):
    """Forced parallel (any size) on ember's pool and on Numba's TBB layer: contiguous,
    transposed, broadcast-row and sliced operands, in place, give the one-thread bits."""
    if layer == "tbb" and threads.parallel_layer() != "tbb":
        pytest.skip("Numba's TBB threading layer is not available")
    monkeypatch.setattr(threads, "_layer", layer)
    monkeypatch.setattr(engine, "PARALLEL_MIN_NS", 0)
    monkeypatch.setattr(engine, "TBB_MIN_NS", 0)
    rng = np.random.default_rng(9)
    base = rng.standard_normal((37, 300)).astype(np.float32)
    cases = [(base, base + 1), (base.T, base.T * 2), (base, base[:1]), (base[:, ::3], base[:, 1::3])]
    before = threads.get_num_threads()
    try:
        for x, y in cases:
            k = compile_pointwise(ADD1, (x, y))
            threads.set_num_threads(1)
            (one,) = k(x, y, backend="numba")
            threads.set_num_threads(n_threads)
            (many,) = k(x, y, backend="numba")
            np.testing.assert_array_equal(one, many)
            target = x.copy()
            k(target, y, out=target, backend="numba")
            np.testing.assert_array_equal(target, one)
            assert any(key[-1] == (layer == "tbb") for key in k._variants)
    finally:
        threads.set_num_threads(before)


def test_contiguous_operands_share_read_only_index_arrays():
    """Contiguous operands run as one flat loop whose index arrays are made once per (operand
    count, size), read-only (a kernel cannot change them for the next call)."""
    layout = engine._flat_layout(3, 1000)
    assert engine._flat_layout(3, 1000) is layout and engine._flat_layout(3, 999) is not layout
    cshape, shape, offs, strides, classes = layout
    assert cshape == (1000,) and classes == ("c", "c", "c")
    np.testing.assert_array_equal(shape, [1000])
    np.testing.assert_array_equal(offs, [0, 0, 0])
    np.testing.assert_array_equal(strides, [[1], [1], [1]])
    assert not any(a.flags.writeable for a in (shape, offs, strides))
    rng = np.random.default_rng(4)
    for n in (5000, 7, 5000):
        x, y = rng.standard_normal((2, n)).astype(np.float32)
        (r,) = compile_pointwise(ADD1, (x, y))(x, y, backend="numba")
        np.testing.assert_array_equal(r, x * y + np.float32(1.0))


def test_strided_layouts_are_kept_per_shapes_and_strides():
    """A strided walk's layout is made once per (shape, operand shapes, strides, item sizes),
    read-only; operands of the same shape but other strides (transposed, reversed, broadcast)
    get their own, and new data in a known layout is walked right."""
    rng = np.random.default_rng(5)
    kernel = compile_pointwise(ADD1, (np.zeros(1, np.float32),) * 2)
    base = rng.standard_normal((4, 6, 5)).astype(np.float32)
    cases = [(base, base[:1, :, :1]), (base.transpose(1, 0, 2), base.transpose(1, 0, 2)[:, :1]),
             (base[::-1, :, ::-1], base[:1, :, :1]), (base, base[:, :1, :])]
    for _ in range(2):   # the second round finds every layout kept, with new data
        for x, y in cases:
            x[...] = rng.standard_normal(x.shape)
            (r,) = kernel(x, y, backend="numba")
            np.testing.assert_array_equal(r, x * y + np.float32(1.0))
    x, y = cases[0]
    key = (x.shape, 2, tuple((a.shape, a.strides, a.itemsize)
                             for a in (x, y, np.empty(x.shape, np.float32))))
    layout = engine._strided_layouts[key]
    assert not any(a.flags.writeable for a in layout[1:4])


def test_cost_estimate_orders_kernels():
    x = np.ones(4, np.float32)
    cheap = compile_pointwise(ADD1, (x, x))
    gelu = compile_pointwise("tanh", (x,))
    assert 0 < cheap.ns_per_element < gelu.ns_per_element


def test_expr_validation():
    with pytest.raises(ValueError, match="unknown op"):
        Expr(("x",), [("y", "frobnicate", ("x",))], ("y",))
    with pytest.raises(ValueError, match="before it is bound"):
        Expr(("x",), [("y", "add", ("x", "z"))], ("y",))
    with pytest.raises(ValueError, match="already bound"):
        Expr(("x",), [("x", "neg", ("x",))], ("x",))
    with pytest.raises(ValueError, match="takes 2 operands"):
        Expr(("x",), [("y", "add", ("x",))], ("y",))
    with pytest.raises(ValueError, match="needs parameter 'dtype'"):
        Expr(("x",), [("y", "cast", ("x",))], ("y",))
    with pytest.raises(ValueError, match="not bound"):
        Expr(("x",), [("y", "neg", ("x",))], ("z",))
    with pytest.raises(ValueError, match="needs parameter 'negative_slope'"):
        Expr(("x",), [("y", "leaky_relu", ("x",))], ("y",))  # its default is the spec's
    e = Expr(("x",), [("y", "gelu", ("x",)), ("z", "gelu", ("y", "tanh"))], ("z",))
    assert e.steps[0] == ("y", "gelu", ("x", "none"))
    assert "z = gelu(y, 'tanh')" in str(e)
    int_one = Expr(("x",), [("y", "add", ("x", 1))], ("y",))
    assert int_one.key() != Expr(("x",), [("y", "add", ("x", 1.0))], ("y",)).key()


def test_no_fallback_returns_none_until_the_compiled_variant_runs(monkeypatch):
    """``fallback=False``: None below the size threshold and while the variant is not built
    (compiling off), the outputs once it is (sync)."""
    from ember.kernels.runtime import compiler
    k = compile_pointwise(Expr(("x", "y"), [("z", "mul", ("x", "y")), ("w", "sub", ("z", "y"))], ("w",)),
                          (np.float64, np.float64))
    big = np.arange(float(engine.MIN_COMPILED_SIZE))
    assert k(big[:10], big[:10], fallback=False) is None
    monkeypatch.setattr(compiler, "compile_mode", lambda: "off")
    assert k(big, big, fallback=False) is None
    monkeypatch.setattr(compiler, "compile_mode", lambda: "sync")
    out = k(big, big, fallback=False)
    np.testing.assert_array_equal(out[0], big * big - big)


# buf' = buf * momentum + g, p' = p - lr * buf': SGD with momentum's update, written into buf, p
def _sgd_kernel(dtype):
    from ember.kernels.pointwise.expr import Builder
    b = Builder(("buf", "momentum", "g", "lr", "p"))
    buf, momentum, g, lr, p = b.inputs
    nb = buf * momentum + g
    return compile_pointwise(b.expr(nb, p - lr * nb), [dtype, float, dtype, float, dtype])


def _sgd_sets(rng, dtype, shapes):
    return [[rng.standard_normal(s).astype(dtype) for _ in range(3)] for s in shapes]


def _columns(sets):
    flat = [[a.reshape(-1).view(np.uint16) if a.dtype == np.float16 else a.reshape(-1)
             for a in s] for s in sets]
    bufs, grads, params = (tuple(f[i] for f in flat) for i in range(3))
    return (bufs, grads, params, bufs, params)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_run_many_equals_a_call_per_set_bit_for_bit(dtype, monkeypatch):
    """``run_many``: every set computed as its own call computes it, in one compiled call, the
    scalars per set (two parameter groups' learning rates)."""
    from ember.kernels.runtime import compiler
    monkeypatch.setattr(compiler, "compile_mode", lambda: "sync")
    k = _sgd_kernel(dtype)
    rng = np.random.default_rng(0)
    shapes = [(5, 3), (7,), (70000,), (1, 1)]
    many = _sgd_sets(rng, dtype, shapes)
    each = [[a.copy() for a in s] for s in many]
    lrs = (0.01, 0.5, 0.01, 0.25)
    for (buf, g, p), lr in zip(each, lrs):
        k(buf, 0.9, g, lr, p, out=(buf, p), backend="numba")
    assert k.run_many(_columns(many), ((0.9,) * 4, lrs), (0, -1, 1))
    for s, t in zip(many, each):
        for a, b in zip(s, t):
            np.testing.assert_array_equal(a, b)


def test_run_many_runs_the_sets_in_order_and_refuses_unequal_lengths(monkeypatch):
    """A buffer shared by two sets is updated by the first, then read by the second (as two
    calls do); a set whose arrays differ in length writes nothing at all, and an input named as
    an output that is not its array is an error."""
    from ember.kernels.runtime import compiler
    monkeypatch.setattr(compiler, "compile_mode", lambda: "sync")
    k = _sgd_kernel(np.float32)
    rng = np.random.default_rng(1)
    buf, g1, g2, p = (rng.standard_normal(9).astype(np.float32) for _ in range(4))
    want_buf, want_p = buf.copy(), p.copy()
    for g in (g1, g2):
        k(want_buf, 0.9, g, 0.1, want_p, out=(want_buf, want_p), backend="numba")
    assert k.run_many(((buf, buf), (g1, g2), (p, p), (buf, buf), (p, p)),
                      ((0.9, 0.9), (0.1, 0.1)), (0, -1, 1))
    np.testing.assert_array_equal(buf, want_buf)
    np.testing.assert_array_equal(p, want_p)
    sets = _sgd_sets(rng, np.float32, [(4,), (6,)])
    sets[1][1] = sets[1][1][:5]          # the second set's gradient is one element short
    before = [[a.copy() for a in s] for s in sets]
    assert not k.run_many(_columns(sets), ((0.9, 0.9), (0.1, 0.1)), (0, -1, 1))
    for s, t in zip(sets, before):
        for a, b in zip(s, t):
            np.testing.assert_array_equal(a, b)
    cols = _columns(_sgd_sets(rng, np.float32, [(4,)]))
    with pytest.raises(ValueError, match="input 0 is not output 0"):
        k.run_many((tuple(c.copy() for c in cols[0]),) + cols[1:], ((0.9,), (0.1,)), (0, -1, 1))


def test_run_many_waits_for_its_compile_in_the_background_and_never_compiles_when_off(monkeypatch):
    from ember.kernels.runtime import compiler
    k = _sgd_kernel(np.float64)
    cols = _columns(_sgd_sets(np.random.default_rng(2), np.float64, [(3,), (2,), (5,)]))
    monkeypatch.setattr(compiler, "compile_mode", lambda: "off")
    assert not k.run_many(cols, ((0.9,) * 3, (0.1,) * 3), (0, -1, 1))
    monkeypatch.setattr(compiler, "compile_mode", lambda: "background")
    queued = []
    monkeypatch.setattr(compiler, "submit", lambda key, name, job, **kw: queued.append(key))
    assert not k.run_many(cols, ((0.9,) * 3, (0.1,) * 3), (0, -1, 1))
    assert len(queued) == 1 and queued[0][1][0] == "many"
