"""Signal processing written in torch: an stft / istft round trip with hamming and hann windows
(center, onesided, return_complex, normalized), magnitude and phase (abs, angle, polar) and a
Griffin-Lim step; a hand-built mel filterbank and MFCCs through a DCT-II matrix with deltas
from F.pad replicate + conv1d; FIR low-pass design (sinc * window), filtering and 2x
resampling with F.conv1d (groups per channel, stride, conv_transpose1d), padding modes
reflect / replicate / circular; autocorrelation and pitch through rfft / irfft, fftshift and
fftfreq; torch.signal.windows; spectral-gating noise reduction with a noise-profile quantile;
Tensor.unfold framing and overlap-add with F.fold; diff, cumsum, mu-law quantisation with
searchsorted / bucketize; histc; robust statistics with kthvalue, median and nanmedian."""
import math

import numpy as np
import torch
import torch.nn.functional as F

rng = np.random.default_rng(2024)
torch.set_default_dtype(torch.float64)


def fmt(v):
    s = f"{v:.10g}"
    return f"{v:.14f}" if "e" in s else s  # the test reads exponent notation as words


f = lambda t: " ".join(fmt(v) for v in torch.as_tensor(t).flatten().tolist())

sr = 800
t = torch.arange(1024) / sr
clean = torch.sin(2 * math.pi * 50 * t) + 0.5 * torch.sin(2 * math.pi * 130 * t + 0.3)
noise = torch.from_numpy(rng.standard_normal(1024) * 0.2)
wave = clean + noise
batch = torch.stack([wave, clean])  # (2, T)

# ---- stft / istft -------------------------------------------------------------------------------
n_fft, hop = 128, 32
win = torch.hamming_window(n_fft)
spec = torch.stft(batch, n_fft, hop_length=hop, win_length=n_fft, window=win, center=True,
                  pad_mode="reflect", return_complex=True)
mag, phase = spec.abs(), spec.angle()
rebuilt = torch.polar(mag, phase)
back = torch.istft(rebuilt, n_fft, hop_length=hop, window=win, length=batch.shape[-1])
spec_n = torch.stft(wave, 64, hop_length=16, window=torch.hann_window(64), normalized=True,
                    return_complex=True, onesided=False)
spec_short = torch.stft(wave, 64, hop_length=16, win_length=48, window=torch.hann_window(48),
                        return_complex=True)
peak_bin = mag[0].mean(-1).argmax()
print("stft", tuple(spec.shape), f((back - batch).abs().max() < 1e-10), f(mag[0, :4, 5]),
      f(phase[1, 10:12, 3]), fmt(peak_bin.item() * sr / n_fft), tuple(spec_n.shape),
      f(spec_n.abs().sum()), f(spec_short.abs()[:3, 2]))

# one Griffin-Lim iteration from a fixed phase
angles = torch.polar(torch.ones_like(mag[0]), torch.from_numpy(rng.uniform(-math.pi, math.pi,
                                                                        tuple(mag[0].shape))))
for _ in range(3):
    inv = torch.istft(mag[0] * angles, n_fft, hop_length=hop, window=win, length=1024)
    rebuilt = torch.stft(inv, n_fft, hop_length=hop, window=win, return_complex=True)
    angles = torch.exp(1j * rebuilt.angle())
gl_err = (rebuilt.abs() - mag[0]).pow(2).mean().sqrt()
print("griffin", f(gl_err), f(torch.view_as_real(angles[3:5, 7])))

# ---- mel filterbank and MFCC --------------------------------------------------------------------
n_mels, n_freqs = 12, n_fft // 2 + 1


def hz_to_mel(hz):
    return 2595.0 * torch.log10(1.0 + hz / 700.0)


def mel_to_hz(mel):
    return 700.0 * (10 ** (mel / 2595.0) - 1.0)


all_freqs = torch.linspace(0, sr // 2, n_freqs)
m_pts = torch.linspace(hz_to_mel(torch.tensor(0.0)), hz_to_mel(torch.tensor(sr / 2)), n_mels + 2)
f_pts = mel_to_hz(m_pts)
f_diff = f_pts[1:] - f_pts[:-1]
slopes = f_pts.unsqueeze(0) - all_freqs.unsqueeze(1)
down = -slopes[:, :-2] / f_diff[:-1]
up = slopes[:, 2:] / f_diff[1:]
fb = torch.max(torch.zeros(1), torch.min(down, up))  # (n_freqs, n_mels)
enorm = 2.0 / (f_pts[2:n_mels + 2] - f_pts[:n_mels])
fb = fb * enorm.unsqueeze(0)
power = mag.pow(2)
mel = torch.matmul(power.transpose(-1, -2), fb).transpose(-1, -2)  # (B, n_mels, frames)
log_mel = torch.log(mel.clamp(min=1e-10))
n_mfcc = 8
n = torch.arange(n_mels, dtype=torch.float64)
k = torch.arange(n_mfcc, dtype=torch.float64).unsqueeze(1)
dct = torch.cos(math.pi / n_mels * (n + 0.5) * k)  # (n_mfcc, n_mels)
dct[0] *= 1.0 / math.sqrt(2.0)
dct *= math.sqrt(2.0 / n_mels)
mfcc = torch.einsum("km,bmt->bkt", dct, log_mel)
ortho_err = (dct @ dct.T - torch.eye(n_mfcc)).abs().max()
# deltas: a regression over +-2 frames, edges replicated
N = 2
denom = 2 * sum(i * i for i in range(1, N + 1))
kernel = torch.arange(-N, N + 1, dtype=torch.float64).repeat(n_mfcc, 1, 1)  # (C, 1, 2N+1)
padded = F.pad(mfcc, (N, N), mode="replicate")
delta = F.conv1d(padded, kernel, groups=n_mfcc) / denom
cmvn = (mfcc - mfcc.mean(-1, keepdim=True)) / mfcc.std(-1, keepdim=True)
print("mfcc", f(fb.sum(0)[:4]), f(mfcc[0, :3, 4]), f(delta[1, :3, 6]), f(cmvn[0, 1, :3]),
      f(ortho_err < 1e-12), tuple(delta.shape))

# ---- FIR filtering and resampling ------------------------------------------------------------
taps = 31
cutoff = 80.0 / (sr / 2)
m = torch.arange(taps) - (taps - 1) / 2
h = cutoff * torch.sinc(cutoff * m) * torch.blackman_window(taps, periodic=False)
h = h / h.sum()
x = batch.unsqueeze(1)  # (B, 1, T)
low = F.conv1d(F.pad(x, ((taps - 1) // 2, (taps - 1) // 2), mode="reflect"), h.flip(0).view(1, 1, -1))
# a filter bank applied per channel with groups
bank = torch.stack([h, torch.tensor([1.0, -1.0]).repeat(16)[:taps] * h])  # low and high pass
two_ch = batch.unsqueeze(0)  # (1, 2, T): each signal a channel
per_ch = F.conv1d(F.pad(two_ch, (15, 15), mode="circular"), bank.unsqueeze(1), groups=2)
down2 = F.conv1d(F.pad(x, (15, 15), mode="replicate"), h.view(1, 1, -1), stride=2)
up_kernel = (2 * h).view(1, 1, -1)
up2 = F.conv_transpose1d(down2, up_kernel, stride=2, padding=15, output_padding=1)
lp_energy = low.pow(2).mean(-1).squeeze(1) / x.pow(2).mean(-1).squeeze(1)
print("fir", f(h[:4]), f(lp_energy), f(per_ch[0, :, 100:102]), tuple(down2.shape),
      tuple(up2.shape), f(up2[0, 0, 200:203]), f(F.pad(t[:5].view(1, 1, -1), (2, 3),
                                                        mode="circular")))

# ---- autocorrelation and pitch ------------------------------------------------------------------
sig = clean - clean.mean()
nfft = 2 * sig.numel()
S = torch.fft.rfft(sig, n=nfft)
ac = torch.fft.irfft(S * S.conj(), n=nfft)[: sig.numel()]
ac = ac / ac[0]
min_lag = 5
lag = ac[min_lag:200].argmax() + min_lag
freqs = torch.fft.fftfreq(16, d=1 / sr)
shifted = torch.fft.fftshift(freqs)
spectrum = torch.fft.fftshift(torch.fft.fft(sig[:16]))
rfreqs = torch.fft.rfftfreq(n_fft, 1 / sr)
print("autocorr", f(ac[1:4]), int(lag), fmt(sr / lag.item()), f(shifted[:3]),
      f(torch.fft.ifftshift(shifted)[:3]), f(spectrum.abs()[6:9]), f(rfreqs[-2:]))

# ---- torch.signal.windows ------------------------------------------------------------------------
from torch.signal import windows

ws = [windows.hann(9), windows.hamming(9, sym=False), windows.blackman(9),
      windows.gaussian(9, std=2.0), windows.kaiser(9, beta=8.0), windows.bartlett(9),
      windows.cosine(9), windows.exponential(9, tau=3.0), windows.nuttall(9),
      windows.general_hamming(9, alpha=0.6),
      windows.general_cosine(9, a=[0.46, 0.23, 0.31])]
builtin = [torch.hann_window(9, periodic=False), torch.kaiser_window(9, periodic=False, beta=8.0),
           torch.bartlett_window(9), torch.blackman_window(9)]
print("windows", f(torch.stack(ws).sum(1)), f(torch.stack(builtin)[:, 2]),
      f((ws[0] - builtin[0]).abs().max()))

# ---- spectral gating -----------------------------------------------------------------------------
noise_clip = torch.from_numpy(rng.standard_normal(512) * 0.2)
gwin = torch.hann_window(n_fft)
noise_spec = torch.stft(noise_clip, n_fft, hop, window=gwin, return_complex=True)
noise_db = 20 * torch.log10(noise_spec.abs().clamp_min(1e-8))
thresh = noise_db.mean(-1) + 1.5 * noise_db.std(-1)
thresh_q = torch.quantile(noise_db, 0.9, dim=-1)
sig_spec = torch.stft(wave, n_fft, hop, window=gwin, return_complex=True)
sig_db = 20 * torch.log10(sig_spec.abs().clamp_min(1e-8))
mask = (sig_db > thresh.unsqueeze(-1)).double()
smooth = F.conv2d(mask[None, None], torch.ones(1, 1, 3, 5) / 15, padding=(1, 2))[0, 0]
denoised = torch.istft(sig_spec * smooth, n_fft, hop, window=gwin, length=wave.numel())
snr_before = 10 * torch.log10(clean.pow(2).sum() / (wave - clean).pow(2).sum())
snr_after = 10 * torch.log10(clean.pow(2).sum() / (denoised - clean).pow(2).sum())
print("gate", f(thresh[:3]), f(thresh_q[:3]), f(mask.mean()), f(snr_before), f(snr_after))

# ---- framing and overlap-add ---------------------------------------------------------------------
frame, step = 64, 32
frames = wave.unfold(-1, frame, step)  # (n_frames, frame)
energy = frames.pow(2).mean(-1)
zcr = (frames[:, 1:].sign() != frames[:, :-1].sign()).double().mean(-1)
w_frames = frames * torch.hann_window(frame, periodic=True)
ola = F.fold(w_frames.T.unsqueeze(0), output_size=(1, (frames.shape[0] - 1) * step + frame),
             kernel_size=(1, frame), stride=(1, step))
wsum = F.fold(torch.hann_window(frame).repeat(frames.shape[0], 1).T.unsqueeze(0),
              output_size=(1, ola.shape[-1]), kernel_size=(1, frame), stride=(1, step))
recon = ola.flatten() / wsum.flatten().clamp_min(1e-8)
batch_frames = batch.unfold(1, frame, step)
print("frames", tuple(frames.shape), f(energy[:3]), f(zcr[:3]),
      f((recon[frame:-frame] - wave[frame:ola.shape[-1] - frame]).abs().max() < 1e-10),
      tuple(batch_frames.shape))

# ---- diff, cumsum, mu-law quantisation ----------------------------------------------------------
d1 = torch.diff(wave[:10])
d2 = torch.diff(wave[:10], n=2, prepend=torch.zeros(1), append=torch.ones(2))
integ = torch.cumsum(d1, 0) + wave[0]
mu = 255
xn = wave / wave.abs().max()
companded = torch.sign(xn) * torch.log1p(mu * xn.abs()) / math.log1p(mu)
edges = torch.linspace(-1, 1, mu + 2)[1:-1]
codes = torch.bucketize(companded, edges)
codes_r = torch.bucketize(companded, edges, right=True)
codes_s = torch.searchsorted(edges, companded.contiguous(), side="left")
centres = torch.cat([edges[:1] - 1 / (mu + 1), (edges[1:] + edges[:-1]) / 2,
                     edges[-1:] + 1 / (mu + 1)])
decoded = centres[codes]
expanded = torch.sign(decoded) * ((1 + mu) ** decoded.abs() - 1) / mu
q_err = (expanded - xn).abs().max()
sorter = torch.argsort(torch.from_numpy(rng.permutation(8)).double())
print("quant", f(d2), f((integ - wave[1:10]).abs().max() < 1e-12), f(codes[:6]),
      bool((codes == codes_s).all()), int((codes != codes_r).sum()), f(q_err),
      f(torch.searchsorted(torch.tensor([1.0, 3.0, 5.0, 7.0]), torch.tensor([[0.0, 3.0],
                                                                         [6.0, 9.0]]),
                           right=True)), f(sorter))

# ---- histogram and robust statistics ------------------------------------------------------------
hist = torch.histc(wave, bins=10, min=-2, max=2)
hist_auto = torch.histc(wave.float(), bins=7)
counts, bin_edges = torch.histogram(wave, bins=6)
med = wave.median()
mad = (wave - med).abs().median()
k5 = torch.kthvalue(wave, 5)
k_rows = torch.kthvalue(batch_frames[0, :4], 3, dim=1, keepdim=True)
medd = torch.median(batch_frames[0, :4], dim=1)
with_nan = wave[:9].clone()
with_nan[3] = float("nan")
robust_z = (wave - med) / (1.4826 * mad)
outliers = (robust_z.abs() > 3).sum()
trimmed = wave.sort().values[10:-10].mean()
print("robust", f(hist), f(hist_auto), f(counts), f(bin_edges[[0, -1]]), f(med), f(mad),
      f(k5.values), int(k5.indices), f(k_rows.values), f(k_rows.indices), f(medd.values),
      f(medd.indices), f(with_nan.nanmedian()), f(with_nan.median()), int(outliers), f(trimmed),
      f(torch.quantile(wave, torch.tensor([0.1, 0.5, 0.9]), interpolation="midpoint")))
