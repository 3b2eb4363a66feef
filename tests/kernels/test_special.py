"""Special-function kernels on ndarrays against torch: float32/float64 results of the unary and
binary functions and the orthogonal polynomials, integer inputs computed in the default float
dtype, float16 through float32, the integer-only ops (gcd, lcm, shifts past the width), positive
on bool refused; and scipy's role (imported on first use only; without it the functions NumPy
lacks raise an error naming scipy, erfc and lgamma fall back to the math module)."""
import sys

import numpy as np
import pytest

import ember
from ember.errors import EmberError
from ember.kernels import special as K
from ember.kernels.errors import KernelError

torch = pytest.importorskip("torch")
rng = np.random.default_rng(103)


def _check(got, want, dtype, rtol=None, atol=None):
    """ember Tensor ``got`` against torch's ``want`` (dtype, shape, values)."""
    want = want.detach().numpy()
    assert got._data.dtype == want.dtype, (got._data.dtype, want.dtype)
    assert got.shape == want.shape
    if rtol is None:
        rtol = 2e-6 if want.dtype == np.float32 else 1e-12
    if atol is None:
        atol = 1e-6 if want.dtype == np.float32 else 1e-15
    np.testing.assert_allclose(got._data, want, rtol=rtol, atol=atol, equal_nan=True)


UNARY = {  # kernel name: torch function, input sampler
    "erfc": (torch.special.erfc, lambda: rng.standard_normal(20)),
    "erfinv": (torch.special.erfinv, lambda: rng.uniform(-0.99, 0.99, 20)),
    "erfcx": (torch.special.erfcx, lambda: rng.uniform(-2, 5, 20)),
    "lgamma": (torch.lgamma, lambda: rng.uniform(-4.5, 6, 20)),
    "digamma": (torch.special.digamma, lambda: rng.uniform(-4.5, 6, 20)),
    "i0": (torch.special.i0, lambda: rng.uniform(-5, 5, 20)),
    "i1e": (torch.special.i1e, lambda: rng.uniform(-5, 5, 20)),
    "ndtri": (torch.special.ndtri, lambda: rng.uniform(0.01, 0.99, 20)),
    "log_ndtr": (torch.special.log_ndtr, lambda: rng.uniform(-10, 5, 20)),
    "bessel_j0": (torch.special.bessel_j0, lambda: rng.uniform(0, 20, 20)),
    "modified_bessel_k1": (torch.special.modified_bessel_k1, lambda: rng.uniform(0.1, 5, 20)),
    "spherical_bessel_j0": (torch.special.spherical_bessel_j0, lambda: rng.uniform(-9, 9, 20)),
    "sinc": (torch.special.sinc, lambda: rng.uniform(-3, 3, 20)),
    "entr": (torch.special.entr, lambda: rng.uniform(-1, 3, 20)),
    "airy_ai": (torch.special.airy_ai, lambda: rng.uniform(-5, 3, 20)),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unary_kernels_match_torch(name, dtype):
    fn, sample = UNARY[name]
    x = sample().astype(dtype)
    got = getattr(K, name)(x)
    want = fn(torch.tensor(x)).numpy()
    assert got.dtype == want.dtype
    tol = 2e-5 if dtype == np.float32 else LOOSE.get(name, 1e-10)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)


# torch's float64 bessel_j0 and airy_ai are rational approximations good to ~5e-8 (ember's come
# from scipy.special)
LOOSE = {"bessel_j0": 2e-7, "airy_ai": 2e-7}


@pytest.mark.parametrize("name, torch_fn, lo, hi", [
    ("xlogy", torch.special.xlogy, 0.0, 3.0), ("xlog1py", torch.special.xlog1py, -0.5, 3.0),
    ("zeta", torch.special.zeta, 1.5, 4.0), ("hypot", torch.hypot, -3, 3),
    ("copysign", torch.copysign, -3, 3), ("fmod", torch.fmod, -3, 3),
    ("logaddexp2", torch.logaddexp2, -3, 3), ("gammainc", torch.special.gammainc, 0.1, 4),
    ("gammaincc", torch.special.gammaincc, 0.1, 4), ("nextafter", torch.nextafter, -3, 3),
    ("fmax", torch.fmax, -3, 3), ("heaviside", torch.heaviside, -1, 1),
])
def test_binary_kernels_match_torch(name, torch_fn, lo, hi):
    a, b = rng.uniform(lo, hi, (4, 5)), rng.uniform(lo, hi, 5)
    a[0, 0] = 0.0
    if name == "fmax":
        a[1, 1] = np.nan
    got = getattr(K, name)(a, b)
    want = torch_fn(torch.tensor(a), torch.tensor(b)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("name", ["chebyshev_polynomial_t", "chebyshev_polynomial_w",
                                  "shifted_chebyshev_polynomial_u", "hermite_polynomial_h",
                                  "hermite_polynomial_he", "laguerre_polynomial_l",
                                  "legendre_polynomial_p"])
def test_polynomials_match_torch(name):
    x = rng.uniform(-1, 1, 12)
    n = np.arange(12) % 7
    got = getattr(K, name)(x, n)
    want = getattr(torch.special, name)(torch.tensor(x), torch.tensor(n)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


def test_integer_and_float16_inputs_follow_torch():
    i = np.array([1, 2, 5])
    got = K.lgamma(i)
    assert got.dtype == np.float32                     # the default float dtype
    np.testing.assert_allclose(got, torch.lgamma(torch.tensor(i)).numpy(), rtol=1e-6)
    h = np.array([0.5, 1.5, 3.0], np.float16)
    got = K.digamma(h)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, torch.special.digamma(torch.tensor(h)).numpy())


def test_integer_only_ops():
    a, b = np.array([12, -18, 7, 0]), np.array([8, 12, 0, 5])
    np.testing.assert_array_equal(K.gcd(a, b), torch.gcd(torch.tensor(a), torch.tensor(b)))
    np.testing.assert_array_equal(K.lcm(a, b), torch.lcm(torch.tensor(a), torch.tensor(b)))
    x = np.array([5, -5, 1, -1], np.int32)
    s = np.array([1, 2, 40, -1], np.int32)                 # past the width, negative
    np.testing.assert_array_equal(K.bitwise_left_shift(x, s),
                                  torch.bitwise_left_shift(torch.tensor(x), torch.tensor(s)))
    np.testing.assert_array_equal(K.bitwise_right_shift(x, s),
                                  torch.bitwise_right_shift(torch.tensor(x), torch.tensor(s)))
    # a float operand: torch's NotImplementedError, in its words
    with pytest.raises(NotImplementedError, match="\"lshift_cpu\" not implemented for 'Double'"):
        torch.bitwise_left_shift(torch.ones(2, dtype=torch.float64), torch.ones(2, dtype=torch.float64))
    with pytest.raises(NotImplementedError, match="\"lshift_cpu\" not implemented for 'Double'"):
        K.bitwise_left_shift(np.ones(2), np.ones(2))
    with pytest.raises(NotImplementedError, match="\"rshift_cpu\" not implemented for 'Bool'"):
        K.bitwise_right_shift(np.array([True]), np.array([True]))
    with pytest.raises(NotImplementedError, match="\"gcd_cpu\" not implemented for 'Float'"):
        K.gcd(np.ones(2, np.float32), np.ones(2, np.float32))
    with pytest.raises(KernelError, match="on a bool tensor is not supported"):
        K.positive(np.array([True]))


def test_without_scipy(monkeypatch):
    """scipy missing: functions NumPy lacks raise an error naming the op and scipy; erfc and
    lgamma fall back to the math module."""
    import ember.kernels.special as K
    monkeypatch.setattr(K, "_scipy", None)
    monkeypatch.setitem(sys.modules, "scipy.special", None)
    monkeypatch.setitem(sys.modules, "scipy", None)
    with pytest.raises(EmberError, match=r"erfinv.*scipy"):
        ember.erfinv(ember.tensor([0.5]))
    x = np.array([-1.0, 0.5, 3.0])
    _check(ember.erfc(ember.from_numpy(x.copy())), torch.erfc(torch.from_numpy(x)), np.float64)
    _check(ember.lgamma(ember.from_numpy(x.copy())), torch.lgamma(torch.from_numpy(x)), np.float64)


def test_import_does_not_load_scipy():
    import subprocess
    code = ("import sys, ember, ember.special; ember.special.xlogy(ember.tensor([1.0]), 2.0); "
            "ember.special.sinc(ember.tensor([1.0])); print('scipy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


