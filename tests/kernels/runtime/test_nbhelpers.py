"""The straight-line float32 exp, tanh, erf and log1p the Numba kernels share (``nbhelpers``):
against float64 NumPy over a dense sweep, the range ends and the special values."""
import numpy as np
import pytest

pytest.importorskip("numba")
from numba import njit  # noqa: E402

from ember.kernels.runtime.nbhelpers import erf_f32, exp_f32, log1p_f32, tanh_f32  # noqa: E402


@njit(cache=False)
def _apply(fn_id, x, out):
    for i in range(x.shape[0]):
        if fn_id == 0:
            out[i] = exp_f32(x[i])
        elif fn_id == 1:
            out[i] = tanh_f32(x[i])
        elif fn_id == 2:
            out[i] = erf_f32(x[i])
        else:
            out[i] = log1p_f32(x[i])


def _run(fn_id, x):
    out = np.empty_like(x)
    _apply(fn_id, x, out)
    return out


def _ulps(got, want):
    """Distance in float32 units in the last place at the reference value."""
    want32 = want.astype(np.float32)
    spacing = np.spacing(np.abs(want32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - want) / spacing


def test_exp_f32_within_two_ulp_over_its_normal_range():
    x = np.linspace(-87.3, 88.7, 400_001, dtype=np.float32)
    want = np.exp(x.astype(np.float64))
    assert _ulps(_run(0, x), want).max() <= 2.0


def test_exp_f32_range_ends_and_specials():
    x = np.array([-np.inf, -200.0, -104.5, 89.0, 200.0, np.inf, np.nan, 0.0, -0.0],
                 np.float32)
    got = _run(0, x)
    np.testing.assert_array_equal(got[:2], [0.0, 0.0])
    assert got[2] == 0.0                        # below the smallest denormal's exponent
    assert np.isposinf(got[3:6]).all()
    assert np.isnan(got[6])
    np.testing.assert_array_equal(got[7:], [1.0, 1.0])
    sub = np.linspace(-103.0, -88.0, 2001, dtype=np.float32)   # float32 denormal results
    want = np.exp(sub.astype(np.float64))
    assert np.abs(_run(0, sub) - want).max() <= 2 * np.float64(np.finfo(np.float32).smallest_subnormal)


def test_tanh_f32_close_to_float64_and_odd():
    x = np.linspace(-12.0, 12.0, 240_001, dtype=np.float32)
    got = _run(1, x)
    want = np.tanh(x.astype(np.float64))
    assert np.abs(got - want).max() <= 4 * np.finfo(np.float32).eps
    small = np.abs(x) < 0.625
    assert _ulps(got[small & (x != 0)], want[small & (x != 0)]).max() <= 3.0
    np.testing.assert_array_equal(got, -_run(1, -x))
    specials = _run(1, np.array([np.inf, -np.inf, np.nan, 0.0, 40.0], np.float32))
    np.testing.assert_array_equal(specials[[0, 1, 3, 4]], [1.0, -1.0, 0.0, 1.0])
    assert np.isnan(specials[2])


def test_erf_f32_within_0_54_ulp_and_odd():
    """Within 0.54 ulp of Python's float64 math.erf over a dense sweep, around the cut to +-1
    (ERF_CUT) and on denormal inputs (the rational in float64 rounds once; the former series +
    erfcc reached 8 ulp near 0.3 and 3 above 0.5); odd."""
    import math
    x = np.concatenate([np.linspace(-6.0, 6.0, 600_001, dtype=np.float32),
                        np.linspace(3.85, 4.0, 20_001, dtype=np.float32)])
    x = x[x != 0]
    want = np.array([math.erf(v) for v in x.astype(np.float64)])
    got = _run(2, x)
    assert _ulps(got, want).max() <= 0.54
    np.testing.assert_array_equal(got, -_run(2, -x))
    tiny = np.array([1e-30, 1e-8, -1e-8, 1e-40, -3e-45], np.float32)
    want = np.array([math.erf(v) for v in tiny.astype(np.float64)]).astype(np.float32)
    np.testing.assert_array_equal(_run(2, tiny), want)
    specials = _run(2, np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 40.0], np.float32))
    np.testing.assert_array_equal(specials[[0, 1, 3, 5]], [1.0, -1.0, 0.0, 1.0])
    assert np.isnan(specials[2]) and np.signbit(specials[4])


def test_log1p_f32_within_one_ulp_and_its_specials():
    """Within 1 ulp of float64 log1p rounded to float32 (almost always that value) over wide
    sweeps: tiny arguments (x itself below 2^-24), near -1, up to the float32 maximum; -1 is
    -inf, below -1 (and -inf) NaN, inf inf, NaN kept, signed zeros kept."""
    rng = np.random.default_rng(11)
    f = np.float32
    x = np.concatenate([(rng.standard_normal(400_000) * 3).astype(f),
                        np.exp(rng.uniform(-100, 88, 200_000)).astype(f),
                        -np.exp(rng.uniform(-100, 0, 200_000)).astype(f),
                        np.linspace(-1e-6, 1e-6, 100_001, dtype=f)])
    with np.errstate(divide="ignore", invalid="ignore"):
        want = np.log1p(x.astype(np.float64)).astype(f)
    got = _run(3, x)
    ok = np.isfinite(want)
    bits = [v[ok].view(np.int32).astype(np.int64) for v in (got, want)]
    ulps = np.abs(bits[0] - bits[1])
    assert ulps.max() <= 1 and (ulps > 0).mean() < 1e-4
    specials = _run(3, np.array([-1.0, -1.5, -np.inf, np.inf, np.nan, 0.0, -0.0, 1e-45], f))
    np.testing.assert_array_equal(specials[[0, 3, 5, 6, 7]],
                                  np.array([-np.inf, np.inf, 0, 0, 1e-45], f))
    assert np.isnan(specials[[1, 2, 4]]).all() and np.signbit(specials[6])


def _twin_inputs():
    """float32 values for the twin comparison: random bit patterns (every exponent, NaN
    payloads, subnormals), normal and wide uniform values, and each helper's edges."""
    rng = np.random.default_rng(3)
    f = np.float32
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -1e-45, 1e-38, -1e-38,
                      0.625, -0.625, 88.72283935546875, 88.8, 89.0, -103.97208, -104.0, -104.5,
                      3e38, -3e38], f)
    cut = np.float32(3.925)
    near_cut = np.concatenate([(cut.view(np.int32) + np.arange(-64, 65, dtype=np.int32)).view(f),
                               np.linspace(3.9, 3.95, 20_001, dtype=f)])   # the 129 around ERF_CUT
    near_cut = np.concatenate([near_cut, -near_cut])
    bits = rng.integers(0, 2 ** 32, 1_000_000, dtype=np.uint64).astype(np.uint32).view(f)
    return np.concatenate([edges, near_cut, bits, (rng.standard_normal(500_000) * 4).astype(f),
                           rng.uniform(-110, 100, 500_000).astype(f),
                           (rng.standard_normal(100_000) * 1e-38).astype(f)])


@pytest.mark.parametrize("fn_id, name", [(0, "exp_f32"), (1, "tanh_f32"), (2, "erf_f32"),
                                         (3, "log1p_f32")])
def test_numpy_twins_have_the_compiled_helpers_bits(fn_id, name):
    """``elementwise``'s NumPy twin of each helper gives the compiled helper's bits, NaN
    payloads and signed zeros included (so a pass may run the twin while its kernel
    compiles)."""
    from ember.kernels import elementwise
    x = _twin_inputs()
    np.testing.assert_array_equal(getattr(elementwise, name)(x).view(np.uint32),
                                  _run(fn_id, x).view(np.uint32))
    # any shape, and arrays shorter than one block
    y = x[:30_000].reshape(3, 100, 100)
    np.testing.assert_array_equal(getattr(elementwise, name)(y).view(np.uint32),
                                  _run(fn_id, x[:30_000]).view(np.uint32).reshape(y.shape))


def test_wide_vectors_asks_llvm_for_512_bit_vectors_and_changes_no_bits():
    """``wide_vectors()`` puts LLVM's ``prefer-vector-width`` of 512 on the kernel that calls it
    (the pointwise engine's generated kernels do): the same bits as without it."""
    from ember.kernels.runtime.nbhelpers import PREFER_512, wide_vectors

    @njit(cache=False, error_model="numpy")
    def plain(x, out):
        for i in range(x.shape[0]):
            out[i] = exp_f32(x[i]) * np.float32(0.5) + tanh_f32(x[i])

    @njit(cache=False, error_model="numpy")
    def wide(x, out):
        wide_vectors()
        for i in range(x.shape[0]):
            out[i] = exp_f32(x[i]) * np.float32(0.5) + tanh_f32(x[i])
    x = _twin_inputs()[:200_000]
    a, b = np.empty_like(x), np.empty_like(x)
    plain(x, a)
    wide(x, b)
    np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))
    assert PREFER_512 in next(iter(wide.inspect_llvm().values()))
    assert PREFER_512 not in next(iter(plain.inspect_llvm().values()))

