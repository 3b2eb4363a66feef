"""ember.fft against torch.fft: every transform with n/s/dim/norm variants, forward in single and
double precision (real and complex inputs), gradients of a real loss of the outputs (complex
inputs' gradients by torch's convention), fftshift/fftfreq, and the errors."""
import numpy as np
import pytest

import ember
import ember.fft as EF
from ember.errors import EmberError

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
XR = RNG.standard_normal((4, 6))
XC = RNG.standard_normal((4, 6)) + 1j * RNG.standard_normal((4, 6))
X3 = RNG.standard_normal((2, 3, 4))
ONE_D = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]
N_D = ["fft2", "ifft2", "rfft2", "irfft2", "hfft2", "ihfft2", "fftn", "ifftn", "rfftn", "irfftn",
       "hfftn", "ihfftn"]
REAL_ONLY = {"rfft", "ihfft", "rfft2", "ihfft2", "rfftn", "ihfftn"}
ONE_D_KW = [{}, {"n": 5}, {"n": 8}, {"dim": 0}, {"norm": "ortho"}, {"norm": "forward", "n": 3},
            {"norm": "backward", "dim": -2, "n": 1}]
N_D_KW = [{}, {"s": (3, 5)}, {"dim": (0,)}, {"s": (4,), "dim": (0,)}, {"norm": "ortho"},
          {"norm": "forward", "s": (-1, 7)}, {"dim": (1, 0)}]


def _t(x):
    return x.detach().resolve_conj().resolve_neg().numpy()


def _same(e, t, tol):
    t = _t(t)
    assert e._data.dtype == t.dtype and e._data.shape == t.shape, (e._data.dtype, t.dtype,
                                                                   e._data.shape, t.shape)
    np.testing.assert_allclose(e._data, t, rtol=tol, atol=tol)


def _inputs(name, single):
    xs = [XR, XC] + ([X3] if name in N_D else [])
    xs = [x for x in xs if not (name in REAL_ONLY and x.dtype.kind == "c")]
    if single:
        xs = [x.astype(np.complex64 if x.dtype.kind == "c" else np.float32) for x in xs]
    return xs


def _cases(names, kws):
    """Every (name, kwargs) pair: the first two kwargs per name run always, the rest are
    marked slow (the full grid takes ~20 s)."""
    return [pytest.param(n, kw, marks=() if i < 2 else pytest.mark.slow)
            for n in names for i, kw in enumerate(kws)]


def _id(v):
    if isinstance(v, str):
        return v
    return "".join(f"{k}={w}" for k, w in v.items()) or "defaults"


@pytest.mark.parametrize("single", [True, False], ids=["single", "double"])
@pytest.mark.parametrize("name,kw", _cases(ONE_D, ONE_D_KW) + _cases(N_D, N_D_KW), ids=_id)
def test_forward_matches_torch(name, kw, single):
    tol = 2e-5 if single else 1e-10
    for x in _inputs(name, single):
        if name in N_D and "s" in kw and "dim" not in kw and len(kw["s"]) > x.ndim:
            continue
        _same(getattr(EF, name)(ember.tensor(x), **kw),
              getattr(torch.fft, name)(torch.tensor(x), **kw), tol)


def _loss(y, a, b, lib):
    if y.is_complex():
        real = (lambda v: v.real) if lib is torch else ember.real
        imag = (lambda v: v.imag) if lib is torch else ember.imag
        return (real(y) * lib.tensor(a) + imag(y) * lib.tensor(b)).sum()
    return (y * lib.tensor(a)).sum()


def _check_grad(fe, ft, x):
    rng = np.random.default_rng(1)
    xe, xt = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ye, yt = fe(xe), ft(xt)
    a, b = rng.standard_normal(tuple(yt.shape)), rng.standard_normal(tuple(yt.shape))
    _loss(ye, a, b, ember).backward()
    _loss(yt, a, b, torch).backward()
    _same(xe.grad, xt.grad, 1e-9)


@pytest.mark.parametrize("name,kw", _cases(ONE_D, ONE_D_KW[:6]) + _cases(N_D, N_D_KW[:6]),
                         ids=_id)
def test_gradient_matches_torch(name, kw):
    for x in _inputs(name, False):
        _check_grad(lambda v: getattr(EF, name)(v, **kw),
                    lambda v: getattr(torch.fft, name)(v, **kw), x)


def test_gradient_of_abs_squared_spectrum():
    def f(L, v):
        return (L.fft.rfft(v, n=10).abs() ** 2).sum() + L.fft.irfft(L.fft.fft(v), n=7).sum()
    xe, xt = ember.tensor(XR, requires_grad=True), torch.tensor(XR, requires_grad=True)
    f(ember, xe).backward()
    f(torch, xt).backward()
    _same(xe.grad, xt.grad, 1e-9)


def test_round_trips():
    x = ember.tensor(XR)
    np.testing.assert_allclose(EF.irfft(EF.rfft(x), n=6)._data, XR, atol=1e-12)
    np.testing.assert_allclose(EF.ifftn(EF.fftn(ember.tensor(XC)))._data, XC, atol=1e-12)
    assert EF.rfft(ember.tensor(XR.astype(np.float32))).dtype is ember.complex64
    assert EF.irfft(ember.tensor(XC.astype(np.complex64))).dtype is ember.float32
    assert EF.fft(ember.tensor([1, 2, 3])).dtype is ember.complex64  # integers: default float


@pytest.mark.parametrize("name", ["fftshift", "ifftshift"])
@pytest.mark.parametrize("dim", [None, 0, (0, 1), -1])
def test_shifts(name, dim):
    x = RNG.standard_normal((5, 4))
    _same(getattr(EF, name)(ember.tensor(x), dim=dim),
          getattr(torch.fft, name)(torch.tensor(x), dim=dim), 0)
    _check_grad(lambda v: getattr(EF, name)(v, dim=dim),
                lambda v: getattr(torch.fft, name)(v, dim=dim), XC)


@pytest.mark.parametrize("n", [1, 4, 5, 8])
def test_frequencies(n):
    _same(EF.fftfreq(n), torch.fft.fftfreq(n), 1e-7)
    _same(EF.fftfreq(n, 0.25, dtype=ember.float64), torch.fft.fftfreq(n, 0.25, dtype=torch.float64),
          1e-12)
    _same(EF.rfftfreq(n, 2.0), torch.fft.rfftfreq(n, 2.0), 1e-7)


@pytest.mark.parametrize("call,match", [
    (lambda: EF.fft(ember.tensor(XC), norm="bad"), "fft.fft: Invalid normalization mode"),
    (lambda: EF.fft(ember.tensor(XC), n=0), "fft.fft: Invalid number of data points"),
    (lambda: EF.rfft(ember.tensor(XC)), "fft.rfft: rfftn expects a real input"),
    (lambda: EF.fft(ember.tensor(XC), dim=2), "fft.fft: Dimension out of range"),
    (lambda: EF.fftn(ember.tensor(XC), s=(2, 2), dim=(0,)), "fft.fftn: When given, dim and shape"),
    (lambda: EF.fft2(ember.tensor(XC), dim=(0, 0)), "fft.fft2: FFT dims must be unique"),
    (lambda: EF.fft(ember.ones(3, dtype=ember.float16)), "fft.fft: Unsupported dtype"),
    (lambda: EF.fft("x"), "fft.fft: argument 'input' must be a Tensor"),
    (lambda: EF.fftfreq(0), "fft.fftfreq: "),
])
def test_errors_name_the_function(call, match):
    with pytest.raises(EmberError, match=match):
        call()


def test_traced_fft_matches_eager():
    from ember import jit

    def f(x):
        return EF.irfft(EF.rfft(x) * 2, n=6).sum(0)

    x = ember.tensor(XR.astype(np.float32))
    traced = jit.trace(f, (x,))
    x2 = ember.tensor(RNG.standard_normal((4, 6)).astype(np.float32))
    np.testing.assert_allclose(traced(x2)._data, f(x2)._data, rtol=1e-6, atol=1e-6)
