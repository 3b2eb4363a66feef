"""Inference-side idioms: device selection, compile, einsum/cdist/quantile, distributions."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Categorical, Normal, kl_divergence

torch.backends.cudnn.benchmark = True
torch.set_float32_matmul_precision("high")
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
rng = np.random.default_rng(2)


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, groups=c, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        return F.relu(x + self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))))


net = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), Block(8), Block(8),
                    nn.AdaptiveAvgPool2d((2, 2)), nn.Flatten(), nn.Linear(32, 5)).to(device)
with torch.no_grad():
    for p in net.parameters():
        p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)) * 0.3, dtype=p.dtype))
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.tensor(rng.standard_normal(m.num_features) * 0.1))
            m.running_var.copy_(torch.tensor(rng.random(m.num_features) + 0.5))
net.eval()
x = torch.tensor(rng.standard_normal((4, 3, 16, 16)), dtype=torch.float32, device=device)
compiled = torch.compile(net)
with torch.no_grad():
    eager = net(x)
    for _ in range(3):
        fast = compiled(x)
    up = F.interpolate(x, scale_factor=1.5, mode="bilinear", align_corners=False)
    grid = torch.tensor(rng.uniform(-1, 1, (4, 5, 5, 2)), dtype=torch.float32)
    sampled = F.grid_sample(x, grid, align_corners=False)
feats = torch.tensor(rng.standard_normal((6, 4)))
d = torch.cdist(feats, feats)
e = torch.einsum("ik,jk->ij", feats, feats)
q = torch.quantile(feats, torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64), dim=0)
b = torch.bucketize(feats, torch.tensor([-1.0, 0.0, 1.0], dtype=torch.float64))
u, counts = torch.unique(b, return_counts=True)
acc = torch.zeros(4, dtype=torch.float64).index_add_(0, b.flatten() % 4, feats.flatten())
sc = torch.zeros(3, 4, dtype=torch.float64).scatter_add_(0, b[:3] % 3, feats[:3])
sel = torch.masked_select(feats, feats > 0)
logits = eager.double()
cat = Categorical(logits=logits)
normal = Normal(feats.mean(0), feats.std(0))
prior = Normal(torch.zeros(4, dtype=torch.float64), torch.ones(4, dtype=torch.float64))
print("net", f"{eager.sum().item():.6f}", f"{(fast - eager).abs().max().item() < 1e-4}")
print("resample", f"{up.mean().item():.8f}", f"{sampled.sum().item():.8f}", tuple(up.shape))
print("geometry", f"{d.sum().item():.10f}", f"{e.trace().item():.10f}", f"{q.sum().item():.10f}")
print("counting", u.tolist(), counts.tolist(), f"{acc.sum().item():.10f}",
      f"{sc.sum().item():.10f}", sel.numel())
print("dist", f"{cat.entropy().sum().item():.10f}",
      f"{cat.log_prob(torch.tensor([0, 1, 2, 3])).sum().item():.10f}",
      f"{kl_divergence(normal, prior).sum().item():.10f}")
print("device", device.type, str(x.dtype).split(".")[-1])
