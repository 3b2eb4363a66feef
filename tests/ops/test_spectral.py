"""Spectral ops (ember/ops/spectral.py) against torch: the window factories, and stft / istft: forward on its cases (centering, hop, win_length, windows,
normalized, onesided, return_complex, length), gradients of the signal and of the window, and the
errors torch gives. Where torch's istft gives the window no gradient (a real window, or one
shorter than n_fft) ember's is checked by float64 gradcheck instead."""

import numpy as np
import pytest

import ember
from ember.autograd import gradcheck

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore:A window was not provided:UserWarning")

STFT = [((100,), dict(n_fft=10, return_complex=True)),
        ((100,), dict(n_fft=10, return_complex=False)),
        ((10,), dict(n_fft=7, center=False, return_complex=True)),
        ((10, 100), dict(n_fft=16, hop_length=4, center=False, return_complex=True)),
        ((10,), dict(n_fft=7, center=True, return_complex=True)),
        ((3, 100), dict(n_fft=16, hop_length=4, win_length=12, normalized=True,
                        return_complex=True, window="hann")),
        ((50,), dict(n_fft=8, onesided=False, return_complex=True, window="hann")),
        ((64,), dict(n_fft=16, pad_mode="constant", return_complex=True, window="hann")),
        ((62,), dict(n_fft=16, hop_length=4, win_length=9, center=False, align_to_window=True,
                     return_complex=True, window="hann"))]


def _windows(kw, rng=None, complex_window=False):
    kt, ke = dict(kw), dict(kw)
    if kw.get("window") == "hann":
        wl = kw.get("win_length", kw["n_fft"])
        w = torch.hann_window(wl, dtype=torch.float64).numpy()
        if complex_window:
            w = w + 0.3j * rng.standard_normal(wl)
        kt["window"] = torch.tensor(w, requires_grad=True)
        ke["window"] = ember.tensor(w, requires_grad=True)
    return kt, ke


@pytest.mark.parametrize("shape,kw", STFT, ids=[str(i) for i in range(len(STFT))])
def test_stft_matches_torch(shape, kw):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape)
    kt, ke = _windows(kw)
    xt, xe = torch.tensor(x, requires_grad=True), ember.tensor(x, requires_grad=True)
    yt, ye = torch.stft(xt, **kt), ember.stft(xe, **ke)
    assert tuple(ye.shape) == tuple(yt.shape) and ye.is_complex() == yt.is_complex()
    np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), atol=1e-10)
    rt = torch.view_as_real(yt) if yt.is_complex() else yt
    re = ember.view_as_real(ye) if ye.is_complex() else ye
    g = rng.standard_normal(tuple(rt.shape))
    (rt * torch.tensor(g)).sum().backward()
    (re * ember.tensor(g)).sum().backward()
    np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), atol=1e-10)
    if "window" in kw:
        np.testing.assert_allclose(ke["window"].grad.numpy(), kt["window"].grad.numpy(),
                                   atol=1e-9)


ISTFT = [((6, 11), dict(n_fft=10)),
         ((6, 3), dict(n_fft=6, onesided=False, return_complex=True)),
         ((10, 3), dict(n_fft=10, onesided=False)),            # Hermitian: first half used
         ((6, 4), dict(n_fft=10, onesided=True)),
         ((10, 6, 11), dict(n_fft=10, center=False)),
         ((10, 6, 11), dict(n_fft=10, center=True, length=30)),
         ((9, 20), dict(n_fft=16, hop_length=4, win_length=12, window="hann",
                        normalized=True, length=60)),
         ((10, 6), dict(n_fft=10, return_complex=True, window="hann", complex=True))]


@pytest.mark.parametrize("shape,kw", ISTFT, ids=[str(i) for i in range(len(ISTFT))])
def test_istft_matches_torch(shape, kw):
    rng = np.random.default_rng(1)
    kw = dict(kw)
    cw = kw.pop("complex", False)
    x = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    kt, ke = _windows(kw, rng, cw)
    xt, xe = torch.tensor(x, requires_grad=True), ember.tensor(x, requires_grad=True)
    yt, ye = torch.istft(xt, **kt), ember.istft(xe, **ke)
    assert tuple(ye.shape) == tuple(yt.shape) and ye.is_complex() == yt.is_complex()
    np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), atol=1e-10)
    w = rng.standard_normal(tuple(yt.shape))
    (yt.real if yt.is_complex() else yt).mul(torch.tensor(w)).sum().backward()
    (ye.real if ye.is_complex() else ye).mul(ember.tensor(w)).sum().backward()
    np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), atol=1e-10)
    if "window" in kw and kt["window"].grad is not None:
        np.testing.assert_allclose(ke["window"].grad.numpy(), kt["window"].grad.numpy(),
                                   atol=1e-9)


@pytest.mark.parametrize("win_length", [8, 12])
def test_istft_window_gradient_by_gradcheck(win_length):
    """torch gives the window no gradient in these cases (a real window; one shorter than
    n_fft): ember's is checked against finite differences."""
    rng = np.random.default_rng(2)
    x = ember.tensor(rng.standard_normal((7, 6)) + 1j * rng.standard_normal((7, 6)))
    w = ember.tensor(np.hanning(win_length + 2)[1:-1] + 0.1, requires_grad=True)
    assert gradcheck(lambda w: ember.istft(x, 12, hop_length=3, win_length=win_length,
                                           window=w), (w,))


def test_spectral_errors_as_torch():
    with pytest.raises(ember.EmberError, match="requires the return_complex parameter"):
        ember.stft(ember.randn(32), 8)
    with pytest.raises(ember.EmberError, match="complex-valued input"):
        ember.istft(ember.randn(5, 4), 8)
    with pytest.raises(ember.EmberError, match="window overlap add min"):
        ember.istft(ember.randn(9, 10, dtype=ember.float64).to(ember.complex128), 16,
                    hop_length=4, window=ember.tensor(np.hanning(16)), center=False)
    with pytest.warns(UserWarning, match="A window was not provided"):
        ember.stft(ember.randn(32), 8, return_complex=True)


@pytest.mark.parametrize("name", ["hann", "hamming", "blackman", "bartlett", "kaiser"])
@pytest.mark.parametrize("periodic", [True, False])
def test_window_factories_match_torch(name, periodic):
    for n in (0, 1, 2, 7, 8):
        t = getattr(torch, name + "_window")(n, periodic=periodic, dtype=torch.float64)
        e = getattr(ember, name + "_window")(n, periodic=periodic, dtype=ember.float64)
        np.testing.assert_allclose(e.numpy(), t.numpy(), atol=1e-12)
    assert ember.hann_window(4).dtype == ember.get_default_dtype()
    np.testing.assert_allclose(ember.hamming_window(9, False, 0.6, 0.3).numpy(),
                               torch.hamming_window(9, False, 0.6, 0.3).numpy(), rtol=1e-6)
    np.testing.assert_allclose(ember.kaiser_window(9, True, 5.0).numpy(),
                               torch.kaiser_window(9, True, 5.0).numpy(), rtol=1e-6)


@pytest.mark.parametrize("name", ["hann", "hamming", "blackman"])
def test_float32_windows_are_computed_in_float32_as_torch(name):
    # rounded from float64 they differed from torch's by up to 4 float32 ulps (2.4e-7)
    for n in (16, 64, 257):
        e = getattr(ember, name + "_window")(n)
        t = getattr(torch, name + "_window")(n)
        assert e.dtype == ember.float32
        np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=0, atol=1.2e-7)


@pytest.mark.parametrize("n", [9, 31, 64, 100])
def test_blackman_window_ends_are_exact_zeros_as_torch(n):
    # torch sums 0.08 cos(4x) - 0.5 cos(2x) + 0.42, which is exactly 0 at the ends in float64;
    # summed in the other order they were -1.4e-17, and sqrt(window) gave NaN where torch's is 0
    for periodic in (True, False):
        e = ember.blackman_window(n, periodic=periodic, dtype=ember.float64)
        t = torch.blackman_window(n, periodic=periodic, dtype=torch.float64)
        assert e[0].item() == t[0].item() == 0.0
        np.testing.assert_array_equal(e.sqrt().isnan().numpy(), t.sqrt().isnan().numpy())
        np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=0, atol=2e-16)
    for name in ("hann", "hamming", "bartlett"):
        np.testing.assert_allclose(getattr(ember, name + "_window")(n, dtype=ember.float64),
                                   getattr(torch, name + "_window")(n, dtype=torch.float64),
                                   rtol=0, atol=2e-16)


