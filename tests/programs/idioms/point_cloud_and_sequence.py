"""Point-cloud and signal/sequence idioms: PointNet (Conv1d shared MLP, max over points, a T-Net
with bmm and an orthogonality regulariser), kNN through cdist + topk and gathered neighbours,
a TCN (dilated causal Conv1d with F.pad left padding, weight_norm, residuals) trained with an
LR warm-up, an LSTM/GRU seq2one forecaster on packed sequences, stft/istft with a Hann window
and a mel-like filterbank, rfft/irfft convolution, cummax/logcumsumexp/diff, Tensor.unfold
windows and a quantile (pinball) loss checked against torch.quantile."""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import weight_norm
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

rng = np.random.default_rng(17)
torch.set_default_dtype(torch.float64)
f = lambda t: " ".join(f"{v:.10f}" for v in torch.as_tensor(t).flatten().tolist())


def fill_(module, scale=0.2):
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.from_numpy(rng.standard_normal(tuple(p.shape)) * scale))
    return module


# ---- PointNet ----
class TNet(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k
        self.mlp = nn.Sequential(nn.Conv1d(k, 16, 1), nn.BatchNorm1d(16), nn.ReLU(),
                                 nn.Conv1d(16, 32, 1), nn.ReLU())
        self.fc = nn.Sequential(nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, k * k))

    def forward(self, x):
        h = torch.max(self.mlp(x), dim=2, keepdim=False)[0]
        iden = torch.eye(self.k).flatten().unsqueeze(0).repeat(x.size(0), 1)
        return (self.fc(h) + iden).view(-1, self.k, self.k)


class PointNet(nn.Module):
    def __init__(self, ncls=4):
        super().__init__()
        self.tnet, self.ftnet = TNet(3), TNet(16)
        self.mlp1 = nn.Sequential(nn.Conv1d(3, 16, 1), nn.BatchNorm1d(16), nn.ReLU())
        self.mlp2 = nn.Sequential(nn.Conv1d(16, 32, 1), nn.BatchNorm1d(32), nn.ReLU(),
                                  nn.Conv1d(32, 64, 1))
        self.head = nn.Sequential(nn.Linear(64, 32), nn.LayerNorm(32), nn.ReLU(), nn.Linear(32, ncls))

    def forward(self, pts):  # pts: (B, N, 3)
        x = pts.transpose(2, 1)
        t = self.tnet(x)
        x = torch.bmm(x.transpose(2, 1), t).transpose(2, 1)
        x = self.mlp1(x)
        ft = self.ftnet(x)
        x = torch.bmm(ft, x)
        g = self.mlp2(x).amax(dim=-1)
        return F.log_softmax(self.head(g), dim=1), ft


def ortho_reg(m):
    eye = torch.eye(m.size(1)).expand_as(m)
    return torch.linalg.matrix_norm(torch.bmm(m, m.transpose(1, 2)) - eye, ord="fro").mean()


pn = fill_(PointNet(), 0.15)
pts = torch.from_numpy(rng.standard_normal((4, 24, 3)))
yp = torch.tensor([0, 1, 3, 2])
opt = torch.optim.Adam(pn.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8)
hist = []
for _ in range(3):
    logp, ft = pn(pts)
    loss = F.nll_loss(logp, yp) + 1e-3 * ortho_reg(ft)
    opt.zero_grad()
    loss.backward()
    opt.step()
    hist.append(loss.item())
pn.eval()
with torch.no_grad():
    perm = torch.from_numpy(rng.permutation(24))
    inv = pn(pts[:, perm])[0].exp()
print("pointnet", f(hist), f((inv - pn(pts)[0].exp()).abs().max() < 1e-10), f(inv[0]))

# ---- kNN graph features (DGCNN-style edge conv) ----
d = torch.cdist(pts, pts)
dist, idx = d.topk(5, dim=-1, largest=False)
B, N, K = idx.shape
nbrs = torch.gather(pts.unsqueeze(1).expand(B, N, N, 3), 2, idx.unsqueeze(-1).expand(B, N, K, 3))
flat = (idx + torch.arange(B).view(-1, 1, 1) * N).view(-1)
nbrs2 = pts.reshape(B * N, 3)[flat].view(B, N, K, 3)
edge = torch.cat([nbrs - pts.unsqueeze(2), pts.unsqueeze(2).expand(-1, -1, K, -1)], dim=-1)
econv = fill_(nn.Conv2d(6, 8, 1, bias=False))
ef = econv(edge.permute(0, 3, 1, 2)).max(dim=-1)[0]
print("knn", f(dist[0, :2]), idx[1, 0].tolist(), bool(torch.equal(nbrs, nbrs2)), f(ef.sum()),
      f(torch.cdist(pts[0], pts[1], p=1).mean()))


# ---- TCN forecaster ----
class CausalBlock(nn.Module):
    def __init__(self, cin, cout, k, dil):
        super().__init__()
        self.pad = (k - 1) * dil
        self.conv1 = weight_norm(nn.Conv1d(cin, cout, k, dilation=dil))
        self.conv2 = weight_norm(nn.Conv1d(cout, cout, k, dilation=dil))
        self.down = nn.Conv1d(cin, cout, 1) if cin != cout else None

    def forward(self, x):
        h = F.relu(self.conv1(F.pad(x, (self.pad, 0))))
        h = F.relu(self.conv2(F.pad(h, (self.pad, 0))))
        return F.relu(h + (x if self.down is None else self.down(x)))


tcn = nn.Sequential(CausalBlock(1, 8, 3, 1), CausalBlock(8, 8, 3, 2), CausalBlock(8, 8, 3, 4))
fill_(tcn, 0.25)
head = fill_(nn.Linear(8, 1))
series = torch.from_numpy(np.sin(np.arange(64) * 0.3) + 0.1 * rng.standard_normal(64))
windows = series.unfold(0, 17, 4)  # (12, 17)
xin, target = windows[:, :16].unsqueeze(1), windows[:, 16:]
params = list(tcn.parameters()) + list(head.parameters())
opt = torch.optim.Adam(params, lr=5e-3)
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 3))
crit = nn.MSELoss()
hist, lrs = [], []
for _ in range(4):
    pred = head(tcn(xin)[:, :, -1])
    loss = crit(pred, target)
    opt.zero_grad()
    loss.backward()
    opt.step()
    lrs.append(sched.get_last_lr()[0])
    sched.step()
    hist.append(loss.item())
with torch.no_grad():
    x2 = xin.clone()
    x2[:, :, 10:] += 1.0  # causal: outputs before t=10 unchanged
    causal = (tcn(x2)[:, :, :10] - tcn(xin)[:, :, :10]).abs().max().item()
print("tcn", tuple(windows.shape), f(hist), f(lrs), causal == 0.0,
      f(tcn[0].conv1.weight_g.flatten()[:3]))


# ---- LSTM / GRU seq2one on packed sequences ----
class Seq2One(nn.Module):
    def __init__(self, cell):
        super().__init__()
        self.rnn = cell(2, 6, num_layers=2, batch_first=True)
        self.out = nn.Linear(6, 1)

    def forward(self, x, lens):
        packed = pack_padded_sequence(x, lens, batch_first=True, enforce_sorted=False)
        out, h = self.rnn(packed)
        h = h[0] if isinstance(h, tuple) else h
        padded, out_lens = pad_packed_sequence(out, batch_first=True)
        last = padded[torch.arange(x.size(0)), out_lens - 1]
        return self.out(h[-1]).squeeze(-1), (last - h[-1]).abs().max()


lens = torch.tensor([7, 4, 6, 2])
xs = torch.from_numpy(rng.standard_normal((4, 7, 2)))
xs = xs * (torch.arange(7)[None, :] < lens[:, None]).unsqueeze(-1)
ys = torch.from_numpy(rng.standard_normal(4))
res = []
for cell in (nn.LSTM, nn.GRU):
    m = fill_(Seq2One(cell), 0.3)
    o = torch.optim.RMSprop(m.parameters(), lr=1e-2, alpha=0.9)
    for _ in range(3):
        pred, gap = m(xs, lens)
        loss = F.l1_loss(pred, ys)
        o.zero_grad()
        loss.backward()
        nn.utils.clip_grad_value_(m.parameters(), 0.5)
        o.step()
        res.append(loss.item())
    res.append(gap.item())
print("rnn", f(res))
with torch.autocast("cpu", dtype=torch.bfloat16):
    gru32 = Seq2One(nn.GRU).float()
    amp_out = gru32.rnn(xs.float())[0]
    amp_head = gru32.out(amp_out)
    lstm_out = Seq2One(nn.LSTM).float().rnn(xs.float())[0]
print("rnn_amp", str(amp_out.dtype).split(".")[-1], str(amp_head.dtype).split(".")[-1],
      str(lstm_out.dtype).split(".")[-1])

# ---- spectral features ----
sr, n_fft, hop = 64, 32, 8
tt = torch.arange(256) / sr
sig = torch.sin(2 * math.pi * 5 * tt) + 0.5 * torch.sin(2 * math.pi * 13 * tt) + \
    0.1 * torch.from_numpy(rng.standard_normal(256))
win = torch.hann_window(n_fft, dtype=torch.float64)
spec = torch.stft(sig, n_fft, hop_length=hop, win_length=n_fft, window=win, center=True,
                  return_complex=True)
mag = spec.abs()
power = mag.pow(2)
freqs = torch.linspace(0, sr / 2, n_fft // 2 + 1)
centers = torch.linspace(0, sr / 2, 6)
fb = (1 - (freqs[None, :] - centers[:, None]).abs() / (centers[1] - centers[0])).clamp(min=0)
mel = torch.log(fb @ power + 1e-6)
rec = torch.istft(spec, n_fft, hop_length=hop, window=win, center=True, length=256)
print("stft", tuple(spec.shape), str(spec.dtype).split(".")[-1], f(mag.sum()), f(mel.mean(dim=1)),
      f((rec - sig).abs().max() < 1e-10), f(torch.angle(spec[3, :3])),
      mag.mean(1).argmax().item())

# ---- FFT convolution vs direct conv1d ----
a = torch.from_numpy(rng.standard_normal(20))
kern = torch.from_numpy(rng.standard_normal(5))
L = 20 + 5 - 1
fft_conv = torch.fft.irfft(torch.fft.rfft(a, n=L) * torch.fft.rfft(kern, n=L), n=L)
direct = F.conv1d(a.view(1, 1, -1), kern.flip(0).view(1, 1, -1), padding=4).flatten()
full = torch.fft.fft(a)
print("fft", f((fft_conv - direct).abs().max() < 1e-12), f(fft_conv[:4]),
      f(torch.fft.ifft(full).real[:3]), f(torch.fft.fftfreq(6, d=0.5)), f(torch.fft.rfftfreq(6)),
      f(torch.fft.fftshift(torch.arange(6.0))), f(full.abs()[:3]))

# ---- cumulative ops, diff, unfold windows ----
z = torch.from_numpy(rng.standard_normal(10))
cm, ci = torch.cummax(z, dim=0)
drawdown = (cm - z).max()
lse = torch.logcumsumexp(z, dim=0)
dz = torch.diff(z, n=2, prepend=z[:1], append=z[-1:])
wins = z.unfold(0, 4, 2)
rolling = wins.mean(-1)
print("cumulative", f(cm), ci.tolist(), f(drawdown), f(lse[-3:]), f(dz[:4]), tuple(wins.shape),
      f(rolling), f(torch.cummin(z, 0).values[-1]), f(torch.cumprod(1 + 0.1 * z, 0)[-1]),
      f(torch.diff(torch.arange(6).reshape(2, 3), dim=1)))

# ---- quantile (pinball) forecaster ----
qs = torch.tensor([0.1, 0.5, 0.9])
obs = torch.from_numpy(rng.standard_normal(40))
qhat = torch.zeros(3, requires_grad=True)
qopt = torch.optim.SGD([qhat], lr=0.5)
for _ in range(5):
    err = obs[:, None] - qhat[None, :]
    loss = torch.maximum(qs * err, (qs - 1) * err).mean()
    qopt.zero_grad()
    loss.backward()
    qopt.step()
print("quantile", f(qhat.detach()), f(loss.detach()), f(torch.quantile(obs, qs)),
      f(torch.quantile(obs, 0.3, interpolation="lower")), f(torch.quantile(obs, 0.3, interpolation="midpoint")),
      f(torch.nanquantile(torch.cat([obs[:5], torch.tensor([float("nan")])]), 0.5)),
      f(obs.view(4, 10).quantile(torch.tensor([0.25, 0.75]), dim=1, keepdim=True).sum(dim=1)),
      f(obs.median()), f(torch.nanmedian(obs.view(4, 10), dim=1).values))
