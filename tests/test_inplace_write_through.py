"""In-place arithmetic written into self (``dispatch._write_through``): without autograd the
same values, dtypes, errors and version bumps as torch and as the path with autograd on (the
general path for mul_ / div_); with autograd, add_ / sub_ link the graph torch builds."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
rng = np.random.default_rng(5)

CASES = [  # (dtype, self shape, op, other: shape tuple or a Python number, kwargs)
    ("float32", (3, 4), "add_", (3, 4), {}),
    ("float32", (3, 4), "add_", (4,), {}),
    ("float32", (3, 4), "add_", (3, 1), {}),
    ("float32", (3, 4), "add_", 0.25, {}),
    ("float32", (3, 4), "add_", 2, {}),
    ("float32", (3, 4), "add_", (3, 4), {"alpha": -0.5}),
    ("float32", (300, 300), "add_", (300, 300), {"alpha": -0.01}),   # the one-pass kernel
    ("float32", (300, 300), "add_", (300,), {"alpha": 3}),
    ("float32", (3, 4), "sub_", (4,), {"alpha": 2.5}),
    ("float32", (300, 300), "sub_", (300, 300), {"alpha": 0.1}),
    ("float32", (3, 4), "sub_", 1.5, {}),
    ("float32", (3, 4), "mul_", (1, 4), {}),
    ("float32", (300, 300), "mul_", 0.999, {}),
    ("float32", (3, 4), "div_", (3, 4), {}),
    ("float32", (3, 4), "div_", 3, {}),
    ("float64", (3, 4), "add_", (3, 4), {"alpha": 1e-3}),
    ("float64", (3, 4), "mul_", (4,), {}),
    ("int64", (3, 4), "add_", (3, 4), {}),
    ("int64", (3, 4), "add_", 3, {"alpha": 2}),
    ("int64", (3, 4), "mul_", -2, {}),
    ("int64", (3, 4), "sub_", (4,), {}),
    ("int32", (3, 4), "mul_", (3, 4), {}),
    ("complex64", (3, 4), "mul_", 1 + 2j, {}),
    ("complex64", (3, 4), "add_", (3, 4), {}),
    ("float64", (3, 4), "add_", ("float32", (3, 4)), {}),   # other promoted: general path
    ("float32", (3, 4), "add_", ("float64", (3, 4)), {}),
]
ERRORS = [
    ("int64", (3, 4), "add_", 0.5, {}),
    ("int64", (3, 4), "div_", 2, {}),
    ("int64", (3, 4), "mul_", ("float32", (3, 4)), {}),
    ("float32", (3, 1), "add_", (1, 4), {}),
    ("float32", (3, 4), "add_", 1 + 1j, {}),
]


def _operands(dtype, shape, other):
    def make(dt, sh):
        if np.dtype(dt).kind == "c":
            return (rng.standard_normal(sh) + 1j * rng.standard_normal(sh)).astype(dt)
        if np.dtype(dt).kind in "iu":
            return rng.integers(-9, 9, sh).astype(dt)
        return rng.standard_normal(sh).astype(dt)
    x = make(dtype, shape)
    if isinstance(other, tuple) and other and isinstance(other[0], str):
        return x, make(*other)
    return x, make(dtype, other) if isinstance(other, tuple) else other


def _wrap(lib, a):
    return (torch.from_numpy(a.copy()) if lib is torch else ember.tensor(a.copy())) \
        if isinstance(a, np.ndarray) else a


@pytest.mark.parametrize("dtype, shape, op, other, kw", CASES)
def test_matches_torch_and_the_general_path(dtype, shape, op, other, kw):
    x, o = _operands(dtype, shape, other)
    tx = _wrap(torch, x)
    getattr(tx, op)(_wrap(torch, o), **kw)
    ex = _wrap(ember, x)
    v = ex._version
    with ember.no_grad():
        assert getattr(ex, op)(_wrap(ember, o), **kw) is ex
    assert ex._version == v + 1 and ex.dtype.name == tx.dtype.__repr__().split(".")[-1]
    tol = 1e-6 if dtype in ("float32", "complex64") else 1e-12
    np.testing.assert_allclose(ex.numpy(), tx.numpy(), rtol=tol, atol=tol)
    general = ember.tensor(x.copy())
    with ember.enable_grad():
        getattr(general, op)(ember.tensor(o.copy(), requires_grad=o.dtype.kind in "fc")
                             if isinstance(o, np.ndarray) else o, **kw)
    np.testing.assert_allclose(ex.numpy(), general.detach().numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype, shape, op, other, kw", ERRORS)
def test_refused_like_torch_and_self_unchanged(dtype, shape, op, other, kw):
    x, o = _operands(dtype, shape, other)
    with pytest.raises(RuntimeError):
        getattr(_wrap(torch, x), op)(_wrap(torch, o), **kw)
    ex = _wrap(ember, x)
    with ember.no_grad(), pytest.raises(RuntimeError, match=op.rstrip("_")):
        getattr(ex, op)(_wrap(ember, o), **kw)
    np.testing.assert_array_equal(ex.numpy(), x)


def test_views_overlap_and_read_only_memory():
    base = ember.tensor(np.arange(16, dtype=np.float32).reshape(4, 4))
    with ember.no_grad():
        base[1].add_(1)                          # a view writes through to its base
        expected = np.arange(16, dtype=np.float32).reshape(4, 4)
        expected[1] += 1
        np.testing.assert_array_equal(base.numpy(), expected)
        with pytest.raises(RuntimeError, match="refer to a single memory location"):
            base.add_(base.t())                  # partially overlapping operand: torch refuses
        np.testing.assert_array_equal(base.numpy(), expected)
        base.add_(base)                          # the very same memory is allowed
        np.testing.assert_array_equal(base.numpy(), 2 * expected)
        frozen = np.ones(3, np.float32)
        frozen.setflags(write=False)
        t = ember.from_numpy(frozen)            # shares the read-only memory
        with pytest.raises(RuntimeError, match="mul_: the tensor's memory is read-only"):
            t.mul_(2)
        np.testing.assert_array_equal(frozen, 1)


def test_out_of_range_python_ints_get_embers_error():
    t = ember.ones(3, dtype=ember.int64)
    with ember.no_grad(), pytest.raises(OverflowError, match="add: Python int"):
        t.add_(2 ** 70)
    assert t.tolist() == [1, 1, 1]
    t = ember.ones(3, dtype=ember.int32)   # within int64: wraps into int32, as torch
    with ember.no_grad():
        t.add_(2 ** 40 + 5)
    assert t.tolist() == [6, 6, 6]


def test_add_and_sub_with_autograd_write_through_and_match_torch_gradients():
    """With grad on, add_ / sub_ (whose backward keeps no operand) write into self and link
    the same graph as the out-of-place path: values and gradients as torch's."""
    x, y, z = (rng.standard_normal((4, 5)) for _ in range(3))
    bias = rng.standard_normal(5)

    def run(lib, wrap):
        a, b, c, d = (wrap(v) for v in (x, y, z, bias))
        for t in (a, b, c, d):
            t.requires_grad_(True)
        out = a * 2.0
        out += b
        out.sub_(c, alpha=0.5)
        out.add_(d)                                   # broadcast operand
        out += 1.5
        (out * out).sum().backward()
        return out.detach().numpy(), [t.grad.numpy() for t in (a, b, c, d)]
    eo, eg = run(ember, ember.tensor)
    to, tg = run(torch, torch.tensor)
    np.testing.assert_allclose(eo, to, rtol=1e-12)
    for e, t in zip(eg, tg):
        np.testing.assert_allclose(e, t, rtol=1e-12)


def test_write_through_of_a_saved_result_is_caught_at_backward():
    x = ember.tensor(rng.standard_normal(6), requires_grad=True)
    y = x.exp()                                       # exp's backward keeps its result
    y += 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    leaf = ember.tensor(rng.standard_normal(6), requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        leaf += 1
