"""Everyday vision idioms: train/eval switching with BatchNorm running stats, no_grad inference
with softmax/argmax/topk accuracy, style-transfer Gram matrices optimised with LBFGS and a
closure, a depthwise-separable conv net, Dropout2d in eval, F.pad reflect/replicate/circular,
F.unfold/F.fold, PixelShuffle, state_dict round trips through torch.save/torch.load,
flip/rot90/roll augmentations and the channels_last memory format."""
import io
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(5)


def fill_(model, scale=0.2):
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy((rng.standard_normal(tuple(p.shape)) * scale).astype(np.float32)))


def fmt(vals, digits=6):
    return " ".join(f"{float(v):.{digits}f}" for v in vals)


class DSConv(nn.Module):
    """MobileNet block: depthwise 3x3 (groups=channels), pointwise 1x1, BN, ReLU6."""

    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.dw = nn.Conv2d(cin, cin, 3, stride=stride, padding=1, groups=cin, bias=False)
        self.bn1 = nn.BatchNorm2d(cin)
        self.pw = nn.Conv2d(cin, cout, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout, momentum=0.2)
        self.act = nn.ReLU6()

    def forward(self, x):
        return self.act(self.bn2(self.pw(self.act(self.bn1(self.dw(x))))))


class SmallNet(nn.Module):
    def __init__(self, n_classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, padding_mode="reflect"),
                                  nn.BatchNorm2d(8), nn.Hardswish())
        self.blocks = nn.Sequential(DSConv(8, 16, stride=2), DSConv(16, 16), nn.Dropout2d(0.3))
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(16, n_classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(self.pool(x), 1))


net = SmallNet()
fill_(net)
x = torch.from_numpy(rng.standard_normal((8, 3, 16, 16)).astype(np.float32))
y = torch.from_numpy(rng.integers(0, 10, size=8))
# Dropout2d is random in train mode, so train BN-only by disabling it (p=0 in train)
net.blocks[2].p = 0.0
opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
losses = []
net.train()
for step in range(3):
    # flip/rot90/roll augmentations, deterministic per step
    xb = torch.flip(x, dims=[3]) if step % 2 else x
    xb = torch.rot90(xb, k=step, dims=(2, 3))
    xb = torch.roll(xb, shifts=(1, -2), dims=(2, 3))
    opt.zero_grad()
    loss = F.cross_entropy(net(xb), y)
    loss.backward()
    opt.step()
    losses.append(loss.item())
bn = net.stem[1]
print("train", fmt(losses), bn.num_batches_tracked.item(), fmt(bn.running_mean[:3]),
      fmt(bn.running_var[:3]), fmt([net.blocks[0].bn2.running_mean.sum()]))

net.blocks[2].p = 0.3
net.eval()
with torch.no_grad():
    logits = net(x)
    probs = F.softmax(logits, dim=1)
    pred = probs.argmax(dim=1)
    top3 = logits.topk(3, dim=1, largest=True, sorted=True)
    top3_acc = (top3.indices == y.unsqueeze(1)).any(dim=1).float().mean()
    conf, _ = probs.max(dim=1)
    again = net(x)
print("eval", fmt([probs.sum(), conf.mean(), top3_acc, (pred == y).sum()]), pred.tolist(),
      top3.indices[0].tolist(), torch.equal(logits, again), net.training, bn.training)


# style transfer: Gram matrices of features, image optimised by LBFGS with a closure
def gram(feat):
    b, c, h, w = feat.size()
    f = feat.view(b, c, h * w)
    return torch.bmm(f, f.transpose(1, 2)) / (c * h * w)


extractor = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.ReLU(), nn.Conv2d(6, 6, 3, padding=1))
fill_(extractor, 0.3)
extractor.requires_grad_(False)
style = torch.from_numpy(rng.random((1, 3, 16, 16)).astype(np.float32))
content = torch.from_numpy(rng.random((1, 3, 16, 16)).astype(np.float32))
target_gram = gram(extractor(style)).detach()
target_feat = extractor(content).detach()
image = content.clone().requires_grad_(True)
lbfgs = torch.optim.LBFGS([image], lr=0.5, max_iter=5, history_size=10)
style_losses = []


def closure():
    lbfgs.zero_grad()
    feat = extractor(image)
    loss = 1e3 * F.mse_loss(gram(feat), target_gram) + F.mse_loss(feat, target_feat)
    loss.backward()
    return loss


for step in range(2):
    style_losses.append(lbfgs.step(closure).item())
    with torch.no_grad():
        image.clamp_(0, 1)
print("style", fmt(style_losses), fmt([image.detach().sum(), closure().detach()]))

# padding modes, unfold/fold patches and pixel shuffle
img = torch.from_numpy(rng.standard_normal((2, 3, 6, 6)).astype(np.float32))
pads = [F.pad(img, (1, 2, 2, 1), mode=m).sum() for m in ("reflect", "replicate", "circular")]
pads.append(F.pad(img, (1, 1, 1, 1), mode="constant", value=0.5).sum())
pads.append(nn.ReflectionPad2d(2)(img)[0, 0, 0, :].sum())
pads.append(nn.ZeroPad2d((0, 1, 0, 1))(img).mean())
patches = F.unfold(img, kernel_size=3, stride=3)                # B, C*9, L
folded = F.fold(patches, output_size=(6, 6), kernel_size=3, stride=3)
overl = F.unfold(img, kernel_size=2, padding=1, stride=1)
counts = F.fold(torch.ones_like(overl), (6, 6), kernel_size=2, padding=1)
ps = nn.PixelShuffle(2)(torch.from_numpy(np.arange(2 * 8 * 3 * 3, dtype=np.float32).reshape(2, 8, 3, 3)))
pu = nn.PixelUnshuffle(2)(ps)
print("pad", fmt(pads), tuple(patches.shape), torch.allclose(folded, img), tuple(overl.shape),
      fmt([counts.sum(), ps[0, 0, :2, :].sum(), ps[1].std()]), torch.equal(pu.view(2, 8, 3, 3), pu),
      tuple(ps.shape), tuple(pu.shape))

# state_dict round trips: BytesIO and a temporary file, then strict / non-strict loads
buf = io.BytesIO()
torch.save({"model": net.state_dict(), "optimizer": opt.state_dict(), "epoch": 3}, buf)
buf.seek(0)
ckpt = torch.load(buf, weights_only=True)
clone = SmallNet()
clone.load_state_dict(ckpt["model"])
clone.eval()
opt2 = torch.optim.SGD(clone.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
opt2.load_state_dict(ckpt["optimizer"])
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "backbone.pt")
    torch.save(clone.blocks.state_dict(), path)
    sd = torch.load(path, map_location="cpu")
    partial = SmallNet()
    fill_(partial)
    result = partial.load_state_dict({"blocks." + k: v for k, v in sd.items()}, strict=False)
with torch.no_grad():
    same = torch.equal(clone(x), logits)
print("ckpt", ckpt["epoch"], same, len(ckpt["model"]), len(result.missing_keys),
      len(result.unexpected_keys), fmt([opt2.state_dict()["state"][0]["momentum_buffer"].sum()]),
      torch.equal(partial.blocks[0].bn1.running_var, net.blocks[0].bn1.running_var))

# channels_last: same numbers, different strides
cl_net = clone.to(memory_format=torch.channels_last)
xc = x.to(memory_format=torch.channels_last)
with torch.inference_mode():
    out_cl = cl_net(xc)
# ember: tensors are always C-contiguous, so xc.is_contiguous() is True and xc.stride() is
# (768, 256, 16, 1) on ember (torch: False and (768, 1, 48, 3)); not printed
print("channels_last", xc.is_contiguous(memory_format=torch.channels_last), fmt([(out_cl - logits).abs().max()], 4), out_cl.shape[1])

# knowledge distillation with mixup through a DataLoader, an EMA teacher, ReduceLROnPlateau,
# MaxPool2d(return_indices) + MaxUnpool2d, dilated convs, ceil_mode / count_include_pad pooling
import copy  # noqa: E402

from torch.utils.data import DataLoader, TensorDataset  # noqa: E402


class Student(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=2, dilation=2)
        self.pool = nn.MaxPool2d(2, return_indices=True)
        self.unpool = nn.MaxUnpool2d(2)
        self.head = nn.Linear(6 * 5 * 5, 10)

    def forward(self, x):
        h = F.gelu(self.conv(x), approximate="tanh")
        p, idx = self.pool(h)
        h = h + self.unpool(p, idx, output_size=h.size())
        h = F.avg_pool2d(h, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)
        h = F.max_pool2d(h, 2, ceil_mode=True)
        return self.head(h.flatten(1))


mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
raw = torch.from_numpy(rng.random((8, 3, 16, 16)).astype(np.float32))
loader = DataLoader(TensorDataset((raw - mean) / std, y), batch_size=4, shuffle=False,
                    drop_last=True)
student = Student()
fill_(student)
ema = copy.deepcopy(student).eval().requires_grad_(False)
teacher = clone.eval()
sopt = torch.optim.Adam(student.parameters(), lr=1e-2)
plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(sopt, mode="min", factor=0.5, patience=0)
T, kd = 2.0, []
for epoch in range(2):
    for i, (xb, yb) in enumerate(loader):
        lam = float(rng.beta(0.4, 0.4))
        perm = torch.from_numpy(rng.permutation(xb.size(0)))
        mixed = lam * xb + (1 - lam) * xb[perm]
        with torch.no_grad():
            t_logits = teacher(mixed)
        s_logits = student(mixed)
        soft = F.kl_div(F.log_softmax(s_logits / T, dim=-1), F.softmax(t_logits / T, dim=-1),
                        reduction="batchmean") * T * T
        hard = lam * F.cross_entropy(s_logits, yb) + (1 - lam) * F.cross_entropy(s_logits, yb[perm])
        loss = 0.7 * soft + 0.3 * hard
        sopt.zero_grad()
        loss.backward()
        sopt.step()
        with torch.no_grad():
            for pe, ps_ in zip(ema.parameters(), student.parameters()):
                pe.lerp_(ps_, 0.1)
        kd.append(loss.item())
    plateau.step(1.0 + epoch * 0.0)
with torch.no_grad():
    agree = (ema((raw - mean) / std).argmax(1) == teacher((raw - mean) / std).argmax(1)).sum()
print("distill", fmt(kd), sopt.param_groups[0]["lr"], agree.item(),
      fmt([sum(p.sum() for p in ema.parameters())]))


# spatial transformer (affine_grid + grid_sample, trained localisation head) feeding a SimCLR
# projection trained with the NT-Xent loss (normalize, masked_fill of the diagonal, CE)
class STNEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.loc = nn.Sequential(nn.Conv2d(3, 4, 5), nn.MaxPool2d(2), nn.ReLU(), nn.Flatten(),
                                 nn.Linear(4 * 6 * 6, 6))
        self.enc = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                 nn.AdaptiveAvgPool2d(2), nn.Flatten())
        self.proj = nn.Sequential(nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 8))

    def forward(self, x):
        theta = self.loc(x).view(-1, 2, 3) + torch.tensor([[1.0, 0, 0], [0, 1.0, 0]])
        grid = F.affine_grid(theta, list(x.size()), align_corners=False)
        x = F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)
        return self.proj(self.enc(x))


def nt_xent(z1, z2, tau=0.5):
    z = F.normalize(torch.cat([z1, z2]), dim=1)
    sim = z @ z.t() / tau
    n = z1.shape[0]
    sim = sim.masked_fill(torch.eye(2 * n, dtype=torch.bool), float("-inf"))
    targets = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)])
    return F.cross_entropy(sim, targets)


stn = STNEncoder()
fill_(stn, 0.1)
copt = torch.optim.SGD(stn.parameters(), lr=0.05, momentum=0.9)
base = torch.from_numpy(rng.random((6, 3, 16, 16)).astype(np.float32))
contrast = []
for step in range(3):
    # two augmented views: colour jitter from NumPy, a flip and a roll
    jitter = torch.from_numpy(rng.uniform(0.8, 1.2, (6, 3, 1, 1)).astype(np.float32))
    v1 = (base * jitter).clamp(0, 1)
    v2 = torch.roll(torch.flip(base, dims=(-1,)), shifts=2, dims=-2)
    loss = nt_xent(stn(v1), stn(v2))
    copt.zero_grad()
    loss.backward()
    copt.step()
    contrast.append(loss.item())
with torch.no_grad():
    emb = F.normalize(stn.eval()(base), dim=-1)
    nearest = (emb @ emb.T).fill_diagonal_(-2).argmax(1)
print("contrast", fmt(contrast), nearest.tolist(),
      fmt([stn.loc[-1].weight.grad.abs().sum(), F.cosine_similarity(emb[0:1], emb[1:2]).item()]))
