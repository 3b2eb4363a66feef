"""Every vocabulary op through the compiled kernel and the NumPy path, against torch."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from ember.kernels.pointwise import OPS, Expr, compile_pointwise, has_compiler

pytestmark = pytest.mark.skipif(not has_compiler(), reason="numba not importable")

# (op, operands, params, torch reference); operands name the inputs a, b, c (c only for 3 operands).
CASES = [
    ("add", "ab", (), torch.add), ("sub", "ab", (), torch.sub), ("mul", "ab", (), torch.mul),
    ("div", "ab", (), torch.div), ("floor_divide", "ab", (), torch.floor_divide),
    ("remainder", "ab", (), torch.remainder), ("pow", "ab", (), torch.pow),
    ("maximum", "ab", (), torch.maximum), ("minimum", "ab", (), torch.minimum),
    ("neg", "a", (), torch.neg), ("abs", "a", (), torch.abs), ("sign", "a", (), torch.sign),
    ("reciprocal", "a", (), torch.reciprocal), ("exp", "a", (), torch.exp), ("exp2", "a", (), torch.exp2),
    ("expm1", "a", (), torch.expm1), ("log", "a", (), torch.log), ("log2", "a", (), torch.log2),
    ("log1p", "a", (), torch.log1p), ("sqrt", "a", (), torch.sqrt), ("rsqrt", "a", (), torch.rsqrt),
    ("sin", "a", (), torch.sin), ("cos", "a", (), torch.cos), ("tan", "a", (), torch.tan),
    ("tanh", "a", (), torch.tanh), ("erf", "a", (), torch.erf), ("sigmoid", "a", (), torch.sigmoid),
    ("silu", "a", (), F.silu), ("relu", "a", (), torch.relu),
    ("leaky_relu", "a", (0.2,), lambda x: F.leaky_relu(x, 0.2)),
    ("elu", "a", (1.5,), lambda x: F.elu(x, 1.5)), ("selu", "a", (), F.selu),
    ("gelu", "a", (), F.gelu), ("gelu", "a", ("tanh",), lambda x: F.gelu(x, approximate="tanh")),
    ("softplus", "a", (2.0, 5.0), lambda x: F.softplus(x, 2.0, 5.0)),
    ("hardtanh", "a", (-0.5, 0.7), lambda x: F.hardtanh(x, -0.5, 0.7)),
    ("hardshrink", "a", (0.5,), lambda x: F.hardshrink(x, 0.5)),
    ("clamp", "abc", (), torch.clamp), ("where", "cab", (), lambda c, a, b: torch.where(c.bool(), a, b)),
    ("lerp", "abc", (), torch.lerp),
    ("floor", "a", (), torch.floor), ("ceil", "a", (), torch.ceil), ("trunc", "a", (), torch.trunc),
    ("round", "a", (), torch.round),
    ("eq", "ab", (), torch.eq), ("ne", "ab", (), torch.ne), ("lt", "ab", (), torch.lt),
    ("le", "ab", (), torch.le), ("gt", "ab", (), torch.gt), ("ge", "ab", (), torch.ge),
    ("logical_and", "ab", (), torch.logical_and), ("logical_or", "ab", (), torch.logical_or),
    ("logical_xor", "ab", (), torch.logical_xor), ("logical_not", "a", (), torch.logical_not),
    ("isnan", "a", (), torch.isnan), ("isinf", "a", (), torch.isinf), ("isfinite", "a", (), torch.isfinite),
    ("cast", "a", ("float16",), lambda x: x.to(torch.float16)),
    ("cast", "a", ("int32",), lambda x: x.to(torch.int32)),
    ("cast", "a", ("float64",), lambda x: x.to(torch.float64)),
    ("cast", "a", ("bool",), lambda x: x.to(torch.bool)),
    ("xlogy", "ab", (), torch.xlogy), ("special_xlog1py", "ab", (), torch.special.xlog1py),
    ("erfc", "a", (), torch.erfc), ("acosh", "a", (), torch.acosh), ("asinh", "a", (), torch.asinh),
    ("atanh", "a", (), torch.atanh), ("hypot", "ab", (), torch.hypot),
    ("copysign", "ab", (), torch.copysign),
]
DTYPES = ["float32", "float64", "float16", "int64", "int32", "int8", "uint8", "bool"]
N = 257


def test_every_op_has_a_case():
    assert {op for op, *_ in CASES} == set(OPS)


def _inputs(dtype, rng):
    dt = np.dtype(dtype)
    if dt.kind == "f":
        a = rng.uniform(-3, 3, N)
        a[:6] = [0.0, -0.0, np.inf, -np.inf, np.nan, 2.5]
        b = rng.uniform(-3, 3, N)
        b[:6] = [1.5, -2.0, 2.0, np.nan, 1.0, 0.5]
        c = rng.uniform(0, 1, N)
    elif dt.kind == "b":
        a, b, c = (rng.integers(0, 2, N) for _ in range(3))
    else:
        lo = 0 if dt.kind == "u" else -5
        a = rng.integers(lo, 6, N)
        b = rng.integers(1, 4, N)  # nonzero divisors, small exponents
        c = rng.integers(lo, 6, N)
    return {k: v.astype(dt) for k, v in zip("abc", (a, b, c))}


def _torch_ref(fn, names, arrays):
    try:
        return fn(*(torch.from_numpy(arrays[n].copy()) for n in names)).numpy()
    except (RuntimeError, TypeError, NotImplementedError):
        return None  # torch does not define the op for this dtype


# Integer and bool operands of float ops are converted to float32 first, after which the generated
# code is float32's; int32 runs all of them, the other integer dtypes these representatives.
FLOAT_REPRESENTATIVES = {"div", "sigmoid", "sqrt", "lerp"}


def _build(dtype):
    """One expression computing case k where ``sel == k``, as float64, and the cases kept.

    Selecting with ``where`` keeps the kernel to one output: Numba's compile time grows fast with
    the number of output arrays, and every op still runs through the generated code."""
    steps, kept = [], []
    for i, (op, names, params, ref) in enumerate(CASES):
        if (dtype in ("int64", "int8", "uint8", "bool") and OPS[op].kind == "float"
                and op not in FLOAT_REPRESENTATIVES):
            continue
        expr = Expr(tuple(names), [("r", op, tuple(names) + params)], ("r",))
        try:
            compile_pointwise(expr, [dtype] * len(names))
        except TypeError:
            continue
        k = len(kept)
        steps += [(f"v{k}", op, tuple(names) + params), (f"f{k}", "cast", (f"v{k}", "float64")),
                  (f"m{k}", "eq", ("sel", k))]
        steps.append((f"acc{k}", "where", (f"m{k}", f"f{k}", f"acc{k - 1}" if k else np.nan)))
        kept.append((f"v{k}", op, names, params, ref))
    return Expr(("a", "b", "c", "sel"), steps, (f"acc{len(kept) - 1}",)), kept


def _tolerance(dtype, op):
    if dtype == "float16" or op == "cast":
        return dict(rtol=2e-3, atol=2e-3)
    if dtype != "float64":
        return dict(rtol=2e-6, atol=1e-6)
    return dict(rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
def test_ops_match_torch(dtype):
    rng = np.random.default_rng(0)
    arrays = _inputs(dtype, rng)
    expr, kept = _build(dtype)
    kernel = compile_pointwise(expr, [dtype] * 3 + [np.int64])
    tiled = [np.tile(arrays[n], len(kept)) for n in "abc"]
    sel = np.repeat(np.arange(len(kept)), N)
    (compiled,) = kernel(*tiled, sel, backend="numba")
    (fallback,) = kernel(*tiled, sel, backend="numpy")
    checked = 0
    for k, (name, op, names, params, ref) in enumerate(kept):
        got, got_np = compiled[k * N:(k + 1) * N], fallback[k * N:(k + 1) * N]
        tol = _tolerance(dtype, op)
        np.testing.assert_allclose(got, got_np, equal_nan=True, err_msg=f"{op}{params} numba vs numpy on {dtype}",
                                   **tol)
        expected = _torch_ref(ref, names, arrays)
        if expected is None:
            continue
        assert kernel.typing.values[name] == expected.dtype, (op, params, kernel.typing.values[name], expected.dtype)
        keep = slice(None)
        if op == "cast" and params[0] not in ("float64", "float16") and dtype.startswith("float"):
            keep = np.isfinite(arrays["a"])  # casting inf/nan to ints is undefined
        if op == "gelu" and dtype.startswith("float"):
            keep = np.isfinite(arrays["a"])  # torch's vectorised gelu gives nan at +inf, ember inf
        np.testing.assert_allclose(got[keep], expected.astype(np.float64)[keep], equal_nan=True,
                                   err_msg=f"{op}{params} on {dtype}", **tol)
        checked += 1
    assert checked >= 15


@pytest.mark.parametrize("op", ["sub", "neg", "pow", "floor_divide", "remainder", "clamp", "hardtanh"])
def test_bool_operands_rejected_like_torch(op):
    arity = OPS[op].arity
    names = tuple("abc"[:arity])
    params = (-1.0, 1.0) if op == "hardtanh" else ()
    with pytest.raises(TypeError, match=op):
        compile_pointwise(Expr(names, [("r", op, names + params)], ("r",)), [np.bool_] * arity)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_remainder_zero_keeps_the_sign_of_the_dividend_as_torch(dtype):
    """torch's remainder is fmod plus the divisor where the signs differ: a zero result keeps
    the dividend's sign (0 % -3 is 0.0, -0.0 % 2 and -4 % 2 are -0.0); NumPy's takes the
    divisor's. Both back ends, bit for bit."""
    a = np.array([0.0, -0.0, -4.0, 4.0, 0.0, -0.0, 3.0, -1.5], dtype)
    b = np.array([-3.0, 2.0, 2.0, -2.0, 3.0, -2.0, -1.5, 1.5], dtype)
    want = torch.remainder(torch.from_numpy(a), torch.from_numpy(b)).numpy()
    expr = Expr(("a", "b"), [("r", "remainder", ("a", "b"))], ("r",))
    got = compile_pointwise(expr, [dtype, dtype])(a, b)
    got = got[0] if isinstance(got, (tuple, list)) else got
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    out = np.empty_like(a)
    OPS["remainder"].numpy(out, (), a, b)
    np.testing.assert_array_equal(np.signbit(out), np.signbit(want))
    np.testing.assert_array_equal(out, want)
