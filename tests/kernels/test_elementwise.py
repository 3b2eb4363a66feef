"""Pointwise kernels (ember.kernels.elementwise, special) against torch: dtypes of floating-only
binary ops with integer operands, integer division by zero, bool operands, float_power."""
import numpy as np
import pytest
import torch

import ember

FLOAT_BINARY = ["atan2", "ldexp", "hypot", "copysign", "fmod", "remainder", "nextafter", "xlogy",
                "logaddexp", "logaddexp2", "float_power", "div", "pow", "fmax", "maximum",
                "igamma", "igammac"]
PAIRS = [("float16", "int64"), ("bfloat16", "int32"), ("int32", "float16"), ("int32", "int64"),
         ("uint8", "bfloat16"), ("float64", "int8"), ("bool", "float16")]


def _outcome(lib, op, a, b, shapes):
    x = lib.tensor(np.array([0.5, 3.0, -2.0])[:int(np.prod(shapes[0]))].reshape(shapes[0]))
    y = lib.tensor(np.array([2.0, -1.0, 3.0])[:int(np.prod(shapes[1]))].reshape(shapes[1]))
    x, y = x.to(getattr(lib, a)), y.to(getattr(lib, b))
    try:
        r = getattr(lib, op)(x, y)
    except RuntimeError:
        return RuntimeError
    return repr(r.dtype).split(".")[-1], r.double().tolist()


@pytest.mark.parametrize("shapes", [((3,), (3,)), ((), (3,)), ((3,), ())])
@pytest.mark.parametrize("a,b", PAIRS)
@pytest.mark.parametrize("op", FLOAT_BINARY)
def test_binary_float_op_with_integer_operand_keeps_torch_dtype(op, a, b, shapes):
    """atan2 / ldexp of float16 or bfloat16 with an integer tensor stay float16 / bfloat16
    (they were float32); hypot, nextafter, logaddexp accept them (they refused any integer)."""
    if op == "ldexp" and "bool" in (a, b):
        pytest.skip("torch refuses pow(2, bool) inside ldexp")
    want = _outcome(torch, op, a, b, shapes)
    got = _outcome(ember, op, a, b, shapes)
    if want is RuntimeError or got is RuntimeError:
        assert got is want
        return
    assert got[0] == want[0]
    np.testing.assert_allclose(got[1], want[1], rtol=1e-2, equal_nan=True)


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "int8"])
@pytest.mark.parametrize("call", [
    lambda m, x, y: x % y, lambda m, x, y: m.remainder(x, y), lambda m, x, y: m.fmod(x, y),
    lambda m, x, y: x // y, lambda m, x, y: m.div(x, y, rounding_mode="trunc"),
    lambda m, x, y: m.div(x, y, rounding_mode="floor"), lambda m, x, y: x % 0,
    lambda m, x, y: m.fmod(x, 0), lambda m, x, y: x // 0])
def test_integer_division_by_zero_raises_as_torch(call, dtype):
    def run(m):
        x = m.tensor([5, 3]).to(getattr(m, dtype))
        y = m.tensor([1, 0]).to(getattr(m, dtype))
        with pytest.raises(RuntimeError, match="ZeroDivisionError") as e:
            call(m, x, y)
        return e
    run(torch)
    assert isinstance(run(ember).value, ember.EmberError)


def test_float_division_by_zero_is_a_value():
    x = ember.tensor([5.0, -3.0, 0.0])
    assert np.isnan(ember.remainder(x, 0.0).numpy()).all()
    assert (x // 0.0).tolist()[:2] == (torch.tensor([5.0, -3.0]) // 0.0).tolist()


@pytest.mark.parametrize("call", [
    lambda m, b, i: b - b, lambda m, b, i: i - b, lambda m, b, i: b - 1,
    lambda m, b, i: i - True, lambda m, b, i: m.rsub(b, i), lambda m, b, i: m.fmod(b, b),
    lambda m, b, i: m.remainder(b, b), lambda m, b, i: m.pow(b, b),
    lambda m, b, i: m.floor_divide(b, b)])
def test_bool_operands_refused_as_torch(call):
    for m in (torch, ember):
        with pytest.raises(RuntimeError):
            call(m, m.tensor([True, False]), m.tensor([1, 2]))


@pytest.mark.parametrize("args", [
    (lambda m: m.tensor([1 + 2j, -0.5j]), lambda m: 2),
    (lambda m: m.tensor([2.0, 3.0]), lambda m: 1j),
    (lambda m: 2, lambda m: m.tensor([1j, 0.5 + 1j])),
    (lambda m: m.tensor([2.0]), lambda m: m.tensor([1j], dtype=m.complex64)),
    (lambda m: m.tensor([2, 3]), lambda m: m.tensor([1.5])),
])
def test_float_power_complex_in_complex128(args):
    """float_power of a complex operand computes in complex128 (the imaginary part was
    dropped)."""
    a, b = args
    want = torch.float_power(a(torch), b(torch))
    got = ember.float_power(a(ember), b(ember))
    assert repr(got.dtype).split(".")[-1] == repr(want.dtype).split(".")[-1]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


def test_float_power_complex_gradient_as_torch():
    x = ember.tensor([1 + 2j, 0.5 - 1j], requires_grad=True)
    ember.float_power(x, 2).abs().sum().backward()
    tx = torch.tensor([1 + 2j, 0.5 - 1j], requires_grad=True)
    torch.float_power(tx, 2).abs().sum().backward()
    assert x.grad.dtype == ember.complex64
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)


@pytest.fixture
def sync_compile(monkeypatch):
    from ember.kernels.pointwise import has_compiler
    from ember.kernels.runtime import compiler
    if not has_compiler():
        pytest.skip("numba not importable")
    monkeypatch.setattr(compiler, "compile_mode", lambda: "sync")


def _gelu_input(dtype, n=40_000):
    """Values over GELU's whole range (its negative tail, the knee, large positives, signed
    zeros), more than the engine's one-pass threshold."""
    x = np.random.default_rng(1).standard_normal(n) * 3
    x[:6] = [0.0, -0.0, -12.0, 12.0, 1e-20, -5.5]
    return x.astype(dtype)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gelu_forward_and_backward_on_the_engine_match_torch(sync_compile, dtype, approximate):
    """One compiled engine pass each way (the ``gelu`` row; its backward the spec's formula on
    symbolic values) on an array large enough to take it: values and gradients as torch's.
    float32: within 1e-6 relative, plus an absolute 3e-7 |x| (gradient: 3e-7 (1 + |x|) |grad|)
    for the cancellation in 1 + erf(x / sqrt 2) of the negative tail, which both libraries
    compute so (torch's own float32 erf is a polynomial fit to 1.5e-7; against float64 math,
    ember's gradient is off by 4.3e-7 at most here, torch's by 7.8e-7)."""
    from ember.kernels import elementwise
    calls = []
    real = elementwise.kept_pass
    spy = lambda *a: calls.append(a[0]) or real(*a)   # noqa: E731
    with pytest.MonkeyPatch.context() as m:
        m.setattr(elementwise, "kept_pass", spy)
        x = _gelu_input(dtype)
        g = np.random.default_rng(2).standard_normal(x.shape).astype(dtype)
        xe = ember.tensor(x, requires_grad=True)
        ye = ember.nn.functional.gelu(xe, approximate=approximate)
        ye.backward(ember.tensor(g))
    assert calls == [("gelu", approximate), ("gelu_grad", approximate)]
    xt = torch.tensor(x, requires_grad=True)
    yt = torch.nn.functional.gelu(xt, approximate=approximate)
    yt.backward(torch.tensor(g))
    assert ye.dtype == getattr(ember, dtype) and xe.grad.dtype == getattr(ember, dtype)
    f32 = dtype == "float32"
    rtol = 1e-6 if f32 else 1e-12
    atol = 3e-7 * np.abs(x) if f32 else 1e-13
    gatol = 3e-7 * (1 + np.abs(x)) * np.abs(g) if f32 else 1e-13
    for got, want, tol in [(ye.detach().numpy(), yt.detach().numpy(), atol),
                           (xe.grad.numpy(), xt.grad.numpy(), gatol)]:
        assert np.all(np.abs(got - want) <= tol + rtol * np.abs(want))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_engine_pass_bits_do_not_depend_on_the_thread_count(sync_compile, approximate):
    from ember.kernels import elementwise
    x = _gelu_input(np.float32, 300_000)
    before = ember.get_num_threads()
    try:
        outs = []
        for n in (1, 2, 3):
            ember.set_num_threads(n)
            xe = ember.tensor(x, requires_grad=True)
            y = ember.nn.functional.gelu(xe, approximate=approximate)
            y.backward(ember.ones_like(y))
            outs.append((y.detach().numpy(), xe.grad.numpy()))
    finally:
        ember.set_num_threads(before)
    for y, gx in outs[1:]:
        np.testing.assert_array_equal(y, outs[0][0])
        np.testing.assert_array_equal(gx, outs[0][1])
    assert elementwise.ONE_PASS_MIN_SIZE <= x.size


def _gelu_forms(approximate):
    from ember.autograd._generated.nodes import _gelu_grad_form
    from ember.kernels import elementwise
    return [(elementwise._GELU_FORMS[approximate], ("x",)), (_gelu_grad_form(approximate), ("grad", "self"))]


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_float32_gelu_numpy_twin_has_the_compiled_passs_bits(sync_compile, approximate):
    """float32 GELU and its gradient: the twin NumPy plan ``kept_pass`` runs while the kernel
    compiles gives the compiled pass's bits (every value: the inputs' edges, NaN, +-inf,
    +-0, subnormals, around ERF_CUT sqrt 2) at several sizes, layouts and thread counts."""
    from ember.kernels import elementwise
    from ember.kernels.pointwise import compile_form
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-40, 3e38, -3e38, 5.55,
                      -5.55, 5.5508, -5.5508, 7.0, -7.0, 0.88], np.float32)
    base = np.concatenate([edges, _gelu_input(np.float32, 400_000),
                           np.random.default_rng(4).integers(0, 2 ** 32, 100_000, dtype=np.uint64)
                           .astype(np.uint32).view(np.float32)])
    before = ember.get_num_threads()
    try:
        for n in (16_384, 100_003, base.size):
            x = base[:n]
            g = np.random.default_rng(n).standard_normal(n).astype(np.float32)
            for (form, names), args in zip(_gelu_forms(approximate), ((x,), (g, x))):
                kernel = compile_form(form, names, args)
                plan = elementwise._twin_plan(kernel)
                assert plan
                twin = np.empty_like(x)
                plan.run(args, (twin,), x.shape)
                for threads in (1, 2, 3):
                    ember.set_num_threads(threads)
                    compiled = kernel(*args, backend="numba")[0]
                    np.testing.assert_array_equal(twin.view(np.uint32), compiled.view(np.uint32))
    finally:
        ember.set_num_threads(before)


def test_float64_gelu_has_no_twin():
    """float64's erf / exp / tanh in the kernel (Numba's math.erf, libm) and in NumPy (SciPy,
    NumPy's own loops) differ in the last bits: no twin, its first choice is kept."""
    from ember.kernels import elementwise
    from ember.kernels.pointwise import compile_form
    x = _gelu_input(np.float64, 20_000)
    for approximate in ("none", "tanh"):
        for form, names in _gelu_forms(approximate):
            assert not elementwise._twin_plan(compile_form(form, names, (x,) * len(names)))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_float32_gelu_runs_the_twin_until_its_kernel_is_ready(approximate):
    """Forward and backward of float32 GELU run the twin plan while their pass is not built
    (fresh kernels: its compile queued, or compiling "off", the pass returns None) and the
    kernel once it is, with the same bits: nothing blocks on a compile, nothing changes
    mid-process."""
    from ember.kernels.pointwise import engine, has_compiler
    from ember.kernels.runtime import compiler
    x = _gelu_input(np.float32, 50_000)
    g = np.random.default_rng(5).standard_normal(x.shape).astype(np.float32)

    def run():
        xe = ember.tensor(x, requires_grad=True)
        y = ember.nn.functional.gelu(xe, approximate=approximate)
        y.backward(ember.tensor(g))
        return y.detach().numpy(), xe.grad.numpy()
    real = engine.PointwiseKernel.__call__
    passes = []

    def spy(self, *args, **kw):
        out = real(self, *args, **kw)
        passes.append(out is not None)
        return out
    with pytest.MonkeyPatch.context() as m:
        m.setattr(engine, "_forms", {})   # kernels with no variant built
        m.setattr(engine, "_kernels", engine.LRUCache(engine.MAX_CACHED_KERNELS))
        m.setattr(compiler, "compile_mode", lambda: "off")
        m.setattr(engine.PointwiseKernel, "__call__", spy)
        cold = run()
    assert passes == [False, False]    # forward and gradient: no pass, the twin ran
    if has_compiler():
        with pytest.MonkeyPatch.context() as m:
            m.setattr(compiler, "compile_mode", lambda: "sync")
            m.setattr(engine.PointwiseKernel, "__call__", spy)
            warm = run()
        assert passes[2:] == [True, True]
        for a, b in zip(cold, warm):
            np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


def test_gelu_is_the_engine_row():
    """``elementwise.gelu`` evaluates the pointwise engine's ``gelu`` row (GELU's one home):
    compiled, the same bits as the row run by the engine; else the row's NumPy evaluation."""
    from ember.kernels import elementwise
    from ember.kernels.pointwise import OPS, apply, has_compiler
    small = _gelu_input(np.float32, 1000)
    want = np.empty_like(small)
    OPS["gelu"].numpy(want, ("none",), small)
    np.testing.assert_array_equal(elementwise.gelu(small, "none"), want)
    if has_compiler():
        from ember.kernels.runtime import compiler
        with pytest.MonkeyPatch.context() as m:
            m.setattr(compiler, "compile_mode", lambda: "sync")
            big = _gelu_input(np.float32, 50_000)
            np.testing.assert_array_equal(elementwise.gelu(big, "none"),
                                          apply("gelu", big, backend="numba")[0])


def test_gelu_float64_gradcheck():
    from ember.autograd import gradcheck, gradgradcheck
    for approximate in ("none", "tanh"):
        x = ember.tensor(np.linspace(-4, 4, 13), requires_grad=True)
        f = lambda t: ember.nn.functional.gelu(t, approximate=approximate)  # noqa: E731
        assert gradcheck(f, (x,))
        assert gradgradcheck(f, (x,))


# ------------------------------------------------- each pointwise op's forward math written once
def _spec_kernels():
    import os
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.path.insert(0, os.path.join(root, "tools"))
    from gen_autograd import load_spec
    out = {}
    for e in load_spec():
        name = e["func"].split("(")[0]
        if e.get("pointwise") is True and str(e.get("kernel", "")).startswith("elementwise."):
            out[name] = e["kernel"].split(".", 1)[1]
    return out


def test_math_rows_derive_both_back_ends():
    """A row written as ``math`` has its Numba template and NumPy evaluation derived from it;
    a row without it is one primitive (a ufunc / NumPy function, or its dtype special cases)."""
    from ember.kernels.pointwise import OPS
    primitive = {"_ufunc", "_np_unary_float", "_np_predicate", "_np_float_or_identity"}
    special = {"floor_divide", "remainder", "sign", "erf", "erfc", "cast"}   # algorithms, not compositions
    for op in OPS.values():
        if op.math is not None:
            assert op.numba.__qualname__.startswith("_from_math") and \
                op.numpy.__qualname__.startswith("_from_math"), op.name
        else:
            assert op.numpy.__qualname__.split(".")[0] in primitive or op.name in special, op.name


def test_eager_kernel_of_a_math_row_evaluates_the_row():
    """The eager kernel (spec ``kernel:``) of a ``pointwise: true`` op whose row is written as
    ``math`` runs the row (``_row``) unless it is a named fast path: its math is not restated
    in kernels/elementwise.py."""
    import inspect
    from ember.kernels import elementwise
    from ember.kernels.pointwise import OPS
    checked = []
    for op, kernel in _spec_kernels().items():
        row = OPS.get(op)
        if row is None or row.math is None or kernel in elementwise.FAST_PATHS:
            continue
        fn = getattr(elementwise, kernel)
        src = inspect.getsource(inspect.unwrap(fn))
        assert getattr(fn, "row", None) == op or f'_row("{op}"' in src or \
            f'_evaluate("{op}"' in src, \
            f"elementwise.{kernel} restates the {op} row's math"
        checked.append(op)
    assert {"sigmoid", "silu", "leaky_relu", "elu", "selu", "gelu", "softplus", "rsqrt"} <= set(checked)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("op,args,torch_fn", [
    ("leaky_relu", (0.01,), lambda x: torch.nn.functional.leaky_relu(x, 0.01)),
    ("elu", (1.0,), torch.nn.functional.elu),
    ("selu", (), torch.selu),
    ("silu", (), torch.nn.functional.silu),
    ("sigmoid", (), torch.sigmoid),
    ("softplus", (1.0, 20.0), torch.nn.functional.softplus),
    ("rsqrt", (), torch.rsqrt),
])
def test_eager_kernel_is_the_rows_numpy_evaluation(op, args, torch_fn, dtype):
    """Same bits as the row's NumPy evaluation (the engine's no-compiler path) and torch's
    values: float16 computed in float32 with torch's float32 constants (leaky_relu's slope was
    rounded to float16, 1 ulp off torch), sigmoid/silu 1/(1 + exp(-x)) as torch (sigmoid(-100)
    is 0 in float32, was 3.8e-44)."""
    from ember.kernels import elementwise
    from ember.kernels.pointwise import Expr, OPS, compile_pointwise
    x = np.concatenate([np.linspace(-100, 30, 97), [0.0, -0.0, np.inf, -np.inf, np.nan]]).astype(dtype)
    if op == "rsqrt":
        x = np.abs(x)
    eager = getattr(elementwise, op)(x, *args)
    if dtype != "float16":
        plan = compile_pointwise(Expr.single(op, None, *args), (x,))(x, backend="numpy")[0]
        assert eager.dtype == plan.dtype and np.array_equal(eager.view(np.uint8), plan.view(np.uint8))
    want = torch_fn(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(eager.astype(np.float64), want.astype(np.float64),
                               rtol={"float16": 1e-3, "float32": 2e-6, "float64": 1e-14}[dtype],
                               atol=float(np.finfo(dtype).tiny), equal_nan=True)   # subnormals: exp's last bits
    assert OPS[op].math is not None


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("lambd", [0.5, 1.25, -1.0])
def test_row_kernel_hardshrink_is_its_row_and_matches_torch(dtype, lambd):
    """``kernel: pointwise`` (hardshrink): the record's kernel is ``row_kernel``, the engine
    row's NumPy evaluation, and gives torch's bits at the bounds (|x| == lambd is 0), NaN and
    infinities, float16/bfloat16 computed in float32; the backward is torch's (1 at NaN)."""
    from ember.autograd._generated.records import OPS as RECORDS
    from ember.kernels.pointwise import Expr, compile_pointwise
    assert RECORDS["hardshrink"].kernel.__name__ == "hardshrink"
    x = np.concatenate([np.linspace(-3, 3, 61), [lambd, -lambd, 0.0, -0.0, np.inf, -np.inf, np.nan]])
    t = torch.tensor(x, dtype=getattr(torch, dtype), requires_grad=True)
    e = ember.tensor(x, dtype=getattr(ember, dtype), requires_grad=True)
    want, got = torch.hardshrink(t, lambd), e.hardshrink(lambd)
    assert str(got.dtype).split(".")[1] == dtype
    np.testing.assert_array_equal(got.detach().float().numpy(), want.detach().float().numpy())
    want.backward(torch.ones_like(want))
    got.backward(ember.ones_like(got))
    np.testing.assert_array_equal(e.grad.float().numpy(), t.grad.float().numpy())
    if dtype in ("float32", "float64"):
        a = x.astype(dtype)
        plan = compile_pointwise(Expr.single("hardshrink", None, lambd), (a,))(a, backend="numpy")[0]
        assert np.array_equal(RECORDS["hardshrink"].kernel(a, lambd).view(np.uint8), plan.view(np.uint8))


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.bool_])
def test_row_kernel_of_a_floating_only_row_refuses_integers(dtype):
    """torch.hardshrink of an integer or bool tensor is not implemented: ember refuses it with
    an error naming the op and the dtype (the fused path's typing refuses it too)."""
    from ember.kernels.pointwise import OPS
    from ember.kernels.pointwise.ops import op_types
    from ember.kernels.pointwise.promotion import TENSOR
    with pytest.raises(NotImplementedError):
        torch.hardshrink(torch.tensor(np.array([1, 0], dtype)))
    with pytest.raises(ember.errors.EmberRuntimeError,
                       match=rf"hardshrink: not implemented for {np.dtype(dtype)} tensors"):
        ember.hardshrink(ember.tensor(np.array([1, 0], dtype)))
    with pytest.raises(TypeError, match="hardshrink does not take"):
        op_types(OPS["hardshrink"], [(np.dtype(dtype), TENSOR)], (0.5,))


def test_lerp_follows_torch_two_sided_formula():
    """lerp is torch's formula (the row's): end exactly at weight 1, same bits for a scalar
    weight (the fast path) and a tensor one (the row)."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(50).astype(np.float32), (rng.standard_normal(50) * 1e3).astype(np.float32)
    for w in (0.25, 0.75, 1.0):
        r = ember.lerp(ember.tensor(a), ember.tensor(b), w).numpy()
        t = torch.lerp(torch.from_numpy(a), torch.from_numpy(b), w).numpy()
        assert np.array_equal(r, t)
        rt = ember.lerp(ember.tensor(a), ember.tensor(b), ember.full((50,), w)).numpy()
        assert np.array_equal(r, rt)
    assert np.array_equal(ember.lerp(ember.tensor(a), ember.tensor(b), 1.0).numpy(), b)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int8, np.int64,
                                   np.uint16, np.bool_])
def test_where_bit_select_equals_numpy_where(dtype):
    from ember.kernels import elementwise
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((8, 3, 700)) * 5).astype(dtype)
    b = (rng.standard_normal((3, 1)) * 5).astype(dtype)
    c = rng.random((8, 1, 700)) > 0.5
    assert a.size >= elementwise.SELECT_MIN_SIZE
    for x, y in [(a, b), (b, a), (a, a[::-1])]:
        out = elementwise.where(c, x, y)
        assert out.dtype == np.dtype(dtype) and out.shape == (8, 3, 700)
        np.testing.assert_array_equal(out, np.where(c, x, y))
    np.testing.assert_array_equal(elementwise.where(c, a, 0), np.where(c, a, dtype(0)))
    np.testing.assert_array_equal(elementwise.where(c, 1, a), np.where(c, dtype(1), a))
    t = a.transpose(2, 0, 1)   # non-contiguous
    np.testing.assert_array_equal(elementwise.where(c.transpose(2, 0, 1), t, b.T[None]),
                                  np.where(c.transpose(2, 0, 1), t, b.T[None]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_where_bit_select_keeps_nan_signed_zero_and_infinity(dtype):
    from ember.kernels import elementwise
    rng = np.random.default_rng(0)
    x = np.full(5000, -0.0, dtype)
    x[::3], x[1::7] = np.nan, -np.inf
    c = rng.random(5000) > 0.3
    for fill in (0.0, 1.5, -0.0):
        out = elementwise.where(c, x, fill)
        ref = np.where(c, x, dtype(fill))
        assert out.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(out, ref)
        np.testing.assert_array_equal(np.signbit(out), np.signbit(ref))


def test_relu_backward_through_where_matches_torch():
    rng = np.random.default_rng(0)
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((64, 6, 28, 28)).astype(np.float32)
    x[0, 0, 0, :4] = 0.0
    g = rng.standard_normal(x.shape).astype(np.float32)
    g[0, 0, 1, :4] = np.nan           # masked-off NaN gradients stay zero, as torch's
    ex = ember.tensor(x, requires_grad=True)
    ember.relu(ex).backward(ember.tensor(g))
    tx = torch.tensor(x, requires_grad=True)
    torch.relu(tx).backward(torch.tensor(g))
    np.testing.assert_array_equal(ex.grad.numpy(), tx.grad.numpy())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_relu_grad_engine_pass_equals_the_bit_select(dtype, monkeypatch):
    """``elementwise.relu_grad``'s one engine pass gives the bits of le + where's bit select:
    -0.0 results give +0, NaN results pass the gradient (torch's threshold_backward), the
    gradient's NaN, -0.0 and infinities are copied."""
    from ember.kernels import elementwise
    from ember.kernels.pointwise import compile_form
    rng = np.random.default_rng(0)
    pytest.importorskip("numba")
    from ember.kernels.runtime import compiler
    monkeypatch.setattr(compiler, "compile_mode", lambda: "sync")
    y = np.maximum(rng.standard_normal((64, 6, 28, 28)), 0).astype(dtype)
    g = rng.standard_normal(y.shape).astype(dtype)
    y.reshape(-1)[:40:4] = [np.nan, -0.0, np.inf, -np.inf, 1e-30, 0.0, 2.0, np.nan, 3.0, 1.0]
    g.reshape(-1)[:40:3] = [np.nan, -0.0, np.inf, -np.inf, 5.0, np.nan, -0.0, 1.0, 2.0, 3.0,
                            4.0, 5.0, 6.0, 7.0]
    got = elementwise.relu_grad(g, y)
    assert compile_form(elementwise._relu_grad_form, ("grad", "output"), (g, y))(
        g, y, fallback=False) is not None
    want = elementwise.where(elementwise.le(y, 0), 0.0, g)
    assert got.dtype == np.dtype(dtype)
    assert got.reshape(-1)[28] == g.reshape(-1)[28] != 0     # a NaN result passes its gradient
    np.testing.assert_array_equal(got.view(f"i{got.itemsize}"), want.view(f"i{got.itemsize}"))
    small = elementwise.relu_grad(g[0, 0], y[0, 0])          # below the engine's threshold
    np.testing.assert_array_equal(small, want[0, 0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tanh_and_sigmoid_backward_engine_pass_equals_numpy(dtype, monkeypatch):
    """The one-pass engine kernels of tanh_backward / sigmoid_backward give the bits of the
    NumPy operations in the same order; a broadcast or mixed-dtype call takes the NumPy path."""
    from ember.kernels import elementwise
    from ember.kernels.pointwise import compile_form
    rng = np.random.default_rng(0)
    pytest.importorskip("numba")
    from ember.kernels.runtime import compiler
    monkeypatch.setattr(compiler, "compile_mode", lambda: "sync")
    y = np.tanh(rng.standard_normal((300, 400))).astype(dtype)
    g = rng.standard_normal(y.shape).astype(dtype)
    y[0, :4], g[1, :4] = [np.nan, -0.0, 1.0, -1.0], [np.nan, np.inf, -0.0, 1e30]
    one = dtype(1)
    forms = {"tanh_backward": lambda g, y: g * (one - y * y),
             "sigmoid_backward": lambda g, y: g * (one - y) * y}   # torch's order
    for name, form in forms.items():
        got, want = getattr(elementwise, name)(g, y), form(g, y)
        kernel = compile_form(getattr(elementwise, f"_{name}_form"), ("grad", "output"), (g, y))
        assert kernel(g, y, fallback=False) is not None
        assert got.dtype == np.dtype(dtype)
        bits = f"i{got.itemsize}"
        np.testing.assert_array_equal(got.view(bits), want.view(bits))
        broadcast = getattr(elementwise, name)(g[:1], y)        # the NumPy path
        np.testing.assert_array_equal(broadcast.view(bits), form(g[:1], y).view(bits))


def test_row_evaluate_selects_by_bits_on_large_arrays():
    """``pointwise.ops.evaluate`` (the eager kernels' row evaluation) on arrays past
    SELECT_MIN_SIZE, where the row's selects run as bit masks: the same bits as np.where (NaN,
    signed zeros, a where's bool condition kept); a compare op is refused."""
    from ember.kernels.pointwise.ops import evaluate
    rng = np.random.default_rng(1)
    for dt in (np.float32, np.float64):
        x = rng.standard_normal(20000).astype(dt)
        x[:4] = [np.nan, -0.0, 0.0, np.inf]
        y = rng.standard_normal(20000).astype(dt)
        c = x > 0.3
        for got, want in [(evaluate("relu", (), x), np.where(x <= 0, dt(0), x)),
                          (evaluate("leaky_relu", (0.1,), x), np.where(x > 0, x, x * dt(0.1))),
                          (evaluate("where", (), c, x, y), np.where(c, x, y)),
                          (evaluate("where", (), c, x, np.asarray(dt(0))), np.where(c, x, dt(0)))]:
            assert got.dtype == want.dtype and np.array_equal(got.view(np.uint8), want.view(np.uint8))
    with pytest.raises(ValueError, match="gt is a compare op"):
        evaluate("gt", (), x, y)


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int8, np.bool_])
def test_select_under_a_small_broadcast_mask_has_np_where_s_bits(dt, monkeypatch):
    """``where`` (and ``masked_fill``) under a mask smaller than the result (an attention mask
    broadcast over batch and heads) with a 0-d or full operand: the bit select once the result
    reaches SELECT_MIN_SIZE, np.where's bits (NaN payloads, signed zeros) in every shape."""
    from ember.kernels import elementwise, indexing
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((8, 4, 32, 32)) * 3).astype(dt)
    if dt in (np.float32, np.float64):
        x.reshape(-1)[:3] = [np.nan, -0.0, np.inf]
    y = rng.permutation(x.reshape(-1)).reshape(x.shape)
    s = np.asarray(x.reshape(-1)[7])
    calls = []
    real = elementwise._select_bits
    monkeypatch.setattr(elementwise, "_select_bits", lambda *a: calls.append(1) or real(*a))
    for mask in [np.tril(np.ones((32, 32), bool)) == 0, rng.random((1, 4, 1, 32)) < 0.5,
                 rng.random(x.shape) < 0.5]:
        zero = np.zeros((), dt)
        for a, b in [(zero, x), (x, zero), (s, x), (x, s), (x, y)]:
            calls.clear()
            got = elementwise.where(mask, a, b)
            want = np.where(mask, a, b)
            assert calls == [1] and got.dtype == want.dtype and got.shape == want.shape
            assert np.array_equal(got.view(np.uint8), want.view(np.uint8))
        got = indexing.masked_fill(x, mask, s)
        assert np.array_equal(got.view(np.uint8), np.where(mask, s, x).view(np.uint8))


def test_row_evaluate_never_returns_an_operand():
    """A row whose math returns an operand unchanged (relu of bool, clamp without bounds)
    still gives a fresh array: an eager kernel's result is never its input."""
    from ember.kernels.pointwise.ops import evaluate
    a = np.array([True, False])
    x = np.ones(3, np.float32)
    for r, src in ((evaluate("relu", (), a), a), (evaluate("clamp", (), x, None, None), x)):
        assert r is not src and np.array_equal(r, src)


EDGE = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 20.0, 20.5, 100.0, -100.0, 1e30, -1e30, 3e38, -3e38, 1e-40,
        float("inf"), float("-inf"), float("nan")]
ROW_OPS = [
    ("sigmoid", lambda L, x, y: L.sigmoid(x)),
    ("silu", lambda L, x, y: L.nn.functional.silu(x)),
    ("leaky_relu", lambda L, x, y: L.nn.functional.leaky_relu(x, 0.01)),
    ("leaky_relu_steep", lambda L, x, y: L.nn.functional.leaky_relu(x, 2.5)),
    ("leaky_relu_flat", lambda L, x, y: L.nn.functional.leaky_relu(x, 0.0)),
    ("elu", lambda L, x, y: L.nn.functional.elu(x)),
    ("selu", lambda L, x, y: L.nn.functional.selu(x)),
    ("softplus", lambda L, x, y: L.nn.functional.softplus(x)),
    ("rsqrt", lambda L, x, y: L.rsqrt(x)),
    ("gelu", lambda L, x, y: L.nn.functional.gelu(x)),
    ("gelu_tanh", lambda L, x, y: L.nn.functional.gelu(x, approximate="tanh")),
    ("lerp_tensor", lambda L, x, y: L.lerp(x, y, L.full_like(x, 0.3))),
    ("lerp_low", lambda L, x, y: L.lerp(x, y, 0.3)),
    ("lerp_high", lambda L, x, y: L.lerp(x, y, 0.7)),
    ("xlogy", lambda L, x, y: L.xlogy(x, y)),
]


@pytest.mark.parametrize("size", [1, 256, 20000])   # 20000: gelu's compiled pass
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("name,fn", ROW_OPS, ids=[n for n, _ in ROW_OPS])
def test_row_ops_on_edge_values_warn_of_nothing_as_torch(name, fn, dtype, size):
    """Overflow, log(0), sqrt(-1), inf - inf are values, as torch's, and no RuntimeWarning (the
    floating-point error state is ignored on every path, ``fpstate``: lerp with a scalar weight
    warned of inf - inf); float32/float64 take the kernels' direct path, float16 the general
    one."""
    import warnings
    rng = np.random.default_rng(0)
    x = np.resize(np.array(EDGE + list(rng.standard_normal(64) * 30)), size)
    y = np.roll(x, 5)
    with np.errstate(over="ignore"):   # 3e38 is inf in float16
        x, y = x.astype(dtype), y.astype(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = fn(ember, ember.from_numpy(x), ember.from_numpy(y)).numpy()
    want = fn(torch, torch.from_numpy(x), torch.from_numpy(y)).numpy()
    if name == "gelu":
        # gelu(x) = x * Phi(x) = x for x > 10 (1 - Phi(10) < 1e-23): torch's AVX-512 float32
        # vector loop gives NaN at +inf and overflows to inf at 3e38 (its scalar path and AVX2
        # loop give inf and 3e38), so there the mathematics is the reference, whatever the host
        want = np.where(x > 10, x, want).astype(want.dtype)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                               rtol={"float16": 2e-3, "float32": 2e-6, "float64": 1e-13}[dtype],
                               atol={"float16": 1e-4, "float32": 1e-6, "float64": 1e-13}[dtype],
                               equal_nan=True)   # atol: gelu's erf near x = -5


@pytest.mark.parametrize("name", ["sigmoid", "silu", "elu", "selu", "softplus", "rsqrt", "gelu",
                                  "leaky_relu"])
def test_row_kernel_direct_path_equals_general_path(name):
    """A float32 array goes to the row straight; one of another byte order takes the general
    path (``in_float32``, ``to_float``): the same bits."""
    from ember.kernels import elementwise
    args = {"elu": (1.0,), "softplus": (1.0, 20.0), "gelu": ("none",), "leaky_relu": (0.01,)}
    x = np.concatenate([np.array(EDGE), np.linspace(-50, 50, 301)]).astype(np.float32)
    direct = getattr(elementwise, name)(x, *args.get(name, ()))
    general = getattr(elementwise, name)(x.astype(">f4"), *args.get(name, ()))
    assert direct.dtype == np.float32 and direct.tobytes() == general.astype(np.float32).tobytes()


def test_row_kernels_keep_the_callers_error_state():
    """The kernels ignore floating-point errors only while they run: a caller's ``np.errstate``
    (and NumPy's default) holds before and after, also when the kernel raises."""
    from ember.kernels import elementwise
    from ember.kernels.pointwise.ops import evaluate
    x = np.array([-1.0, 0.0, 1e30], np.float32)
    before = np.geterr()
    with np.errstate(all="raise"):
        elementwise.rsqrt(x)
        elementwise.lerp(x, -x, 0.3)
        with pytest.raises(FloatingPointError):
            np.sqrt(x)
        with pytest.raises(IndexError):
            evaluate("softplus", (1.0,), x)   # threshold missing: the row's math raises
        with pytest.raises(FloatingPointError):
            np.sqrt(x)
    assert np.geterr() == before


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lerp_tensor_weight_one_pass_has_the_rows_bits(dtype):
    """lerp of three arrays from ONE_PASS_MIN_SIZE elements (one compiled pass where Numba is
    there): the bits of the row's NumPy evaluation, inf/NaN/signed zeros included, and torch's
    values (to an ulp: torch's vectorised lerp fuses a multiply-add)."""
    from ember.kernels import elementwise
    from ember.kernels.pointwise.ops import evaluate
    rng = np.random.default_rng(3)
    n = elementwise.ONE_PASS_MIN_SIZE + 100
    a, b = (rng.standard_normal(n) * 10).astype(dtype), (rng.standard_normal(n) * 1e3).astype(dtype)
    w = (rng.random(n) * 1.5 - 0.25).astype(dtype)
    a[:5], b[:5], w[:5] = [np.nan, -0.0, np.inf, -np.inf, 1.0], [1, 0.0, np.inf, np.inf, -2.0], 0.7
    got = elementwise.lerp(a, b, w)
    assert got.tobytes() == evaluate("lerp", (), a, b, w).tobytes()
    want = torch.lerp(torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(w)).numpy()
    eps = float(np.finfo(dtype).eps)
    np.testing.assert_allclose(got, want, rtol=2 * eps, atol=1e4 * eps, equal_nan=True)   # |end| ~ 1e3


@pytest.fixture
def threaded(sync_compile, monkeypatch):
    """Two threads on Numba's TBB layer (else skip) and a spy on ``elementwise._threaded``:
    the list of whether each call ran the engine's threaded pass."""
    from ember.kernels import elementwise
    from ember.kernels.runtime import threads
    if threads.parallel_layer() != "tbb":
        pytest.skip("Numba's TBB threading layer is not available")
    before = ember.get_num_threads()
    ember.set_num_threads(2)
    ran = []
    real = elementwise._threaded

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        ran.append(out is not None)
        return out
    monkeypatch.setattr(elementwise, "_threaded", spy)
    yield ran
    ember.set_num_threads(before)


def _threaded_operands(dtype, shape, seed):
    """Values with NaN, infinities, signed zeros, subnormals and large magnitudes."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(int(np.prod(shape))) * 100).astype(dtype)
    tiny = np.finfo(dtype).tiny
    x[:8] = [np.nan, np.inf, -np.inf, 0.0, -0.0, tiny / 4, -tiny / 8, np.finfo(dtype).max]
    return x.reshape(shape)


ARITHMETIC = [("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
              ("div", np.true_divide)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shapes", [((600_000,), (600_000,)), ((1_200, 500), (500,)),
                                    ((500,), (1_200, 500))])
@pytest.mark.parametrize("name,ufunc", ARITHMETIC)
def test_large_arithmetic_runs_threaded_with_numpys_bits(threaded, name, ufunc, shapes, dtype):
    """add, sub, mul, div of large float arrays (one broadcast) run as the engine's pass on two
    threads and give the bits of NumPy's one-thread ufunc, special values included."""
    a, b = _threaded_operands(dtype, shapes[0], 1), _threaded_operands(dtype, shapes[1], 2)
    with np.errstate(all="ignore"):
        want = ufunc(a, b)
        got = getattr(ember, name)(ember.tensor(a), ember.tensor(b)).numpy()
    assert threaded == [True]
    assert got.shape == want.shape and got.flags.c_contiguous
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,ufunc", ARITHMETIC)
def test_large_arithmetic_with_a_python_number_runs_threaded_with_numpys_bits(threaded, name,
                                                                              ufunc, dtype):
    """An array and a Python float or int (either side; NumPy's weak scalar, rounded to the
    array's dtype: 0.1, a subnormal, an overflow, -0.0, NaN, 2^24) on two threads: NumPy's
    bits, the array's dtype; an int beyond 2^24 stays on the ufunc."""
    a = _threaded_operands(dtype, (700, 900), 6)
    numbers = [1.01, 0.1, 1e-40, 1e39, -0.0, float("nan"), 3, -(1 << 24)]
    for number in numbers:
        for operands in ((a, number), (number, a)):
            with np.errstate(all="ignore"):
                want = ufunc(*operands)
                got = getattr(ember, name)(*[ember.tensor(v) if isinstance(v, np.ndarray) else v
                                            for v in operands]).numpy()
            assert got.dtype == want.dtype == dtype and got.tobytes() == want.tobytes()
    ints_first = 2 if name == "div" else 0     # int / array converts both first: the ufunc
    assert threaded == [True] * (2 * len(numbers) - ints_first)
    threaded.clear()
    with np.errstate(all="ignore"):
        got = getattr(ember, name)(ember.tensor(a), (1 << 24) + 1).numpy()
        assert got.tobytes() == ufunc(a, (1 << 24) + 1).tobytes()
    assert not any(threaded)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,ufunc", ARITHMETIC)
def test_large_in_place_arithmetic_runs_threaded_with_numpys_bits(threaded, name, ufunc, dtype):
    """``x.add_(y)`` (and sub_, mul_, div_) without autograd, also of a broadcast operand and of
    x itself and of a Python number: written in place on two threads, NumPy's bits, the
    version bumped."""
    for shape_b, same in [((1000, 600), False), ((600,), False), (None, True), (0.9, False)]:
        a = _threaded_operands(dtype, (1000, 600), 3)
        b = a if same else shape_b if isinstance(shape_b, float) else \
            _threaded_operands(dtype, shape_b, 4)
        with np.errstate(all="ignore"):
            want = ufunc(a, b)
        x = ember.tensor(a.copy())
        address, version = x.data_ptr(), x._version
        with ember.no_grad():
            getattr(x, name + "_")(x if same else b if isinstance(b, float) else ember.tensor(b))
        assert x.data_ptr() == address and x._version == version + 1
        assert x.numpy().tobytes() == want.tobytes()
    assert threaded == [True] * 4


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_large_relu_runs_threaded_with_numpys_bits(threaded, dtype):
    """relu and relu_ of a large float array on two threads: NumPy's ``maximum(x, 0)`` bits (NaN
    kept, -0.0 -> 0.0), relu_ in x's memory; relu's gradient torch's."""
    a = _threaded_operands(dtype, (2, 64, 80, 80), 5)
    want = np.maximum(a, dtype(0))
    assert ember.relu(ember.tensor(a)).numpy().tobytes() == want.tobytes()
    x = ember.tensor(a.copy())
    address = x.data_ptr()
    with ember.no_grad():
        ember.relu_(x)
    assert x.data_ptr() == address and x.numpy().tobytes() == want.tobytes()
    assert threaded == [True, True]
    xg, xt = ember.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    ember.relu(xg).sum().backward()
    torch.relu(xt).sum().backward()     # NaN's gradient is 1, as torch's
    assert xg.grad.numpy().tobytes() == xt.grad.numpy().tobytes()


@pytest.mark.parametrize("n_threads", [1, 2])
def test_mid_size_relu_runs_compiled_with_numpys_bits(threaded, n_threads):
    """From RELU_COMPILED_MIN_SIZE elements relu runs the compiled loop even where the engine
    keeps it on one thread (NumPy's ``maximum`` is the slower loop), also at one thread set;
    below it, NumPy's ufunc. NumPy's bits either way."""
    from ember.kernels import elementwise
    ember.set_num_threads(n_threads)
    for n, compiled in [(elementwise.RELU_COMPILED_MIN_SIZE, True), (200_704, True),
                        (elementwise.RELU_COMPILED_MIN_SIZE - 1, False)]:
        a = _threaded_operands(np.float32, (n,), 7)
        want = np.maximum(a, np.float32(0))
        x = ember.tensor(a.copy())
        with ember.no_grad():
            ember.relu_(x)
        assert x.numpy().tobytes() == want.tobytes()
        assert ember.relu(ember.tensor(a)).numpy().tobytes() == want.tobytes()
        assert threaded[-2:] == [compiled, compiled] if compiled else not threaded[-2:]
        threaded.clear()


def test_threaded_pass_is_not_taken_where_numpy_runs(threaded):
    """One thread, an array below the threshold, float16, integers and a non-contiguous operand
    stay on NumPy's ufunc (and give its values)."""
    from ember.kernels import elementwise
    big = np.arange(600_000, dtype=np.float32)
    cases = [(big[:1000], big[:1000]), (big.astype(np.float16), big.astype(np.float16)),
             (big.astype(np.int64), big.astype(np.int64))]
    for a, b in cases:
        got = ember.add(ember.tensor(a), ember.tensor(b)).numpy()
        np.testing.assert_array_equal(got, np.add(a, b))
    t = ember.tensor(big.reshape(600, 1000)).t()
    got = (t + ember.tensor(big.reshape(1000, 600))).numpy()
    np.testing.assert_array_equal(got, big.reshape(600, 1000).T + big.reshape(1000, 600))
    ember.set_num_threads(1)
    assert elementwise.add(big, big).tobytes() == np.add(big, big).tobytes()
    assert not any(threaded)


CASES_SCALAR_PROMOTION = [
    lambda L, c, i, u: L.where(c, i, 2.5), lambda L, c, i, u: L.where(c, 2.5, i),
    lambda L, c, i, u: L.where(c, u, -1), lambda L, c, i, u: L.where(c, i, True),
    lambda L, c, i, u: L.where(c, c, 2), lambda L, c, i, u: L.where(c, 2, 2.5),
    lambda L, c, i, u: i.where(c, 2.5), lambda L, c, i, u: L.where(c, u, 300),
    lambda L, c, i, u: L.clamp(i, 0.5, 2.5), lambda L, c, i, u: L.clamp(i, min=2.5),
    lambda L, c, i, u: L.clamp(u, -1), lambda L, c, i, u: L.clamp(u, 0, 300),
    lambda L, c, i, u: L.clamp(i, max=L.tensor(2.5)), lambda L, c, i, u: L.clamp_min(i, 2.5),
    lambda L, c, i, u: L.clamp_max(i, 2.5), lambda L, c, i, u: i.clip(0.5, 2.5),
    lambda L, c, i, u: L.clamp(c, 0, 1), lambda L, c, i, u: i.clone().clamp_(0.5, 2.5),
    lambda L, c, i, u: L.clamp(i.int(), 0, 2 ** 40)]


@pytest.mark.parametrize("case", range(len(CASES_SCALAR_PROMOTION)))
def test_where_and_clamp_promote_with_a_python_scalar_as_torch(case):
    """An integer tensor with a float scalar gives the default float dtype (torch's
    result_type), and the scalar is range-checked into the result's dtype."""
    out = {}
    for name, L in (("ember", ember), ("torch", torch)):
        c, i = L.tensor([True, False]), L.tensor([1, 5])
        try:
            r = CASES_SCALAR_PROMOTION[case](L, c, i, i.to(L.uint8))
            out[name] = (str(r.dtype).split(".")[-1], r.tolist())
        except RuntimeError:
            out[name] = "error"
    assert out["ember"] == out["torch"]


def test_negating_a_bool_tensor_raises_torchs_words():
    for m in (torch, ember):
        with pytest.raises(RuntimeError, match=r"Negation, the `-` operator, on a bool tensor is "
                                               r"not supported. If you are trying to invert a "
                                               r"mask, use the `~` or `logical_not\(\)`"):
            -m.tensor([True, False])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_remainder_signed_zero_matches_torch_bit_for_bit(dtype):
    """A zero remainder has the dividend's sign, as torch (fmod, then + divisor where the signs
    differ); NumPy gives it the divisor's. Tensors, Python scalars on either side, ``%``."""
    vals = [0.0, -0.0, 3.0, -3.0, 4.0, -4.0, 2.0, -2.0, 1.5, -1.5, float("inf"), -7.0]
    a = [x for x in vals for _ in vals]
    b = [y for _ in vals for y in vals]

    def bits(t):   # values and signs; a NaN's sign bit is not compared
        v = t.numpy()
        return (np.signbit(v) & ~np.isnan(v)).tolist(), np.nan_to_num(v, nan=123.0).tolist()
    for lib in (ember, torch):
        d = getattr(lib, dtype)
        got = bits(lib.remainder(lib.tensor(a, dtype=d), lib.tensor(b, dtype=d)))
        scal = [bits(lib.tensor([x], dtype=d) % y) for x, y in zip(a, b)]
        rscal = [bits(x % lib.tensor([y], dtype=d)) for x, y in zip(a, b)]
        if lib is ember:
            ours = (got, scal, rscal)
    assert ours == (got, scal, rscal)
    assert np.signbit(ember.remainder(ember.tensor([-0.0], dtype=getattr(ember, dtype)), 2.0).numpy())[0]
    assert not np.signbit((ember.tensor([0.0], dtype=getattr(ember, dtype)) % -3).numpy())[0]


BITWISE_ON_FLOAT = {
    "&": lambda m, x: x & x, "|": lambda m, x: x | x, "^": lambda m, x: x ^ x,
    "<<": lambda m, x: x << x, ">>": lambda m, x: x >> x, "int & float": lambda m, x: m.tensor([1]) & x,
    "& scalar": lambda m, x: x & 1, "int << 1.5": lambda m, x: m.tensor([1]) << 1.5,
    "bitwise_and": lambda m, x: m.bitwise_and(x, x), "bitwise_or": lambda m, x: m.bitwise_or(x, x),
    "bitwise_xor": lambda m, x: m.bitwise_xor(x, x), "bitwise_not": lambda m, x: m.bitwise_not(x),
    "bitwise_left_shift": lambda m, x: m.bitwise_left_shift(x, x),
    "bitwise_right_shift": lambda m, x: m.bitwise_right_shift(x, x),
    "&=": lambda m, x: x.clone().__iand__(x), "float64 ^": lambda m, x: x.double() ^ x.double(),
    "float16 |": lambda m, x: x.half() | x.half(), "complex64 &": lambda m, x: x.cfloat() & x.cfloat(),
    "bool << bool": lambda m, x: m.tensor([True]) << m.tensor([True]),
}


@pytest.mark.parametrize("case", sorted(BITWISE_ON_FLOAT))
def test_bitwise_ops_on_floats_raise_torchs_not_implemented_error(case):
    with pytest.raises(NotImplementedError) as want:
        BITWISE_ON_FLOAT[case](torch, torch.tensor([1.0]))
    with pytest.raises(NotImplementedError) as got:
        BITWISE_ON_FLOAT[case](ember, ember.tensor([1.0]))
    assert str(want.value) in str(got.value)


@pytest.mark.parametrize("name, params, torch_fn", [
    ("sigmoid", (), lambda t: torch.sigmoid(t)),
    ("silu", (), lambda t: torch.nn.functional.silu(t)),
    ("leaky_relu", (0.02,), lambda t: torch.nn.functional.leaky_relu(t, 0.02)),
    ("elu", (1.5,), lambda t: torch.nn.functional.elu(t, 1.5)),
    ("softplus", (2.0, 10.0), lambda t: torch.nn.functional.softplus(t, 2.0, 10.0))])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_unary_rows_take_one_pass_from_the_one_pass_size(sync_compile, name, params, torch_fn,
                                                         dtype):
    """The unary rows' eager kernels (``_unary_row``) run one compiled pass (``kept_pass``,
    keyed by the row and its constants) from ONE_PASS_MIN_SIZE elements, their NumPy
    evaluation below (and on a process's first call): values as torch's either way."""
    from ember.kernels import elementwise
    calls = []
    real = elementwise.kept_pass
    spy = lambda *a: calls.append(a[0]) or real(*a)   # noqa: E731
    kernel = getattr(elementwise, name)
    kernel(np.ones(3, dtype), *params)     # a process's first call imports the engine
    tol = 2e-6 if dtype == "float32" else 1e-13
    with pytest.MonkeyPatch.context() as m:
        m.setattr(elementwise, "kept_pass", spy)
        for n in (elementwise.ONE_PASS_MIN_SIZE, elementwise.ONE_PASS_MIN_SIZE - 1):
            x = (np.random.default_rng(n).standard_normal(n) * 6).astype(dtype)
            x[:4] = [0.0, -0.0, 40.0, -40.0]
            got = kernel(x, *params)
            assert got.dtype == x.dtype and got.shape == x.shape
            want = torch_fn(torch.from_numpy(x)).numpy()
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    assert calls == [(name,) + params]



@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("exponent", [3, 3.0, -2, -2.0, -0.5, 2.0, -1.0])
def test_pow_by_multiplying_has_torch_bits(exponent, dtype):
    """pow of a float tensor to 3, -2 or -0.5 multiplies as torch's kernel does: its bits (glibc's
    powf differs in the last bit for about a third of these), zeros, infinities and NaN
    included; the backward too."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(4099) * 3).astype(dtype)
    x[:5] = [0.0, -0.0, np.inf, -np.inf, np.nan]
    g = rng.standard_normal(4099).astype(dtype)
    tx, ex = torch.tensor(x, requires_grad=True), ember.tensor(x, requires_grad=True)
    want, got = torch.pow(tx, exponent), ember.pow(ex, exponent)
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    want.backward(torch.tensor(g))
    got.backward(ember.tensor(g))
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), equal_nan=True,
                               rtol=1e-6 if dtype == "float32" else 1e-13)
    for v in (x[5], np.array(0.0, dtype), np.array(-2.5, dtype)):    # 0-d tensors too
        got, want = ember.pow(ember.tensor(v), exponent), torch.pow(torch.tensor(v), exponent)
        assert got.shape == () and got.dtype == ember.tensor(v).dtype
        np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("bounds", [(0.0, 1.0), (-0.0, 0.0), (0.0, -0.0), (0.0, None),
                                    (-0.0, None), (None, 0.0), (None, -0.0), (2.0, 1.0),
                                    (float("nan"), 1.0), (-1.0, float("nan"))])
def test_clamp_has_torch_bits_on_signed_zeros_nan_and_crossed_bounds(bounds, dtype):
    """clamp of floats keeps a zero's sign where it equals a bound and NaN where torch does
    (np.maximum / np.minimum returned the bound's zero)."""
    x = np.array([-0.0, 0.0, np.nan, np.inf, -np.inf, -1.5, 1.5, 0.5, -2.0], dtype)
    lo, hi = bounds
    want = torch.clamp(torch.tensor(x), lo, hi).numpy()
    got = ember.clamp(ember.tensor(x), lo, hi).numpy()
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.view(f"i{got.itemsize}"), want.view(f"i{want.itemsize}"))
