"""Complex tensors (complex64, complex128) against torch: dtypes, creation, promotion, the
elementwise ops that take them, real/imag/conj/angle/abs/view_as_real/view_as_complex/complex/
polar, gradients by torch's convention (``.grad`` is dL/d(conj z)), and the errors for what is
not supported (docs/complex.md)."""
import itertools
import warnings

import numpy as np
import pytest

import ember
from ember.errors import EmberError
from ember.kernels import dtypes as KD
from ember.kernels.pointwise import promotion as PP

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
NAMES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64",
         "complex64", "complex128")


def _z(shape, dtype=np.complex128, rng=RNG):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def _t(x):
    """A torch tensor's values as an ndarray (conjugate and negative bits resolved)."""
    return x.detach().resolve_conj().resolve_neg().numpy()


def _same(e, t, tol=1e-6):
    t = _t(t) if isinstance(t, torch.Tensor) else np.asarray(t)
    e = e._data if isinstance(e, ember.Tensor) else np.asarray(e)
    assert e.dtype == t.dtype, (e.dtype, t.dtype)
    assert e.shape == t.shape, (e.shape, t.shape)
    np.testing.assert_allclose(e, t, rtol=tol, atol=tol, equal_nan=True)


# ---------------------------------------------------------------- dtypes and creation
def test_dtypes_and_aliases():
    assert ember.cfloat is ember.complex64 and ember.cdouble is ember.complex128
    for d in (ember.complex64, ember.complex128):
        assert d.is_complex and not d.is_floating_point and d.is_signed
    assert not ember.float32.is_complex
    assert ember.complex64.itemsize == 8 and ember.complex128.itemsize == 16
    z = ember.tensor([1 + 2j])
    assert z.is_complex() and ember.is_complex(z) and not z.is_floating_point()
    assert not ember.ones(2).is_complex()


def test_dtype_conversions_and_cast_methods():
    assert ember.float32.to_complex() is ember.complex64
    assert ember.float64.to_complex() is ember.complex128
    assert ember.complex64.to_complex() is ember.complex64
    assert ember.complex128.to_real() is ember.float64 and ember.int64.to_real() is ember.int64
    with pytest.raises(EmberError, match="to_complex"):
        ember.int64.to_complex()
    x = ember.tensor([1.5, -2.0])
    _same(x.cfloat(), torch.tensor([1.5, -2.0]).cfloat())
    _same(x.cdouble(), torch.tensor([1.5, -2.0]).cdouble())
    assert not x.cfloat().conj().is_conj()


def test_creation():
    assert ember.tensor([1 + 2j, 3]).dtype is ember.complex64
    assert ember.tensor(1j).dtype is ember.complex64
    assert ember.tensor([1j], dtype=ember.complex128).dtype is ember.complex128
    assert ember.tensor(np.array([1j])).dtype is ember.complex128  # a typed array keeps its dtype
    prev = ember.get_default_dtype()
    ember.set_default_dtype(ember.float64)
    try:
        assert ember.tensor([1j]).dtype is ember.complex128
        assert ember.full((2,), 1j).dtype is ember.complex128
    finally:
        ember.set_default_dtype(prev)
    a = _z((2, 3), np.complex64)
    f = ember.from_numpy(a)
    assert f.dtype is ember.complex64 and np.shares_memory(f._data, a)
    assert ember.as_tensor(a)._data is a
    for fn in (ember.zeros, ember.ones):
        for d in (ember.complex64, ember.complex128):
            want = getattr(torch, fn.__name__)(2, 3, dtype=getattr(torch, d.name))
            _same(fn(2, 3, dtype=d), want)
    _same(ember.full((2,), 1 + 1j), torch.full((2,), 1 + 1j))
    _same(ember.zeros_like(ember.tensor([1j])), torch.zeros_like(torch.tensor([1j])))
    ember.manual_seed(0)
    r = ember.randn(20000, dtype=ember.complex64)
    assert r.dtype is ember.complex64
    # as torch: real and imaginary parts independent, each of variance 1/2
    assert abs(float(r.real.var()) - 0.5) < 0.03 and abs(float(r.imag.var()) - 0.5) < 0.03
    assert abs(float((r.abs() ** 2).mean()) - 1.0) < 0.05


@pytest.mark.parametrize("values,dtype", [([1 + 2j, 3 - 1j], None), ([1j], None),
                                          ([1 + 2j], "complex128")])
def test_repr_like_torch(values, dtype):
    e = ember.tensor(values, dtype=None if dtype is None else getattr(ember, dtype))
    t = torch.tensor(values, dtype=None if dtype is None else getattr(torch, dtype))
    assert repr(e) == repr(t).replace("torch.", "ember.")


# ---------------------------------------------------------------- promotion
def test_promote_types_matches_torch():
    for a, b in itertools.product(NAMES, NAMES):
        want = str(torch.promote_types(getattr(torch, a), getattr(torch, b))).replace("torch.", "")
        got = PP.promote_types(np.dtype(a if a != "bool" else np.bool_),
                               np.dtype(b if b != "bool" else np.bool_))
        assert str(got).replace("bool", "bool") == want, (a, b, got, want)


def _operand(name, kind):
    np_d = np.dtype(np.bool_ if name == "bool" else name)
    return np.ones((2,) if kind == "dim" else (), np_d)


@pytest.mark.parametrize("kinds", [("dim", "dim"), ("dim", "zero"), ("zero", "dim"),
                                   ("zero", "zero")])
def test_result_type_matches_torch(kinds):
    for a, b in itertools.product(NAMES, NAMES):
        if kinds[0] != kinds[1] and {a, b} in ({"float16", "complex64"},
                                               {"float16", "complex128"}):
            continue  # torch gives complex32, which ember does not have (complex64 instead)
        x, y = _operand(a, kinds[0]), _operand(b, kinds[1])
        want = torch.result_type(torch.from_numpy(x), torch.from_numpy(y))
        got = KD.result_type(x, y)
        assert str(got) == str(want).replace("torch.", ""), (a, b, kinds, got, want)


@pytest.mark.parametrize("scalar", [True, 2, 2.5, 1j])
def test_result_type_with_python_scalars(scalar):
    for a in NAMES:
        if a == "float16" and isinstance(scalar, complex):
            continue  # torch gives complex32, which ember does not have
        x = _operand(a, "dim")
        want = torch.result_type(torch.from_numpy(x), scalar)
        assert str(KD.result_type(x, scalar)) == str(want).replace("torch.", ""), (a, scalar)


@pytest.mark.parametrize("a,b", [("float64", "complex64"), ("float32", "complex128"),
                                 ("int64", "complex64"), ("complex64", "float64")])
def test_binary_ops_promote_like_torch(a, b):
    x, y = np.ones(3, a), np.ones(3, b) * (1 + 1j if b.startswith("complex") else 1)
    for op in ("add", "mul", "sub", "div"):
        e = getattr(ember, op)(ember.from_numpy(x), ember.from_numpy(y))
        t = getattr(torch, op)(torch.from_numpy(x), torch.from_numpy(y))
        _same(e, t)
    _same(ember.from_numpy(x) + 1j, torch.from_numpy(x) + 1j)
    _same(ember.from_numpy(x) * (2 - 1j), torch.from_numpy(x) * (2 - 1j))


# ---------------------------------------------------------------- elementwise forward
UNARY = ["exp", "log", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh", "sigmoid", "expm1", "log1p",
         "neg", "reciprocal", "sinh", "cosh", "asin", "acos", "atan", "abs", "angle", "real",
         "conj", "conj_physical", "isnan", "isinf", "isfinite", "square", "sgn", "asinh", "acosh",
         "atanh", "exp2", "log2", "log10"]


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("name", UNARY)
def test_unary_forward(name, dtype):
    z = _z((3, 4), dtype)
    z[0, 0] = np.nan + 1j
    z[0, 1] = 1j * np.inf
    tol = 1e-5 if dtype == "complex64" else 1e-10
    _same(getattr(ember, name)(ember.tensor(z)), getattr(torch, name)(torch.tensor(z)), tol)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow", "eq", "ne"])
def test_binary_forward(name, dtype):
    a, b = _z((3, 4), dtype), _z((4,), dtype)
    b[0] = a[0, 0]
    tol = 1e-5 if dtype == "complex64" else 1e-10
    _same(getattr(ember, name)(ember.tensor(a), ember.tensor(b)),
          getattr(torch, name)(torch.tensor(a), torch.tensor(b)), tol)
    _same(getattr(ember, name)(ember.tensor(a), 2.5), getattr(torch, name)(torch.tensor(a), 2.5),
          tol)


def test_silu_forward_only_as_torch():
    z = _z((3, 4))
    _same(ember.nn.functional.silu(ember.tensor(z)), torch.nn.functional.silu(torch.tensor(z)))
    with pytest.raises(EmberError, match="autograd of silu on complex tensors"):
        ember.nn.functional.silu(ember.tensor(z, requires_grad=True))


def test_where_sum_mean_matmul_cast():
    a, b = _z((3, 4)), _z((4, 2))
    ea, ta = ember.tensor(a), torch.tensor(a)
    _same(ember.where(ember.tensor(a.real > 0), ea, 0.0),
          torch.where(torch.tensor(a.real > 0), ta, 0.0))
    _same(ea.sum(1), ta.sum(1))
    _same(ea.mean(), ta.mean())
    _same(ea @ ember.tensor(b), ta @ torch.tensor(b))
    _same(ea.to(ember.complex64), ta.to(torch.complex64))
    _same(ember.tensor([1.0, 2.0]).to(ember.complex128),
          torch.tensor([1.0, 2.0]).to(torch.complex128))
    # complex to real keeps the real part (torch warns; NumPy's ComplexWarning is not raised)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _same(ea.to(ember.float64), ta.real.to(torch.float64))


# ---------------------------------------------------------------- parts and views
def test_real_imag_are_views_and_assignable():
    z = ember.tensor([1 + 2j, 3 - 1j])
    assert np.shares_memory(z.real._data, z._data) and np.shares_memory(z.imag._data, z._data)
    assert z.real.dtype is ember.float32 and ember.imag(z).dtype is ember.float32
    z.real = ember.tensor([5.0, 6.0])
    z.imag[0] = 9.0
    _same(z, np.array([5 + 9j, 6 - 1j], np.complex64))
    z.imag = 0.5
    _same(z, np.array([5 + 0.5j, 6 + 0.5j], np.complex64))
    x = ember.ones(2)
    assert np.shares_memory(x.real._data, x._data) and ember.conj(x)._data.base is x._data
    with pytest.raises(EmberError, match="imag"):
        x.imag


def test_view_as_real_and_complex():
    z = _z((2, 3), np.complex64)
    r = ember.view_as_real(ember.tensor(z))
    _same(r, torch.view_as_real(torch.tensor(z)))
    _same(ember.view_as_real(ember.tensor(z)[:, ::2]), torch.view_as_real(torch.tensor(z)[:, ::2]))
    back = ember.view_as_complex(r)
    assert np.shares_memory(back._data, r._data)
    _same(back, z)
    with pytest.raises(EmberError, match="view_as_complex.*last dimension"):
        ember.view_as_complex(ember.ones(3, 3))
    with pytest.raises(EmberError, match="view_as_complex.*stride 1"):
        ember.view_as_complex(ember.ones(2, 4)[:, ::2])
    with pytest.raises(EmberError, match="view_as_real"):
        ember.view_as_real(ember.ones(3))


def test_complex_and_polar():
    a, b = RNG.standard_normal((3, 4)), RNG.standard_normal(4)
    for dt in (np.float32, np.float64):
        _same(ember.complex(ember.tensor(a.astype(dt)), ember.tensor(b.astype(dt))),
              torch.complex(torch.tensor(a.astype(dt)), torch.tensor(b.astype(dt))))
        _same(ember.polar(ember.tensor(np.abs(a).astype(dt)), ember.tensor(b.astype(dt))),
              torch.polar(torch.tensor(np.abs(a).astype(dt)), torch.tensor(b.astype(dt))), 1e-6)
    with pytest.raises(EmberError, match="complex"):
        ember.complex(ember.ones(2), ember.ones(2, dtype=ember.float64))


def test_abs_angle_give_real_dtypes():
    z = ember.tensor([1 + 1j, -2j])
    assert z.abs().dtype is ember.float32 and ember.angle(z).dtype is ember.float32
    z = ember.tensor([1 + 1j], dtype=ember.complex128)
    assert z.abs().dtype is ember.float64 and z.angle().dtype is ember.float64


# ---------------------------------------------------------------- gradients
def _loss(y, a, b, lib):
    real = (lambda v: v.real) if lib is torch else ember.real
    imag = (lambda v: v.imag) if lib is torch else ember.imag
    if y.is_complex():
        return (real(y) * lib.tensor(a) + imag(y) * lib.tensor(b)).sum()
    return (y * lib.tensor(a)).sum()


def check_grad(fe, ft, x, tol=1e-8):
    """Compare the input gradient of a real loss of ``fe(x)`` with torch's."""
    rng = np.random.default_rng(1)
    xe, xt = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ye, yt = fe(xe), ft(xt)
    a, b = rng.standard_normal(tuple(yt.shape)), rng.standard_normal(tuple(yt.shape))
    _loss(ye, a, b, ember).backward()
    _loss(yt, a, b, torch).backward()
    _same(xe.grad, xt.grad, tol)


Z = _z((3, 4))
Z2 = _z((3, 4))


@pytest.mark.parametrize("name", [n for n in UNARY if n not in ("isnan", "isinf", "isfinite")]
                         + ["imag", "view_as_real", "sum", "mean"])
def test_unary_grad(name):
    check_grad(getattr(ember, name), getattr(torch, name), Z)


@pytest.mark.parametrize("case", [
    ("mul", lambda L, v: v * L.tensor(Z2)),
    ("div", lambda L, v: L.tensor(Z2) / v),
    ("pow_int", lambda L, v: v ** 3),
    ("pow_complex", lambda L, v: v ** L.tensor(Z2)),
    ("rpow", lambda L, v: L.tensor(Z2) ** v),
    ("matmul", lambda L, v: v @ L.tensor(Z2.T.copy())),
    ("getitem", lambda L, v: v[1:, ::2]),
    ("reshape_t", lambda L, v: v.reshape(4, 3).t()),
    ("cat", lambda L, v: L.cat([v, v * 2], 0)),
    ("stack_sum", lambda L, v: L.stack([v, v.exp()]).sum(0)),
    ("abs_squared", lambda L, v: v.abs() ** 2),
    ("where", lambda L, v: L.where(L.tensor(Z2.real > 0), v, v * v)),
    ("chain", lambda L, v: (v.sin() * v.conj()).exp() / (1 + v.abs())),
    ("sub_alpha", lambda L, v: L.sub(v, L.tensor(Z2), alpha=2)),
    ("mean_dim", lambda L, v: v.mean(0, keepdim=True) * v),
    ("linear", lambda L, v: L.nn.functional.linear(v, L.tensor(Z2[:2]), L.tensor(Z2[2, :2]))),
    ("einsum", lambda L, v: L.einsum("ij,kj->ik", v, L.tensor(Z2))),
    ("cumsum", lambda L, v: v.cumsum(1)),
    ("addmm", lambda L, v: L.addmm(L.tensor(Z2[:, :3]), v, L.tensor(Z2.T[:, :3].copy()))),
    ("gather", lambda L, v: L.gather(v, 1, L.tensor([[0, 1], [2, 3], [1, 1]]))),
    ("roll_flip", lambda L, v: L.flip(L.roll(v, 1, 0), (1,))),
    ("tril_diagonal", lambda L, v: L.tril(v) + L.diagonal(v).sum()),
    ("masked_fill", lambda L, v: v.masked_fill(L.tensor(Z2.real > 0), 0.0)),
    ("pad", lambda L, v: L.nn.functional.pad(v, (1, 2))),
    ("mH", lambda L, v: v.mH @ v),
    ("scatter_add", lambda L, v: L.zeros(3, 4, dtype=L.complex128).scatter_add(
        1, L.tensor([[0, 1, 0, 1]] * 3), v)),
], ids=lambda c: c[0])
def test_complex_input_grad(case):
    _, fn = case
    check_grad(lambda v: fn(ember, v), lambda v: fn(torch, v), Z)


X = RNG.standard_normal((3, 4))


@pytest.mark.parametrize("case", [
    ("real_times_complex", lambda L, v: v * L.tensor(Z)),
    ("to_complex", lambda L, v: v.to(L.complex128) * L.tensor(Z)),
    ("plus_1j", lambda L, v: v + 1j),
    ("complex", lambda L, v: L.complex(v, v * v)),
    ("polar", lambda L, v: L.polar(v.abs() + 0.1, v)),
    ("view_as_complex", lambda L, v: L.view_as_complex(v.reshape(6, 2))),
], ids=lambda c: c[0])
def test_real_input_grad(case):
    _, fn = case
    check_grad(lambda v: fn(ember, v), lambda v: fn(torch, v), X)


def test_abs_squared_grad_is_two_z():
    z = ember.tensor(Z, requires_grad=True)
    (z.abs() ** 2).sum().backward()
    _same(z.grad, 2 * Z)


def test_double_backward_through_complex():
    def f(L, v, g):
        y = (v * v * v).sum()
        (gz,) = g(y.abs(), v)
        return (gz.abs() ** 2).sum()
    ze, zt = ember.tensor(Z, requires_grad=True), torch.tensor(Z, requires_grad=True)
    le = f(ember, ze, lambda o, i: ember.autograd.grad(o, [i], create_graph=True))
    lt = f(torch, zt, lambda o, i: torch.autograd.grad(o, [i], create_graph=True))
    le.backward()
    lt.backward()
    _same(ze.grad, zt.grad, 1e-7)


# ---------------------------------------------------------------- what raises
@pytest.mark.parametrize("call,name", [
    (lambda z: z > 0, "gt"), (lambda z: z <= z, "le"), (lambda z: ember.relu(z), "relu"),
    (lambda z: ember.maximum(z, z), "maximum"), (lambda z: ember.floor(z), "floor"),
    (lambda z: ember.clamp(z, 0, 1), "clamp"), (lambda z: ember.sign(z), "sign"),
    (lambda z: ember.sort(z).values, "sort"),
])
def test_unsupported_ops_raise_naming_the_op(call, name):
    z = ember.tensor(_z((3,), np.complex64))
    with pytest.raises(EmberError, match=f"{name}.*complex"):
        call(z)


def test_python_scalars():
    z = ember.tensor(1 + 2j)
    assert complex(z) == 1 + 2j and z.item() == 1 + 2j and bool(z)
    assert ember.tensor([1j, 2]).tolist() == [1j, 2 + 0j]
    for cast in (float, int):
        with pytest.raises(EmberError, match=f"{cast.__name__}: a complex value"):
            cast(z)


def test_unsupported_autograd_raises_at_forward():
    z = ember.tensor(Z, requires_grad=True)
    with pytest.raises(EmberError, match="autograd of var on complex tensors is not supported"):
        ember.var(z)
    with ember.no_grad():
        _same(ember.var(z), torch.var(torch.tensor(Z)))  # no graph, no error
    with pytest.raises(EmberError, match="imag.*non-complex"):
        ember.imag(ember.ones(2))


def test_real_paths_unchanged():
    x = ember.tensor([[1.0, -2.0]], requires_grad=True)
    y = (x.abs() * ember.conj(x) + ember.real(x) - ember.angle(x)).sum()
    y.backward()
    assert y.grad_fn is not None and x.grad.dtype is ember.float32
    np.testing.assert_allclose(x.grad._data, [[3.0, 5.0]])
    assert x.grad_fn is None and ember.conj(x)._data.base is x._data


def test_trace_of_a_complex_function_matches_eager():
    from ember import jit

    def f(z, w):
        return ((z * w).exp() + z.conj()).abs()

    z, w = ember.tensor(_z((4,), np.complex64)), ember.tensor(_z((4,), np.complex64))
    traced = jit.trace(f, (z, w))
    z2, w2 = ember.tensor(_z((4,), np.complex64)), ember.tensor(_z((4,), np.complex64))
    _same(traced(z2, w2), f(z2, w2)._data)
    from ember.jit.passes.fuse import fuse
    # the pointwise engine never compiles complex kernels: complex chains stay unfused
    assert "fusion_group" not in [n.kind for n in fuse(traced.graph).nodes]
    real = jit.trace(lambda a: ((a * 2).exp() + 1).abs(), (ember.ones(4),))
    assert [n.kind for n in fuse(real.graph).nodes] == ["fusion_group"]


# ---------------------------------------------------------------- finite differences
def _vc(x):
    return ember.view_as_complex(x)


@pytest.mark.parametrize("case", [
    ("holomorphic_chain", lambda x: ember.view_as_real((_vc(x).exp() * _vc(x).sin()) /
                                                       (1 + _vc(x) * _vc(x)))),
    ("non_holomorphic", lambda x: ember.stack([_vc(x).abs(), _vc(x).angle(),
                                               (_vc(x) * _vc(x).conj()).real,
                                               ember.imag(_vc(x) ** 2)])),
    ("polar_complex", lambda x: ember.view_as_real(
        ember.polar(x[..., 0].abs() + 0.5, x[..., 1]) * ember.complex(x[..., 1], x[..., 0]))),
    ("matmul_sum", lambda x: ember.view_as_real((_vc(x) @ _vc(x).mH).sum(0))),
    ("fft", lambda x: ember.view_as_real(ember.fft.fftn(_vc(x), s=(3, 5), norm="ortho"))),
    ("rfft_irfft", lambda x: ember.fft.irfft(ember.fft.rfft(x[..., 0], n=7) * _vc(x)[:, :4],
                                             n=6, norm="forward")),
    ("hfft_ihfft", lambda x: ember.fft.hfft(_vc(x), n=5).sum(-1) + ember.view_as_real(
        ember.fft.ihfft(x[..., 1])).sum((-2, -1))),
], ids=lambda c: c[0])
def test_gradcheck_through_complex_values(case):
    """Real in, real out through complex intermediates: finite differences check the complex
    gradients independently of torch (the real embedding of torch's convention)."""
    _, fn = case
    x = ember.tensor(np.random.default_rng(3).standard_normal((3, 4, 2)), requires_grad=True)
    assert ember.autograd.gradcheck(fn, (x,), eps=1e-6, atol=1e-6, rtol=1e-4)
    assert ember.autograd.gradgradcheck(fn, (x,), eps=1e-6, atol=1e-5, rtol=1e-3)


@pytest.mark.parametrize("c", [1 + 2j, -3j, -0.5 - 1j, complex(1, float("inf"))])
def test_traced_complex_constants_save_and_load(c, tmp_path):
    from ember import jit

    def f(x):
        return (ember.fft.rfft(x) * c).abs()

    x = ember.tensor(RNG.standard_normal((3, 8)))
    traced = jit.trace(f, (x,))
    path = str(tmp_path / "g.ember")
    jit.save(traced, path)
    loaded = jit.load(path)
    for fn in (traced, loaded):
        np.testing.assert_allclose(fn(x)._data, f(x)._data, equal_nan=True)


def test_save_and_load(tmp_path):
    z = ember.tensor(_z((2, 3), np.complex64)[:, ::2])  # non-contiguous
    w = ember.tensor(_z((3,)), requires_grad=True)
    path = str(tmp_path / "c.safetensors")
    a = _z((2,))
    ember.save({"z": z, "w": w, "a": a, "r": ember.ones(2)}, path)
    d = ember.load(path)
    _same(d["z"], z._data)
    _same(d["w"], w._data)
    assert d["w"].requires_grad and d["z"].dtype is ember.complex64
    assert d["a"].dtype == np.complex128 and np.array_equal(d["a"], a)
    from ember.serialization import SerializationError, _complex_of
    with pytest.raises(SerializationError, match="marked complex"):
        _complex_of(np.ones((2, 3)), "x")


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta",
                                  "Adamax", "NAdam", "RAdam", "ASGD", "Rprop"])
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_optimizers_update_complex_parameters_as_torch(name, dtype):
    """As torch: the update of a complex parameter is that of its real view (..., 2)."""
    z0 = _z((5,), dtype)
    kw = {"lr": 0.1, **({"momentum": 0.9} if name == "SGD" else {})}
    pe, pt = ember.nn.Parameter(ember.tensor(z0)), torch.nn.Parameter(torch.tensor(z0))
    oe, ot = getattr(ember.optim, name)([pe], **kw), getattr(torch.optim, name)([pt], **kw)
    for _ in range(3):
        for p, o in ((pe, oe), (pt, ot)):
            o.zero_grad()
            (p.abs() ** 2 + p.real ** 3).sum().backward()
            o.step()
    assert pe.dtype.name == dtype
    _same(pe, pt, 1e-5 if dtype == "complex64" else 1e-9)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")])
def test_clip_grad_norm_of_complex_gradients(norm_type):
    pe, pt = ember.nn.Parameter(ember.tensor(Z)), torch.nn.Parameter(torch.tensor(Z))
    for p in (pe, pt):
        (p.abs() ** 2).sum().backward()
    _same(ember.nn.utils.clip_grad_norm_([pe], 1.0, norm_type),
          torch.nn.utils.clip_grad_norm_([pt], 1.0, norm_type), 1e-9)
    _same(pe.grad, pt.grad, 1e-9)
    with pytest.raises(EmberError, match="clip_grad_value_.*complex"):
        ember.nn.utils.clip_grad_value_([pe], 0.5)


@pytest.mark.parametrize("dtype", ["complex64", "complex128", "float32", "int64", "bool"])
def test_isreal_like_torch(dtype):
    """isreal of a complex tensor is imag == 0 (it was True everywhere; found by
    tests/differential)."""
    torch = pytest.importorskip("torch")
    values = np.array([1 + 2j, 3 + 0j, -0.0 - 0.0j, 0 + 1e-30j, np.nan + 0j])
    if not dtype.startswith("complex"):
        values = values.real
    arr = values.astype(dtype)
    got = ember.isreal(ember.from_numpy(arr.copy()))
    want = torch.isreal(torch.from_numpy(arr.copy()))
    assert got.dtype == ember.bool
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_real_dtype_complex_accessors():
    x = ember.randn(4, 6)[:, ::2].requires_grad_(True)
    for y in (x.conj(), ember.resolve_conj(x), x.resolve_neg(), x.real, ember.real(x),
              ember.conj_physical(x)):
        assert y.equal(x) and y.requires_grad
    assert ember.angle(ember.tensor([-2, 0, 3])).tolist() == pytest.approx([np.pi, 0.0, 0.0])
    a = ember.angle(ember.tensor([-1.0, float("nan"), 1.0], requires_grad=True))
    assert np.isnan(a[1].item())
    (g,) = ember.autograd.grad(x.angle().sum(), x)
    assert (g == 0).all().item()
