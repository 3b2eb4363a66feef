"""A forecasting and anomaly-detection notebook: min-max scaling with torch statistics,
sliding windows with Tensor.unfold (univariate and multivariate), a chronological split, a
Dataset with random-crop / flip / jitter transforms written with torch ops, the PyTorch
tutorial's sinusoidal PositionalEncoding buffer, a TransformerEncoder forecaster with a causal
mask from generate_square_subsequent_mask, AdamW with OneCycleLR (epochs / steps_per_epoch,
momentum cycling) and CosineAnnealingWarmRestarts stepped with fractional epochs, gradient
accumulation with clip_grad_norm_, the early-stopping class from the popular
`early_stopping_pytorch` snippet saving checkpoints, an autoregressive roll-out, MAE / RMSE /
MAPE, an autoencoder trained on normal windows with per-sample reconstruction errors thresholded
by torch.quantile / np.percentile, precision / recall of the flagged windows, top-k anomalies,
a whole-model torch.save / torch.load(weights_only=False), and plotting arrays from
.detach().cpu().numpy() / .tolist()."""
import math
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, TensorDataset

np.random.seed(0)
torch.manual_seed(0)
rng = np.random.default_rng(11)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
f = lambda t: " ".join(f"{v:.6g}" for v in torch.as_tensor(t).flatten().tolist())


def init_(m, scale=0.2):
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.from_numpy(rng.standard_normal(tuple(p.shape)).astype(np.float32))
                    * scale)
    return m


# ---- series, scaling, windows ------------------------------------------------------------------
T = 240
t = np.arange(T, dtype=np.float32)
series = (np.sin(2 * np.pi * t / 24) + 0.5 * np.sin(2 * np.pi * t / 60) + 0.01 * t
          + 0.1 * rng.standard_normal(T)).astype(np.float32)
data = torch.from_numpy(series)
split = int(len(data) * 0.8)
train_raw, test_raw = data[:split], data[split:]
lo, hi = train_raw.min(), train_raw.max()
scale = lambda x: (x - lo) / (hi - lo)
unscale = lambda x: x * (hi - lo) + lo
train_s, test_s = scale(train_raw), scale(test_raw)

WINDOW, HORIZON = 16, 1
windows = train_s.unfold(0, WINDOW + HORIZON, 1)          # (N, WINDOW + HORIZON)
X_tr, y_tr = windows[:, :WINDOW].unsqueeze(-1), windows[:, WINDOW:]
test_windows = torch.cat([train_s[-WINDOW:], test_s]).unfold(0, WINDOW + HORIZON, 1)
X_te, y_te = test_windows[:, :WINDOW].unsqueeze(-1), test_windows[:, WINDOW:]
multi = torch.stack([data, torch.roll(data, 1), data.cumsum(0) / 100], dim=1)   # (T, 3)
mw = multi.unfold(0, WINDOW, 4)                           # (N, 3, WINDOW)
strided = torch.arange(10.0).unfold(0, 4, 3)
print("windows", list(windows.shape), list(X_te.shape), list(mw.shape),
      list(mw.transpose(1, 2).shape), f(strided), f(lo), f(hi), f(train_s.mean()),
      windows.is_contiguous(), f(windows[3, :3]), f(mw[2, 1, :3]))


class WindowDataset(Dataset):
    """Windows with optional augmentation written with torch ops (a random crop back to a
    fixed length, a random sign flip, Gaussian jitter)."""

    def __init__(self, x, y, augment=False, crop=12):
        self.x, self.y, self.augment, self.crop = x, y, augment, crop

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        x = self.x[i]
        if self.augment:
            start = torch.randint(0, x.shape[0] - self.crop + 1, (1,)).item()
            x = F.interpolate(x[start:start + self.crop].T.unsqueeze(0), size=x.shape[0],
                              mode="linear", align_corners=False)[0].T
            if torch.rand(1).item() < 0.5:
                x = torch.flip(x, dims=[0])
            x = x + 0.01 * torch.randn_like(x)
        return x, self.y[i]


aug = WindowDataset(X_tr, y_tr, augment=True)
xa, ya = aug[5]
plain = WindowDataset(X_tr, y_tr)
print("augment", list(xa.shape), xa.dtype == torch.float32, torch.equal(ya, y_tr[5]),
      bool((xa - X_tr[5]).abs().max() < 1.0), len(aug), torch.equal(plain[5][0], X_tr[5]))


# ---- a Transformer forecaster with sinusoidal positional encoding ------------------------------
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        """x: (seq_len, batch, d_model)"""
        x = x + self.pe[:x.size(0)]
        return self.dropout(x)


class TransformerForecaster(nn.Module):
    def __init__(self, d_model=16, nhead=2, num_layers=2, dim_ff=32, dropout=0.0):
        super().__init__()
        self.input_proj = nn.Linear(1, d_model)
        self.pos_encoder = PositionalEncoding(d_model, dropout, max_len=64)
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_ff, dropout)
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.decoder = nn.Linear(d_model, 1)
        self.d_model = d_model

    def forward(self, src):
        """src: (batch, seq, 1) -> next value (batch, 1)"""
        src = src.permute(1, 0, 2)
        src = self.input_proj(src) * math.sqrt(self.d_model)
        src = self.pos_encoder(src)
        mask = nn.Transformer.generate_square_subsequent_mask(src.size(0)).to(src.device)
        out = self.encoder(src, mask=mask, is_causal=True)
        return self.decoder(out[-1])


class EarlyStopping:
    """Early stops the training if validation loss doesn't improve after a given patience."""

    def __init__(self, patience=7, verbose=False, delta=0, path="checkpoint.pt", trace_func=print):
        self.patience, self.verbose, self.delta = patience, verbose, delta
        self.counter, self.best_score, self.early_stop = 0, None, False
        self.val_loss_min = np.inf
        self.path, self.trace_func = path, trace_func

    def __call__(self, val_loss, model):
        score = -val_loss
        if self.best_score is None:
            self.best_score = score
            self.save_checkpoint(val_loss, model)
        elif score < self.best_score + self.delta:
            self.counter += 1
            if self.counter >= self.patience:
                self.early_stop = True
        else:
            self.best_score = score
            self.save_checkpoint(val_loss, model)
            self.counter = 0

    def save_checkpoint(self, val_loss, model):
        torch.save(model.state_dict(), self.path)
        self.val_loss_min = val_loss


tmp = tempfile.mkdtemp()
model = init_(TransformerForecaster()).to(device)
pe = model.pos_encoder.pe
print("pe", list(pe.shape), f(pe[1, 0, :4]), f(pe[7, 0, -2:]),
      f(nn.Transformer.generate_square_subsequent_mask(3)), len(model.state_dict()),
      sum(p.numel() for p in model.parameters() if p.requires_grad))

EPOCHS, ACCUM = 6, 2
train_loader = DataLoader(TensorDataset(X_tr, y_tr), batch_size=32, shuffle=False)
val_loader = DataLoader(TensorDataset(X_te, y_te), batch_size=64)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=5e-3, epochs=EPOCHS,
                                                steps_per_epoch=math.ceil(len(train_loader) / ACCUM),
                                                pct_start=0.3)
criterion = nn.MSELoss()
stopper = EarlyStopping(patience=3, path=os.path.join(tmp, "checkpoint.pt"))
train_hist, val_hist, lr_hist, beta_hist, norm_hist = [], [], [], [], []
for epoch in range(EPOCHS):
    model.train()
    optimizer.zero_grad(set_to_none=True)
    epoch_loss = 0.0
    for i, (xb, yb) in enumerate(train_loader):
        xb, yb = xb.to(device, non_blocking=True), yb.to(device, non_blocking=True)
        loss = criterion(model(xb), yb) / ACCUM
        loss.backward()
        epoch_loss += loss.item() * ACCUM
        if (i + 1) % ACCUM == 0 or (i + 1) == len(train_loader):
            norm_hist.append(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0).item())
            optimizer.step()
            optimizer.zero_grad()
            scheduler.step()
            lr_hist.append(scheduler.get_last_lr()[0])
            beta_hist.append(optimizer.param_groups[0]["betas"][0])
    model.eval()
    with torch.no_grad():
        val_loss = sum(criterion(model(xb), yb).item() * len(xb) for xb, yb in val_loader)
        val_loss /= len(val_loader.dataset)
    train_hist.append(epoch_loss / len(train_loader))
    val_hist.append(val_loss)
    stopper(val_loss, model)
    if stopper.early_stop:
        break
model.load_state_dict(torch.load(stopper.path, map_location=device, weights_only=True))
print("forecast_train", f(train_hist), f(val_hist), f(lr_hist), f(beta_hist), f(norm_hist),
      f(stopper.val_loss_min), stopper.counter)

# autoregressive roll-out and metrics on the original scale
model.eval()
history = train_s[-WINDOW:].clone()
preds = []
with torch.no_grad():
    for _ in range(12):
        nxt = model(history[-WINDOW:].view(1, -1, 1))
        preds.append(nxt.item())
        history = torch.cat([history, nxt.view(-1)])
    one_step = model(X_te).squeeze(-1)
pred_real = unscale(torch.tensor(preds))
true_real = test_raw[:12]
mae = (pred_real - true_real).abs().mean()
rmse = torch.sqrt(F.mse_loss(pred_real, true_real))
mape = ((pred_real - true_real).abs() / true_real.abs().clamp(min=1e-3)).mean() * 100
plot_pred = unscale(one_step).detach().cpu().numpy()
plot_true = test_raw.cpu().numpy()
print("rollout", f(pred_real), f(mae), f(rmse), f(mape), plot_pred.shape[0], plot_pred.dtype,
      f(np.abs(plot_pred - plot_true).mean()), type(pred_real.tolist()[0]).__name__)

# CosineAnnealingWarmRestarts stepped inside the epoch with a fractional epoch
p = nn.Parameter(torch.zeros(1))
opt2 = torch.optim.SGD([p], lr=0.1, momentum=0.9)
warm = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt2, T_0=2, T_mult=2, eta_min=1e-3)
iters, warm_lrs = 4, []
for epoch in range(5):
    for i in range(iters):
        opt2.step()
        warm.step(epoch + i / iters)
        warm_lrs.append(opt2.param_groups[0]["lr"])
step_lr = torch.optim.lr_scheduler.StepLR(torch.optim.Adam([p], lr=1.0), step_size=2, gamma=0.1)
step_lrs = []
for _ in range(5):
    step_lr.optimizer.step()
    step_lr.step()
    step_lrs.append(step_lr.get_last_lr()[0])
print("sched", f(warm_lrs), warm.T_i, warm.T_cur, f(step_lrs), warm.last_epoch)


# ---- autoencoder anomaly detection ------------------------------------------------------------
W = 12
normal = torch.from_numpy(np.sin(np.linspace(0, 60, 400)).astype(np.float32)
                          + 0.05 * rng.standard_normal(400).astype(np.float32))
normal_windows = normal.unfold(0, W, 2)                               # (195, 12)
anomalous = normal_windows[:40].clone()
is_anom = torch.zeros(40, dtype=torch.bool)
is_anom[::5] = True
spikes = torch.from_numpy(rng.uniform(1.0, 2.0, (8, W)).astype(np.float32))
anomalous[is_anom] += spikes


class AutoEncoder(nn.Module):
    def __init__(self, n=W, h=6, z=3):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(n, h), nn.ReLU(), nn.Linear(h, z))
        self.decoder = nn.Sequential(nn.Linear(z, h), nn.ReLU(), nn.Linear(h, n))

    def forward(self, x):
        return self.decoder(self.encoder(x))


ae = init_(AutoEncoder(), 0.3)
opt3 = torch.optim.Adam(ae.parameters(), lr=1e-2)
ae_loader = DataLoader(TensorDataset(normal_windows), batch_size=64)
ae_losses = []
for epoch in range(15):
    ae.train()
    total = 0.0
    for (xb,) in ae_loader:
        opt3.zero_grad()
        loss = F.mse_loss(ae(xb), xb)
        loss.backward()
        opt3.step()
        total += loss.item() * xb.size(0)
    ae_losses.append(total / len(ae_loader.dataset))
ae.eval()
with torch.no_grad():
    train_err = ((ae(normal_windows) - normal_windows) ** 2).mean(dim=1)
    test_err = F.mse_loss(ae(anomalous), anomalous, reduction="none").mean(dim=1)
threshold = torch.quantile(train_err, 0.95)
np_threshold = np.percentile(train_err.numpy(), 95)
flagged = test_err > threshold
tp = (flagged & is_anom).sum().item()
precision = tp / max(flagged.sum().item(), 1)
recall = tp / is_anom.sum().item()
top = torch.topk(test_err, k=5)
mean_err, std_err = train_err.mean(), train_err.std()
z_flags = ((test_err - mean_err) / std_err > 3).nonzero(as_tuple=True)[0]
print("anomaly", f(ae_losses[::3]), f(threshold), f(np_threshold), abs(threshold.item() -
      np_threshold) < 1e-6, tp, f(precision), f(recall), top.indices.tolist(), f(top.values),
      z_flags.tolist(), f(torch.quantile(train_err, torch.tensor([0.25, 0.5, 0.75]))),
      f(torch.std_mean(train_err)[0]))

# whole-model save/load and per-sample errors for plotting
path = os.path.join(tmp, "ae_full.pt")
torch.save(ae, path)
ae2 = torch.load(path, weights_only=False)
ae2.eval()
with torch.no_grad():
    same = torch.equal(ae2(anomalous), ae(anomalous))
errors_list = test_err.detach().cpu().numpy().round(6).tolist()
print("save", type(ae2).__name__, same, ae2.training, len(errors_list), f(errors_list[:4]),
      isinstance(errors_list[0], float), sorted(ae2.state_dict().keys())[:2])
