"""float16 and bfloat16 ops compute as torch's CPU kernels do: float32 intermediates and
accumulation, one rounding (ember/kernels/opmath.py, the formulas' ``_float32``). Each op's
forward and backward are compared, in ulps of the low-precision dtype, with a float64 reference
and with torch: never more than 1 ulp worse than torch anywhere, finite where torch is."""
import numpy as np
import pytest
import torch

import ember
import ember.nn.functional as EF
import torch.nn.functional as TF
from ember.kernels.opmath import in_float32

RNG = np.random.default_rng(0)
WIDE = RNG.standard_normal((8, 768)) * 20          # std-20 rows of width 768
UNIT = RNG.standard_normal((8, 768))
IMG = RNG.standard_normal((2, 4, 16, 16)) * 20
LONG = RNG.standard_normal((4, 3000)) * 20
NEAR_ONE = RNG.uniform(0.99, 1.01, (4, 3000))

# name: (input, fn(lib, functional, t), compared with torch elementwise (False: torch's own
# rounding is worse than 1 ulp there, so only the float64 reference bounds ember))
CASES = {
    "norm": (WIDE, lambda L, F, t: t.norm(dim=-1), True),
    "norm_all": (WIDE, lambda L, F, t: t.norm(), True),
    "var": (WIDE, lambda L, F, t: t.var(dim=-1), True),
    "std": (WIDE, lambda L, F, t: t.std(dim=-1), True),
    "cumsum": (LONG, lambda L, F, t: t.cumsum(1), True),
    "cumprod": (NEAR_ONE, lambda L, F, t: t.cumprod(1), True),
    "prod": (NEAR_ONE[:, :500], lambda L, F, t: t.prod(1), False),   # torch: low accumulator
    "sum": (LONG, lambda L, F, t: t.sum(1), True),
    "mean": (LONG, lambda L, F, t: t.mean(1), True),
    "logsumexp": (WIDE, lambda L, F, t: t.logsumexp(-1), True),
    "softmax": (WIDE, lambda L, F, t: t.softmax(-1), True),
    "log_softmax": (WIDE, lambda L, F, t: t.log_softmax(-1), False),
    "avg_pool1d": (IMG.reshape(2, 4, 256), lambda L, F, t: F.avg_pool1d(t, 4), True),
    "avg_pool2d": (IMG, lambda L, F, t: F.avg_pool2d(t, 4), True),
    "normalize": (WIDE, lambda L, F, t: F.normalize(t, dim=-1), True),
    "cosine_similarity": (WIDE, lambda L, F, t: F.cosine_similarity(t, t.flip(0) * 0.5, dim=-1),
                          True),
    "layer_norm": (WIDE, lambda L, F, t: F.layer_norm(t, (768,)), False),
    "batch_norm": (IMG, lambda L, F, t: F.batch_norm(t, None, None, training=True), False),
    "group_norm": (IMG, lambda L, F, t: F.group_norm(t, 2), False),
    "rms_norm": (WIDE * 10, lambda L, F, t: F.rms_norm(t, (768,)), True),
    "gelu": (UNIT, lambda L, F, t: F.gelu(t), True),
    "gelu_tanh": (UNIT, lambda L, F, t: F.gelu(t, approximate="tanh"), True),
    "sigmoid": (UNIT, lambda L, F, t: t.sigmoid(), True),
    "silu": (UNIT, lambda L, F, t: F.silu(t), True),
    "tanh": (UNIT, lambda L, F, t: t.tanh(), True),
    "lerp": (UNIT, lambda L, F, t: L.lerp(t, t.flip(0), 0.3), True),
    # constants besides t: ember's backward rounds once where torch's rounds per op, so a
    # leaf used three times would differ from torch at points where the three terms cancel
    "addcmul": (UNIT, lambda L, F, t: L.addcmul(t.detach().flip(1), t, t.detach().flip(0),
                                                value=0.3), True),
    "addcdiv": (UNIT, lambda L, F, t: L.addcdiv(t.detach().flip(1), t, t.detach().flip(0).abs()
                                                + 1, value=0.3), False),   # torch: value / t2
}

DTYPES = {"float16": (10, -14), "bfloat16": (7, -126)}   # mantissa bits, least normal exponent


def _ulp(ref, dtype, floor=0.0):
    bits, low = DTYPES[dtype]
    e = np.floor(np.log2(np.maximum(np.abs(ref), max(2.0 ** low, floor))))
    return 2.0 ** (e - bits)


def _err(a, ref, dtype, floor=0.0):
    """|a - ref| in ulps of ``dtype`` at ``ref`` (at ``floor`` where ``|ref|`` is smaller: a
    gradient that sums several terms cancels to values far below their rounding error)."""
    a, ref = np.atleast_1d(a).astype(np.float64), np.atleast_1d(ref).astype(np.float64)
    d = np.abs(a - ref) / _ulp(ref, dtype, floor)
    d[(a == ref) | (np.isnan(a) & np.isnan(ref))] = 0
    return d


def _low(a, dtype):
    """``a`` rounded to ``dtype``, as float64."""
    return np.asarray(torch.tensor(a).to(getattr(torch, dtype)).double())


def _run(lib, fn, x, g, dtype):
    """(output, input gradient) as float64 of ``fn`` at ``x`` for output gradient ``g``."""
    F = EF if lib is ember else TF
    t = lib.tensor(x) if dtype == "float64" else lib.tensor(x.astype(np.float32)).to(
        getattr(lib, dtype))
    t.requires_grad_(True)
    y = fn(lib, F, t)
    y.backward(lib.tensor(g(tuple(y.shape))).to(y.dtype))
    return y.detach().to(lib.float64).numpy(), t.grad.to(lib.float64).numpy()


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("name", list(CASES))
def test_low_precision_forward_and_backward_match_torch(name, dtype):
    x, fn, close = CASES[name]
    x = _low(x, dtype)

    def g(shape):
        return _low(np.random.default_rng(1).standard_normal(shape), dtype)
    ref = _run(torch, fn, x, g, "float64")
    got = _run(ember, fn, x, g, dtype)
    want = _run(torch, fn, x, g, dtype)
    for what, e, t, r in zip(("forward", "backward"), got, want, ref):
        assert e.shape == t.shape, (name, what)
        assert np.array_equal(np.isfinite(e), np.isfinite(t)), (name, what, "non-finite values")
        # the scale below which errors count as absolute: gradients sum terms of the size of
        # their RMS, and cancel
        floor = np.sqrt(np.mean(np.square(r))) / (16 if what == "forward" else 1)
        e_err, t_err = _err(e, r, dtype, floor), _err(t, r, dtype, floor)
        worst = np.argmax(e_err - t_err)
        assert np.all(e_err <= t_err + 1.0), (name, what, e.ravel()[worst], t.ravel()[worst],
                                             r.ravel()[worst])
        assert e_err.mean() <= t_err.mean() + 0.05, (name, what, e_err.mean(), t_err.mean())
        if close:
            diff = _err(e, t, dtype, floor)
            assert diff.max() <= 1.0, (name, what, diff.max())


def test_float16_sums_accumulate_in_float32():
    """cumsum of 3000 float16 ones stopped at 2048 (the float16 running sum); norms and
    variances of std-20 rows of width 768 overflowed to inf."""
    ones = ember.ones(3000, dtype=ember.float16)
    c = ones.cumsum(0)
    assert c.dtype == ember.float16 and c[-1].item() == 3000.0
    x = ember.tensor(WIDE.astype(np.float16))
    for r in (x.norm(dim=-1), x.var(dim=-1), x.std(dim=-1)):
        assert r.dtype == ember.float16 and np.isfinite(r.numpy()).all()


def test_gelu_float16_rounds_once():
    """Computed in float32 and rounded once (74 ulp mean error before, float16 intermediates):
    a quarter ulp from float64 on average, within 1 ulp of torch, or of torch's own error.
    Far in the negative tail ``1 + erf(u)`` (``1 + tanh(u)``) cancels in float32 for both,
    and the erf (tanh) implementations differ: there results within 2**-22 count as equal."""
    x = np.linspace(-8, 8, 20001).astype(np.float16)
    for approximate in ("none", "tanh"):
        got = EF.gelu(ember.tensor(x), approximate=approximate).numpy()
        want = TF.gelu(torch.tensor(x), approximate=approximate).numpy()
        ref = TF.gelu(torch.tensor(x.astype(np.float64)), approximate=approximate).numpy()
        tail = 2.0 ** -12
        e_err, t_err = _err(got, ref, "float16", tail), _err(want, ref, "float16", tail)
        assert np.all((_err(got, want, "float16", tail) <= 1.0) | (e_err <= t_err + 1.0))
        assert _err(got, ref, "float16").mean() < 0.3, approximate


def test_avg_pool3d_float16_accumulates_in_float32():
    """torch 2.13 has no float16 avg_pool3d on the CPU; against float64 (sums of 64 values of
    std 20 lost bits in float16)."""
    x = (np.random.default_rng(3).standard_normal((2, 2, 8, 8, 8)) * 20).astype(np.float16)
    t = ember.tensor(x, requires_grad=True)
    y = EF.avg_pool3d(t, 4)
    g = np.random.default_rng(4).standard_normal(tuple(y.shape)).astype(np.float16)
    y.backward(ember.tensor(g))
    rt = torch.tensor(x.astype(np.float64), requires_grad=True)
    ry = TF.avg_pool3d(rt, 4)
    ry.backward(torch.tensor(g.astype(np.float64)))
    assert y.dtype == ember.float16 and t.grad.dtype == ember.float16
    assert _err(y.detach().numpy(), ry.detach().numpy(), "float16").max() <= 0.5
    assert _err(t.grad.numpy(), rt.grad.numpy(), "float16").max() <= 0.5


def test_in_float32_rounds_back_only_low_precision_results():
    seen = []

    @in_float32
    def k(a, b=None, dtype=None):
        seen.append(a.dtype)
        return a * 2, np.arange(3)
    h = np.ones(3, np.float16)
    out, idx = k(h)
    assert seen[-1] == np.float32 and out.dtype == np.float16 and idx.dtype == np.arange(3).dtype
    out, _ = k(h, dtype=np.float32)            # the kernel's own dtype= wins
    assert seen[-1] == np.float16
    out, _ = k(h, np.ones(3, np.float32))      # a float32 operand: torch promotes to it
    assert seen[-1] == np.float32 and out.dtype == np.float32
    out, _ = k(np.ones(3, np.float32))
    assert out.dtype == np.float32


def test_mixed_float16_and_float32_operands_give_float32_as_torch():
    a = RNG.standard_normal((3, 4))
    got, want = [], []
    for L, out in ((ember, got), (torch, want)):
        x = L.tensor(a.astype(np.float32), requires_grad=True)
        h = L.tensor(a.astype(np.float16), requires_grad=True)
        y = L.addcmul(x, h, h, value=0.5)
        y.sum().backward()
        out += [y.dtype, x.grad.dtype, y.detach().to(L.float64).numpy(),
                h.grad.to(L.float64).numpy()]
    assert [str(d).split(".")[-1] for d in got[:2]] == [str(d).split(".")[-1] for d in want[:2]]
    np.testing.assert_allclose(got[2], want[2], rtol=1e-6)
    np.testing.assert_allclose(got[3], want[3], rtol=1e-3)


@pytest.mark.parametrize("name", ["gelu", "gelu_tanh", "silu"])
def test_fused_float16_backward_rounds_once_as_eager(monkeypatch, name):
    """A fused group's derived backward ran each float16 op's derivative formula step by
    step in float16; now in float32, rounded once per op (pointwise.autodiff), as eager."""
    import warnings

    from ember.autograd._generated import functions as G
    from ember import jit
    from ember.jit import fused
    monkeypatch.setattr(fused, "FORCE", "kernel")
    monkeypatch.setattr(fused, "BACKEND", "numpy")
    fn = {"gelu": lambda x, b: G.gelu(x + b, approximate="none"),
          "gelu_tanh": lambda x, b: G.gelu(x + b, approximate="tanh"),
          "silu": lambda x, b: G.silu(x * b)}[name]
    rng = np.random.default_rng(5)
    x0 = rng.standard_normal((64, 300)).astype(np.float16)
    b0 = rng.standard_normal(300).astype(np.float16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opt = jit.optimize(jit.trace(fn, (ember.tensor(x0), ember.tensor(b0))))
    assert opt.graph.find_nodes("fusion_group")
    grads = []
    for run in (fn, opt):
        x, b = ember.tensor(x0, requires_grad=True), ember.tensor(b0, requires_grad=True)
        run(x, b).backward(ember.ones(64, 300, dtype=ember.float16))
        grads.append(x.grad.numpy())
    assert grads[1].dtype == np.float16
    # the engine's sigmoid/erf/tanh are other float32 implementations: at most a last-bit
    # difference after the one rounding (the float16 steps were hundreds of ulps apart)
    assert _err(grads[1], grads[0], "float16").max() <= 1.0


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_tanh_and_sigmoid_backward_bits_equal_torch(dtype):
    """torch's kernels: sigmoid_backward ``grad * (1 - y) * y`` (float16 rounding each step),
    float16 tanh_backward ``grad * (1 - y * y)`` in float32, rounded once. The order was
    ``grad * ((1 - y) * y)``, and float16 tanh_backward rounded each step. (torch's float32
    tanh_backward fuses ``1 - y * y`` into one rounding, an FMA: not compared.)"""
    from ember.kernels import elementwise
    rng = np.random.default_rng(7)
    x = rng.standard_normal(20000).astype(dtype)
    g = rng.standard_normal(20000).astype(dtype)
    for name, fwd in (("sigmoid_backward", torch.sigmoid), ("tanh_backward", torch.tanh)):
        if name == "tanh_backward" and dtype != np.float16:
            continue
        y = fwd(torch.tensor(x))
        want = getattr(torch.ops.aten, name)(torch.tensor(g), y).numpy()
        got = getattr(elementwise, name)(g, y.numpy())
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want, err_msg=name)


def test_float16_with_a_python_number_as_torch():
    """torch multiplies and divides a float16 tensor by a number at float32 precision (NumPy
    rounded the number to float16 first: 0.7 -> 0.7002); it adds and subtracts the number
    rounded to float16, as NumPy does."""
    x = (np.random.default_rng(8).standard_normal(50000) * 3).astype(np.float16)
    e, t = ember.tensor(x), torch.tensor(x)
    cases = [lambda a: a * 0.7, lambda a: 0.7 * a, lambda a: a / 0.3, lambda a: a * 3,
             lambda a: a + 0.1, lambda a: a - 0.1, lambda a: 0.1 - a]
    for i, f in enumerate(cases):
        got, want = f(e), f(t)
        assert got.dtype == ember.float16, i
        np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=str(i))
    s = torch.tensor(0.7, dtype=torch.float64)
    np.testing.assert_array_equal((e * ember.tensor(0.7, dtype=ember.float64)).numpy(),
                                  (t * s).numpy())
