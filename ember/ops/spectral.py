"""``stft`` and ``istft``, as torch's, written in spec ops (framing by ``unfold``, the FFT ops of
``ember.ops.fft``, overlap-add by ``index_add``), so autograd and tracing follow from theirs; and
torch's window factories (``hann_window``, ...)."""
import warnings

import numpy as np

from ember.autograd._generated import functions as G
from ember.errors import EmberRuntimeError, EmberValueError
from ember.tensor import Tensor

__all__ = ["stft", "istft", "hann_window", "hamming_window", "blackman_window",
           "bartlett_window", "kaiser_window"]


def _window(window, win_length, n_fft, dtype, op):
    """The window zero-padded on both sides to ``n_fft`` (a rectangular one when None)."""
    if window is None:
        w = G.ones((win_length,), dtype.numpy)
    else:
        if window.dim() != 1 or window.shape[0] != win_length:
            raise EmberRuntimeError(f"{op}: expected a 1D window tensor of size equal to "
                                    f"win_length={win_length}, but got window with size "
                                    f"{list(window.shape)}")
        w = window
    left = (n_fft - win_length) // 2
    if left or n_fft - win_length - left:
        w = G.pad(w, (left, n_fft - win_length - left), "constant", 0.0)
    return w


def _lengths(n_fft, hop_length, win_length, op):
    hop = n_fft // 4 if hop_length is None else int(hop_length)
    win = n_fft if win_length is None else int(win_length)
    if n_fft <= 0 or hop <= 0:
        raise EmberRuntimeError(f"{op}: expected n_fft > 0 and hop_length > 0, got n_fft="
                                f"{n_fft} and hop_length={hop}")
    if not 0 < win <= n_fft:
        raise EmberRuntimeError(f"{op}: expected 0 < win_length <= n_fft, but got "
                                f"win_length={win}")
    return hop, win


def stft(input, n_fft, hop_length=None, win_length=None, window=None, center=True,
         pad_mode="reflect", normalized=False, onesided=None, return_complex=None,
         align_to_window=None):
    """Short-time Fourier transform of a 1-D (L) or 2-D (B, L) signal: ``(B?, n_freq,
    n_frames)`` complex (``return_complex=False``: its real view ``(..., 2)``), as torch.stft."""
    op = "stft"
    if return_complex is None:
        if not input.is_complex() and (window is None or not window.is_complex()):
            raise EmberRuntimeError("stft requires the return_complex parameter be given for "
                                    "real inputs, and will further require that "
                                    "return_complex=True in a future PyTorch release.")
        return_complex = True
    if align_to_window is not None and center:
        raise EmberValueError("stft: align_to_window should only be set when center = False")
    if window is None:
        warnings.warn("A window was not provided. A rectangular window will be applied,which is "
                      "known to cause spectral leakage. Other windows such as "
                      "ember.hann_window or ember.hamming_window are recommended to reduce "
                      "spectral leakage.To suppress this warning and use a rectangular window, "
                      "explicitly set `window=ember.ones(n_fft)`.", UserWarning, stacklevel=2)
    if input.dim() not in (1, 2):
        raise EmberRuntimeError(f"stft: expected a 1D or 2D tensor, but got {input.dim()}D "
                                f"{list(input.shape)}")
    n_fft = int(n_fft)
    hop, win = _lengths(n_fft, hop_length, win_length, op)
    x = input if input.dim() == 2 else G.unsqueeze(input, 0)
    if center:
        p = n_fft // 2
        x = G.squeeze(G.pad(G.unsqueeze(x, 1), (p, p), pad_mode, 0.0), [1])
    elif align_to_window and n_fft > win:   # frames start where the (centred) window does
        left = (n_fft - win) // 2
        x = G.pad(x, (left, n_fft - win - left), "constant", 0.0)
    L = x.shape[-1]
    if not 0 < n_fft <= L:
        raise EmberRuntimeError(f"stft: expected 0 < n_fft <= {L} (the padded signal's "
                                f"length), but got n_fft={n_fft}")
    w = _window(window, win, n_fft, x.dtype if not x.is_complex() else
                x.dtype.to_real(), op)
    frames = G.mul(G.unfold(x, -1, n_fft, hop), w)          # (B, n_frames, n_fft)
    complex_in = input.is_complex() or (window is not None and window.is_complex())
    if onesided is None:
        onesided = not complex_in
    if onesided and complex_in:
        raise EmberRuntimeError("stft: cannot have onesided output if window or input is "
                                "complex")
    from ember.ops import fft
    norm = "ortho" if normalized else "backward"
    spec = fft.rfft(frames, dim=-1, norm=norm) if onesided else fft.fft(frames, dim=-1,
                                                                         norm=norm)
    spec = G.transpose(spec, -1, -2)                        # (B, n_freq, n_frames)
    if input.dim() == 1:
        spec = G.squeeze(spec, [0])
    return spec if return_complex else G.view_as_real(spec)


def istft(input, n_fft, hop_length=None, win_length=None, window=None, center=True,
          normalized=False, onesided=None, length=None, return_complex=False):
    """Inverse of ``stft``: the signal whose short-time transform is ``input`` (B?, n_freq,
    n_frames), by inverse FFTs, the window and overlap-add divided by the summed squared
    window, as torch.istft."""
    op = "istft"
    if not input.is_complex():
        raise EmberRuntimeError("istft requires a complex-valued input tensor matching the "
                                "output from stft with return_complex=True.")
    if input.dim() not in (2, 3):
        raise EmberRuntimeError(f"istft: expected a tensor with 2 or 3 dimensions of complex "
                                f"dtype, got {input.dim()}D {list(input.shape)}")
    n_fft = int(n_fft)
    hop, win = _lengths(n_fft, hop_length, win_length, op)
    x = input if input.dim() == 3 else G.unsqueeze(input, 0)
    n_freq, n_frames = x.shape[-2], x.shape[-1]
    if onesided is None:
        onesided = n_freq != n_fft
    expected = n_fft // 2 + 1 if onesided else n_fft
    if n_freq != expected:
        raise EmberRuntimeError(f"istft: expected the frequency dimension (size -2) of the "
                                f"input to be {'onesided (n_fft / 2 + 1)' if onesided else 'equal to n_fft'}"
                                f" = {expected}, but got {n_freq}")
    if onesided and return_complex:
        raise EmberRuntimeError("istft: cannot have onesided output if window or input is "
                                "complex")
    from ember.ops import fft
    norm = "ortho" if normalized else "backward"
    spec = G.transpose(x, -1, -2)                           # (B, n_frames, n_freq)
    if not return_complex:
        if window is not None and window.is_complex():
            raise EmberRuntimeError("istft: complex windows need return_complex=True")
        if not onesided:     # a real signal: its spectrum is Hermitian, use the first half
            spec = G.narrow(spec, -1, 0, n_fft // 2 + 1)
        frames = fft.irfft(spec, n=n_fft, dim=-1, norm=norm)
    else:
        frames = fft.ifft(spec, dim=-1, norm=norm)
    real_dtype = frames.dtype if not frames.is_complex() else frames.dtype.to_real()
    w = _window(window, win, n_fft, real_dtype, op)
    frames = G.mul(frames, w)
    total = n_fft + hop * (n_frames - 1)
    y = _overlap_add(frames, hop, total)                    # (B, total)
    # the divisor: w**2 (complex for a complex window) summed as the frames overlap; it
    # depends on the window, so the window's gradient goes through it too, as torch's
    wsq = G.mul(w, w)
    env = _overlap_add(G.expand(G.unsqueeze(G.unsqueeze(wsq, 0), 0), (1, n_frames, n_fft)),
                       hop, total)[0]
    start = n_fft // 2 if center else 0
    end = total - n_fft // 2 if center else total
    if length is not None:
        end = start + int(length)
    seg = G.narrow(env, 0, start, min(end, total) - start)
    if seg.numel() and float(np.abs(seg._data).min()) < 1e-11:
        raise EmberRuntimeError("istft: window overlap add min: the window's squared overlap "
                                "is below 1e-11 somewhere in the output (choose another "
                                "window or hop_length)")
    y = G.div(G.narrow(y, -1, start, min(end, total) - start), seg)
    if end > total:                                          # length beyond the frames
        y = G.pad(y, (0, end - total), "constant", 0.0)
    return y if input.dim() == 3 else G.squeeze(y, [0])


def _overlap_add(frames, hop, total):
    """Sum of ``frames`` (B, n_frames, n_fft) placed every ``hop`` samples: (B, total)."""
    n_frames, n_fft = frames.shape[-2], frames.shape[-1]
    idx = (np.arange(n_frames)[:, None] * hop + np.arange(n_fft)[None, :]).reshape(-1)
    flat = G.reshape(frames, (frames.shape[0], n_frames * n_fft))
    out = G.zeros((frames.shape[0], total), frames._data.dtype)
    return G.index_add(out, 1, Tensor._make(idx.astype(np.int64)), flat)


# ------------------------------------------------------------------ window functions (torch.*_window)
def _window_array(name, window_length, periodic, fn, dtype, requires_grad):
    from ember.ops import creation
    if not isinstance(window_length, int) or isinstance(window_length, bool) or \
            window_length < 0:
        raise EmberRuntimeError(f"{name}: window_length must be a non-negative integer, got "
                                f"{window_length!r}")
    if window_length <= 1:
        w = np.ones(window_length)
    else:
        n = window_length + 1 if periodic else window_length
        # a float32 window is computed in float32, as torch does (Python scalars stay weak)
        target = _default_float() if dtype is None else dtype
        work = np.float32 if getattr(target, "numpy", None) == np.float32 else np.float64
        w = fn(np.arange(n, dtype=work), n)[:window_length]
    out = creation.tensor(w, dtype=dtype)
    if dtype is None:
        out = out.to(_default_float())
    return out.requires_grad_(requires_grad) if requires_grad else out


def _default_float():
    from ember._dtype import get_default_dtype
    return get_default_dtype()


def _hamming_like(alpha, beta):
    """alpha - beta cos(2 pi n / N) in torch's order of operations (its float64 values)."""
    return lambda k, n: np.cos(k * (2 * np.pi / (n - 1))) * -beta + alpha


def _blackman(k, n):
    """0.42 - 0.5 cos(2 pi n / N) + 0.08 cos(4 pi n / N) in torch's order of operations, so the
    float64 ends are exactly 0 as torch's (not -1.4e-17: a square root of the window stays
    real)."""
    x = k * (np.pi / (n - 1))
    return np.cos(x * 4) * 0.08 - np.cos(x * 2) * 0.5 + 0.42


def _bartlett(k, n):
    """2n / N rising, then 2 - 2n / N, as torch.bartlett_window computes it."""
    w = k * (2.0 / (n - 1))
    half = ((n - 1) >> 1) + 1
    w[half:] = w[half:] * -1 + 2
    return w


def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                requires_grad=False):
    """The Hann window, 0.5 - 0.5 cos(2 pi n / N) (N = window_length when ``periodic``, else
    window_length - 1), as torch.hann_window."""
    return _window_array("hann_window", window_length, periodic, _hamming_like(0.5, 0.5), dtype,
                         requires_grad)


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None,
                   layout=None, device=None, requires_grad=False):
    """The Hamming window, alpha - beta cos(2 pi n / N), as torch.hamming_window."""
    return _window_array("hamming_window", window_length, periodic,
                         _hamming_like(alpha, beta), dtype, requires_grad)


def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    requires_grad=False):
    """The Blackman window, 0.42 - 0.5 cos(2 pi n / N) + 0.08 cos(4 pi n / N)."""
    return _window_array("blackman_window", window_length, periodic,
                         _blackman, dtype, requires_grad)


def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    requires_grad=False):
    """The Bartlett (triangular) window, 1 - |2n / N - 1|, as torch.bartlett_window."""
    return _window_array("bartlett_window", window_length, periodic,
                         _bartlett, dtype, requires_grad)


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None,
                  device=None, requires_grad=False):
    """The Kaiser window, I0(beta sqrt(1 - (2n / N - 1)^2)) / I0(beta), as torch.kaiser_window."""
    return _window_array("kaiser_window", window_length, periodic,
                         lambda k, n: np.i0(beta * np.sqrt(
                             1 - ((k - (n - 1) / 2.0) / ((n - 1) / 2.0)) ** 2)) / np.i0(beta),
                         dtype, requires_grad)
