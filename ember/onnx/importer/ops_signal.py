"""DFT (opsets 17 and 20) as matrix products with cosine/sine tables, so it is differentiable:
forward, inverse, one-sided (rfft) and inverse one-sided (irfft), any axis, dft_length."""
import numpy as np

import ember
from ember.onnx.importer._util import scalar
from ember.onnx.importer.registry import importer


def _fit(t, need):
    m = t.shape[-1]
    if m > need:
        return ember.narrow(t, -1, 0, need)
    if m < need:
        return ember.cat([t, ember.zeros(*t.shape[:-1], need - m, dtype=t.dtype)], -1)
    return t


def _dft(x, n, axis, inverse, onesided):
    ax = axis % x.dim()
    xr = ember.movedim(x[..., 0], ax, -1)
    xi = ember.movedim(x[..., 1], ax, -1) if x.shape[-1] == 2 else None
    irfft = inverse and onesided
    if n is None:
        n = 2 * (xr.shape[-1] - 1) if irfft else xr.shape[-1]
    rows = n // 2 + 1 if irfft else n
    cols = n // 2 + 1 if onesided and not inverse else n
    xr = _fit(xr, rows)
    xi = None if xi is None else _fit(xi, rows)
    theta = 2 * np.pi * np.outer(np.arange(rows), np.arange(cols)) / n
    c, s = np.cos(theta), np.sin(theta)
    if irfft:
        w = np.full((rows, 1), 2.0)
        w[0] = 1.0
        if n % 2 == 0:
            w[-1] = 1.0
        c, s = c * w, s * w
    dt = x.dtype.numpy
    C, S = ember.tensor(c.astype(dt)), ember.tensor(s.astype(dt))
    if not inverse:
        re = ember.matmul(xr, C)
        im = -ember.matmul(xr, S)
        if xi is not None:
            re, im = re + ember.matmul(xi, S), im + ember.matmul(xi, C)
    else:
        re = ember.matmul(xr, C) / n
        im = ember.matmul(xr, S) / n
        if xi is not None:
            re, im = re - ember.matmul(xi, S) / n, im + ember.matmul(xi, C) / n
    re = ember.movedim(re, -1, ax)
    if irfft:
        return re.unsqueeze(-1)
    return ember.stack([re, ember.movedim(im, -1, ax)], -1)


@importer("DFT", since=20, attrs={"inverse": 0, "onesided": 0})
def dft20(a, x, length=None, axis=None):
    n = None if length is None else int(scalar(length))
    ax = -2 if axis is None else int(scalar(axis))
    return _dft(x, n, ax, a["inverse"], a["onesided"])


@importer("DFT", since=17, attrs={"axis": 1, "inverse": 0, "onesided": 0})
def dft17(a, x, length=None):
    n = None if length is None else int(scalar(length))
    return _dft(x, n, a["axis"], a["inverse"], a["onesided"])


@importer("STFT", since=17, attrs={"onesided": 1})
def stft(a, signal, frame_step, window=None, frame_length=None):
    """Frames of the signal (times the window), each through the DFT."""
    step = int(scalar(frame_step))
    n = int(scalar(frame_length)) if frame_length is not None else window.shape[0]
    length = signal.shape[1]
    frames = (length - n) // step + 1
    starts = np.arange(frames) * step
    idx = ember.tensor((starts[:, None] + np.arange(n)[None, :]).reshape(-1).astype(np.int64))
    fr = ember.index_select(signal, 1, idx).reshape(signal.shape[0], frames, n,
                                                   signal.shape[2])
    if window is not None:
        fr = fr * window.reshape(1, 1, n, 1)
    return _dft(fr, n, 2, False, bool(a["onesided"]))


def _check_mel(a, n):
    from ember.onnx.importer import storage_types as st
    if not st.storable(a["output_datatype"]):
        from ember.onnx.importer.load import dtype_name
        return ("output_datatype", f"= {dtype_name(a['output_datatype'])} has no ember dtype")
    return None


@importer("MelWeightMatrix", since=17, attrs={"output_datatype": 1}, check=_check_mel)
def mel_weight_matrix(a, num_mel_bins, dft_length, sample_rate, lower_edge_hertz,
                      upper_edge_hertz):
    """The [dft_length // 2 + 1, num_mel_bins] matrix of triangular mel filters: num_mel_bins + 2
    points equally spaced on the mel scale (mel = 2595 log10(1 + f / 700)) between the edges,
    mapped to DFT bins floor((dft_length + 1) f / sample_rate); filter i rises from point i to
    point i + 1 and falls to point i + 2."""
    from ember.onnx.importer import storage_types as st
    m, n, sr = int(scalar(num_mel_bins)), int(scalar(dft_length)), int(scalar(sample_rate))
    lo, hi = float(scalar(lower_edge_hertz)), float(scalar(upper_edge_hertz))
    lo_mel = 2595 * np.log1p(lo / 700) / np.log(10)
    hi_mel = 2595 * np.log1p(hi / 700) / np.log(10)
    step = (hi_mel - lo_mel) / (m + 2)
    hz = 700 * np.expm1((np.arange(m + 2) * step + lo_mel) / 2595 * np.log(10))
    bins = ((n + 1) * hz // sr).astype(np.int64)
    out = np.zeros((n // 2 + 1, m))
    for i in range(m):
        left, center, right = bins[i], bins[i + 1], bins[i + 2]
        if center == left:
            out[center, i] = 1.0
        else:
            j = np.arange(left, center + 1)
            out[j, i] = (j - left) / (center - left)
        if right > center:
            j = np.arange(center, right)
            out[j, i] = (right - j) / (right - center)
    t = a["output_datatype"]
    if st.simulated(t):
        return st.widen(out.astype(st.np_dtype(t)), t, "MelWeightMatrix")
    return ember.tensor(out.astype(st.np_dtype(t)))
