"""A training script in current torch idioms (run unchanged on torch and on ember)."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.optim.lr_scheduler import CosineAnnealingLR, LinearLR, SequentialLR
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn, update_bn
from torch.utils.data import DataLoader, StackDataset

rng = np.random.default_rng(0)


def init_(module):
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)) * 0.2, dtype=p.dtype))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8),
                                      nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.attn = nn.Linear(8, 24)
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        h = self.features(x)
        q, k, v = self.attn(h).view(h.shape[0], 3, 1, 8).unbind(1)
        with sdpa_kernel([SDPBackend.MATH, SDPBackend.FLASH_ATTENTION]):
            a = F.scaled_dot_product_attention(q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0))
        return self.head(h + a.squeeze(0).squeeze(1))


model = Net().double()
init_(model)
ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.9))
opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
sched = SequentialLR(opt, [LinearLR(opt, 0.1, total_iters=3),
                           CosineAnnealingLR(opt, T_max=10)], milestones=[3])
x = torch.tensor(rng.standard_normal((32, 3, 8, 8)))
y = torch.tensor(rng.integers(0, 4, 32))
loader = DataLoader(StackDataset(x, y), batch_size=8)
losses, lrs = [], []
for epoch in range(5):
    for batch in loader:
        xb, yb = batch
        batch[0] = xb.contiguous(memory_format=torch.channels_last)
        loss = F.cross_entropy(model(batch[0]), yb, label_smoothing=0.1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        norm = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])
        torch.nn.utils.clip_grads_with_norm_(model.parameters(), 1.0, norm)
        opt.step()
        ema.update_parameters(model)
        losses.append(loss.item())
    sched.step()
    lrs.append(sched.get_last_lr()[0])
update_bn(loader, ema)
ema.eval()
with torch.no_grad():
    emb = F.normalize(ema(x), dim=1)
    sim = emb @ emb.T
    sim.fill_diagonal_(-1.0)

head = {k: v.detach() for k, v in model.head.named_parameters()}


def sample_loss(params, feat, target):
    out = functional_call(model.head, params, (feat.unsqueeze(0),))
    return F.cross_entropy(out, target.unsqueeze(0))


feats = model.features.eval()(x).detach()
per_sample = vmap(grad(sample_loss), in_dims=(None, 0, 0))(head, feats, y)
print("losses", " ".join(f"{v:.10f}" for v in losses[::5]))
print("lrs", " ".join(f"{v:.10f}" for v in lrs))
print("sim", f"{sim.max().item():.10f}", f"{sim.sum().item():.10f}")
print("ema_n", int(ema.n_averaged))
print("per_sample", tuple(per_sample["weight"].shape),
      f"{per_sample['weight'].abs().sum().item():.10f}")
