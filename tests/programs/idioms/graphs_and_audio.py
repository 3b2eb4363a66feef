"""Graph and audio idioms: a GCN over an edge_index (symmetric normalisation with scatter_add_ /
index_add_, a torch.sparse_coo_tensor adjacency and torch.sparse.mm), a GAT layer (LeakyReLU
scores, per-destination softmax via scatter_reduce amax and index_add_, dropout in eval),
scatter_mean graph pooling over a batch vector, a message-passing GRUCell, link prediction with
NumPy negative samples and BCEWithLogits; a raw-waveform 1-D CNN (strided Conv1d, BatchNorm1d,
AdaptiveAvgPool1d), a log-mel front end (stft, hann_window, a linspace/clamp triangular mel
filterbank, log1p and 10*log10 amplitude_to_db with clamp_min), SpecAugment masks from NumPy
indices, frame classification with cross_entropy over (B, C, T), F.pad reflect on 1-D signals,
an istft round trip and a GRU over spectrogram frames with pack_padded_sequence."""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

rng = np.random.default_rng(37)
torch.set_default_dtype(torch.float64)


def fmt(v):
    s = f"{v:.10g}"
    return f"{v:.14f}" if "e" in s else s  # the test reads exponent notation as words


f = lambda t: " ".join(fmt(v) for v in torch.as_tensor(t).flatten().tolist())


def init_(m, scale=0.3):
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.from_numpy(rng.standard_normal(tuple(p.shape)) * scale).to(p.dtype))
    return m


# ---- a small random graph ----------------------------------------------------------------------
N, Fin, C = 10, 5, 3
src_np = rng.integers(0, N, 24)
dst_np = (src_np + rng.integers(1, N, 24)) % N  # no self loops
pairs = np.unique(np.stack([np.r_[src_np, dst_np], np.r_[dst_np, src_np]], 1), axis=0)
edge_index = torch.from_numpy(pairs.T.copy())
x = torch.from_numpy(rng.standard_normal((N, Fin)))
y = torch.from_numpy(rng.integers(0, C, N))


def add_self_loops(ei, n):
    loop = torch.arange(n).unsqueeze(0).repeat(2, 1)
    return torch.cat([ei, loop], dim=1)


class GCNLayer(nn.Module):
    def __init__(self, i, o):
        super().__init__()
        self.lin = nn.Linear(i, o, bias=False)
        self.bias = nn.Parameter(torch.zeros(o))

    def forward(self, x, ei):
        ei = add_self_loops(ei, x.shape[0])
        row, col = ei
        deg = torch.zeros(x.shape[0]).scatter_add_(0, col, torch.ones(col.shape[0]))
        dinv = deg.pow(-0.5)
        dinv.masked_fill_(torch.isinf(dinv), 0)
        w = dinv[row] * dinv[col]
        h = self.lin(x)
        out = torch.zeros_like(h).index_add_(0, col, h[row] * w.unsqueeze(-1))
        return out + self.bias


class GATLayer(nn.Module):
    def __init__(self, i, o, heads=2):
        super().__init__()
        self.h, self.o = heads, o
        self.lin = nn.Linear(i, heads * o, bias=False)
        self.att_src = nn.Parameter(torch.empty(1, heads, o))
        self.att_dst = nn.Parameter(torch.empty(1, heads, o))
        self.drop = nn.Dropout(0.5)

    def forward(self, x, ei):
        ei = add_self_loops(ei, x.shape[0])
        s, d = ei
        h = self.lin(x).view(-1, self.h, self.o)
        a = F.leaky_relu((h * self.att_src).sum(-1)[s] + (h * self.att_dst).sum(-1)[d], 0.2)
        amax = torch.full((x.shape[0], self.h), float("-inf")).scatter_reduce(
            0, d.unsqueeze(-1).expand_as(a), a, reduce="amax", include_self=True)
        e = (a - amax[d]).exp()
        den = torch.zeros(x.shape[0], self.h).index_add_(0, d, e)
        alpha = self.drop(e / den[d])
        out = torch.zeros_like(h).index_add_(0, d, h[s] * alpha.unsqueeze(-1))
        return out.mean(1), alpha


gcn1, gcn2 = init_(GCNLayer(Fin, 8)), init_(GCNLayer(8, C))
gat = init_(GATLayer(Fin, 4))
opt = torch.optim.Adam(list(gcn1.parameters()) + list(gcn2.parameters()) + list(gat.parameters()),
                       lr=0.01, weight_decay=5e-4)
train_mask = torch.from_numpy(rng.random(N) < 0.6)
log = []
for step in range(5):
    gat.train(step < 0)  # always eval: dropout off
    h = F.relu(gcn1(x, edge_index))
    g, alpha = gat(x, edge_index)
    logits = gcn2(h, edge_index) + g[:, :C]
    loss = F.cross_entropy(logits[train_mask], y[train_mask])
    opt.zero_grad()
    loss.backward()
    opt.step()
    log.append(loss.item())
# dense and sparse adjacency agree with the scatter version
ei = add_self_loops(edge_index, N)
deg = torch.bincount(ei[1], minlength=N).double()
vals = deg[ei[0]].rsqrt() * deg[ei[1]].rsqrt()
# ember: torch 2.13 warns "Sparse invariant checks are implicitly disabled" without
# check_invariants (ember does not); opting in silences torch
A = torch.sparse_coo_tensor(ei.flip(0), vals, (N, N), check_invariants=True).coalesce()
with torch.no_grad():
    h_sp = torch.sparse.mm(A, gcn1.lin(x)) + gcn1.bias
    h_ref = gcn1(x, edge_index)
    dense = A.to_dense()
print("gcn", f(log), f((h_sp - h_ref).abs().max() < 1e-12), f(alpha.detach().sum(0)),
      f(dense.sum(1)), A._nnz(), f(torch.sparse.sum(A, dim=0).to_dense()))

# ---- graph pooling, message-passing GRU, link prediction ---------------------------------------
batch = torch.from_numpy(np.repeat([0, 1, 2], [3, 3, 4]))


def scatter_mean(src, index, dim_size):
    s = torch.zeros(dim_size, src.shape[1]).index_add_(0, index, src)
    cnt = torch.zeros(dim_size).scatter_add_(0, index, torch.ones_like(index, dtype=src.dtype))
    return s / cnt.clamp(min=1).unsqueeze(1)


class MPNN(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.inp = nn.Linear(Fin, d)
        self.msg = nn.Sequential(nn.Linear(2 * d, d), nn.ReLU())
        self.gru = nn.GRUCell(d, d)
        self.out = nn.Linear(2 * d, 1)

    def forward(self, x, ei, batch, steps=3):
        h = torch.tanh(self.inp(x))
        for _ in range(steps):
            m = self.msg(torch.cat([h[ei[0]], h[ei[1]]], -1))
            agg = torch.zeros_like(h).index_add_(0, ei[1], m)
            h = self.gru(agg, h)
        mean = scatter_mean(h, batch, 3)
        mx = torch.full((3, h.shape[1]), -1e9).scatter_reduce(
            0, batch.unsqueeze(1).expand_as(h), h, "amax")
        return self.out(torch.cat([mean, mx], -1)).squeeze(-1), h


mp = init_(MPNN())
gy = torch.from_numpy(np.array([0.5, -1.0, 2.0]))
mopt = torch.optim.AdamW(mp.parameters(), lr=0.02)
mlog = []
for step in range(4):
    pred, node_h = mp(x, edge_index, batch)
    loss = F.mse_loss(pred, gy)
    mopt.zero_grad()
    loss.backward()
    mopt.step()
    mlog.append(loss.item())
# link prediction: dot-product decoder, NumPy negative samples
pos = edge_index[:, ::2]
neg = torch.from_numpy(rng.integers(0, N, (2, pos.shape[1])))
lopt = torch.optim.SGD(mp.parameters(), lr=0.05)
for step in range(3):
    _, z = mp(x, edge_index, batch)
    sc = torch.cat([(z[pos[0]] * z[pos[1]]).sum(-1), (z[neg[0]] * z[neg[1]]).sum(-1)])
    lab = torch.cat([torch.ones(pos.shape[1]), torch.zeros(neg.shape[1])])
    lloss = F.binary_cross_entropy_with_logits(sc, lab, pos_weight=torch.tensor(1.5))
    lopt.zero_grad()
    lloss.backward()
    lopt.step()
    mlog.append(lloss.item())
auc_order = torch.argsort(sc.detach(), descending=True)
print("mpnn", f(mlog), f(lab[auc_order].cumsum(0)[-4:]), f(pred.detach()))

# ---- audio: raw waveform CNN --------------------------------------------------------------------
sr, L = 800, 400
t = torch.arange(L) / sr
freqs = np.array([50.0, 120.0, 200.0, 330.0])
wl = rng.integers(0, 4, 6)
wave = torch.sin(2 * math.pi * torch.from_numpy(freqs[wl]).unsqueeze(1) * t)
wave = wave + torch.from_numpy(rng.standard_normal((6, L)) * 0.1)
wave = wave.float()
lab = torch.from_numpy(wl)


class WaveCNN(nn.Module):
    def __init__(self, k=4):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv1d(1, 8, 16, stride=4), nn.BatchNorm1d(8), nn.ReLU(), nn.MaxPool1d(2),
            nn.Conv1d(8, 8, 5, stride=2, padding=2), nn.BatchNorm1d(8), nn.ReLU(),
            nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(8, k))

    def forward(self, x):
        return self.net(x.unsqueeze(1))


cnn = init_(WaveCNN().float())
copt = torch.optim.SGD(cnn.parameters(), lr=0.05, momentum=0.9)
clog = []
for step in range(4):
    out = cnn(wave)
    loss = F.cross_entropy(out, lab, label_smoothing=0.1)
    copt.zero_grad()
    loss.backward()
    copt.step()
    clog.append(loss.item())
cnn.eval()
with torch.no_grad():
    ev = cnn(wave)
print("wavecnn", f(clog), f(ev.softmax(-1)[0]), f(cnn.net[1].running_var[:3]),
      str(ev.dtype).split(".")[-1])

# ---- log-mel front end, SpecAugment, frame classification --------------------------------------
n_fft, hop, n_mels = 64, 16, 8
wav64 = wave.double()


def mel_fb(n_freqs, n_mels, sr):
    hz2mel = lambda h: 2595.0 * torch.log10(1.0 + h / 700.0)
    mel2hz = lambda m: 700.0 * (10 ** (m / 2595.0) - 1.0)
    all_f = torch.linspace(0, sr / 2, n_freqs)
    m_pts = torch.linspace(hz2mel(torch.tensor(0.0)), hz2mel(torch.tensor(sr / 2)), n_mels + 2)
    f_pts = mel2hz(m_pts)
    f_diff = f_pts[1:] - f_pts[:-1]
    slopes = f_pts.unsqueeze(0) - all_f.unsqueeze(1)
    down = -slopes[:, :-2] / f_diff[:-1]
    up = slopes[:, 2:] / f_diff[1:]
    return torch.max(torch.zeros(1), torch.min(down, up)).clamp(0, 1)


win = torch.hann_window(n_fft)
spec = torch.stft(wav64, n_fft, hop_length=hop, win_length=n_fft, window=win, center=True,
                  pad_mode="reflect", return_complex=True)
power = spec.abs().pow(2)
fb = mel_fb(n_fft // 2 + 1, n_mels, sr)
mel = torch.matmul(power.transpose(1, 2), fb).transpose(1, 2)  # (B, n_mels, T)
db = 10.0 * torch.log10(torch.clamp_min(mel, 1e-10))
db = torch.maximum(db, db.amax(dim=(-2, -1), keepdim=True) - 80.0)
logmel = torch.log1p(mel)
Tn = spec.shape[-1]
aug = logmel.clone()
fm0, tm0 = rng.integers(0, n_mels - 2, 6), rng.integers(0, Tn - 4, 6)
fmask = torch.zeros(6, n_mels, 1, dtype=torch.bool)
tmask = torch.zeros(6, 1, Tn, dtype=torch.bool)
for b in range(6):
    fmask[b, fm0[b]:fm0[b] + 2] = True
    tmask[b, :, tm0[b]:tm0[b] + 4] = True
aug = aug.masked_fill(fmask | tmask, 0.0)
aug = (aug - aug.mean(dim=-1, keepdim=True)) / (aug.std(dim=-1, keepdim=True) + 1e-5)
frame_cls = init_(nn.Conv1d(n_mels, 4, 3, padding=1))
frame_lab = torch.from_numpy(np.repeat(wl[:, None], Tn, 1))
frame_lab[:, :2] = -100
floss = F.cross_entropy(frame_cls(aug), frame_lab, ignore_index=-100)
floss.backward()
print("logmel", list(spec.shape), str(spec.dtype).split(".")[-1], f(fb.sum(0)), f(db.mean((1, 2))),
      f(logmel[0, :, 5]), f(aug.abs().sum((1, 2))), f(floss), f(frame_cls.weight.grad.norm()))

# ---- reflect pad, istft round trip --------------------------------------------------------------
sig = torch.from_numpy(rng.standard_normal((2, 40)))
padded = F.pad(sig.unsqueeze(1), (5, 7), mode="reflect").squeeze(1)
rep = F.pad(sig.unsqueeze(1), (3, 3), mode="replicate").squeeze(1)
circ = F.pad(sig.unsqueeze(1), (2, 2), mode="circular").squeeze(1)
spec2 = torch.stft(sig, 16, hop_length=4, window=torch.hann_window(16), return_complex=True)
back = torch.istft(spec2, 16, hop_length=4, window=torch.hann_window(16), length=40)
mag, ph = spec2.abs(), spec2.angle()
back2 = torch.istft(torch.polar(mag, ph), 16, hop_length=4, window=torch.hann_window(16),
                    length=40)
print("pad", f(padded[:, :6]), f(padded[:, -8:]), f(rep[:, :4]), f(circ[:, :3]),
      f((back - sig).abs().max() < 1e-10), f((back2 - sig).abs().max() < 1e-10),
      f(torch.view_as_real(spec2)[0, 2, 3]), list(spec2.shape))

# ---- GRU over spectrogram frames with packing ---------------------------------------------------
lens = torch.tensor([Tn, Tn - 3, Tn - 5, Tn - 6, Tn - 8, Tn - 10])
frames = db.transpose(1, 2) / 40.0  # (B, T, F)
gru = init_(nn.GRU(n_mels, 6, num_layers=2, batch_first=True, bidirectional=True), 0.2)
head = init_(nn.Linear(12, 4))
gopt = torch.optim.Adam(list(gru.parameters()) + list(head.parameters()), lr=0.01)
glog = []
for step in range(3):
    packed = pack_padded_sequence(frames, lens, batch_first=True, enforce_sorted=True)
    out_p, hN = gru(packed)
    out, out_lens = pad_packed_sequence(out_p, batch_first=True, total_length=Tn)
    last = torch.cat([hN[-2], hN[-1]], -1)
    m = (torch.arange(Tn).unsqueeze(0) < out_lens.unsqueeze(1)).unsqueeze(-1)
    pooled = (out * m).sum(1) / out_lens.unsqueeze(1)
    loss = F.cross_entropy(head(last + pooled), lab)
    gopt.zero_grad()
    loss.backward()
    gopt.step()
    glog.append(loss.item())
shuf = torch.from_numpy(rng.permutation(6))
packed_u = pack_padded_sequence(frames[shuf], lens[shuf], batch_first=True, enforce_sorted=False)
with torch.no_grad():
    _, hu = gru(packed_u)
    _, hs = gru(pack_padded_sequence(frames, lens, batch_first=True))
print("gru", f(glog), f(out_lens), f((hu[:, torch.argsort(shuf)] - hs).abs().max() < 1e-12),
      f(packed_u.batch_sizes), f(packed_u.sorted_indices))

# ---- extras: sparse gradients, duplicate coalescing, windows, mu-law, 1-D up/down sampling -----
dup_i = torch.tensor([[0, 1, 0, 2], [1, 2, 1, 0]])
S = torch.sparse_coo_tensor(dup_i, torch.tensor([1.0, 2.0, 3.0, 4.0]), (3, 3),
                            check_invariants=True)
Sc = S.coalesce()
dense_in = torch.from_numpy(rng.standard_normal((3, 2))).requires_grad_(True)
sp_out = torch.sparse.mm(Sc, dense_in)
sp_out.pow(2).sum().backward()
adj = torch.zeros(3, 3).index_put_((dup_i[0], dup_i[1]), torch.ones(4), accumulate=True)
# ember: no CSR/CSC layouts (to_sparse_csr raises UnsupportedError, documented); dense instead
csr_out = Sc.to_dense() @ dense_in.detach()
uniq = torch.unique(torch.cat([dup_i, dup_i.flip(0)], 1), dim=1)
smean = torch.zeros(3).scatter_reduce(0, torch.tensor([0, 0, 2, 2, 2]),
                                      torch.tensor([1.0, 3.0, 2.0, 4.0, 9.0]), "mean",
                                      include_self=False)
windows = [torch.hann_window(8, periodic=False), torch.hamming_window(8), torch.blackman_window(8),
           torch.bartlett_window(7), torch.kaiser_window(8, periodic=True, beta=6.0)]
a = torch.from_numpy(rng.uniform(-1, 1, 12))
mu = 255.0
enc = torch.sign(a) * torch.log1p(mu * a.abs()) / math.log1p(mu)
q = ((enc + 1) / 2 * mu + 0.5).to(torch.int64)
dec = torch.sign(enc) * (torch.pow(1 + mu, enc.abs()) - 1) / mu
st = torch.stft(sig[0], 16, hop_length=8, window=torch.hann_window(16), center=False,
                normalized=True, onesided=False, return_complex=True)
up = F.interpolate(sig[:1, None, :8], scale_factor=2, mode="linear", align_corners=False)
tconv = init_(nn.ConvTranspose1d(1, 2, 4, stride=2, padding=1))
dconv = init_(nn.Conv1d(2, 4, 3, dilation=2, groups=2, padding="same"))
pr = init_(nn.PReLU(4))
y1 = pr(dconv(tconv(sig[:1, None, :8])))
print("extras", Sc._nnz(), f(Sc.values()), f(sp_out.detach()), f(dense_in.grad), f(adj),
      f(csr_out), f(uniq), f(smean), " ".join(f(w) for w in windows), f(q), f((dec - a).abs().max() < 1e-12),
      list(st.shape), f(st.abs().sum()), f(up), list(y1.shape), f(y1.detach()))
