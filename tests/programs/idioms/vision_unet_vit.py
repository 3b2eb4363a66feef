"""Segmentation and classification training: a small U-Net (Conv2d/GroupNorm/SiLU, MaxPool2d,
F.interpolate bilinear and nn.Upsample, torch.cat skips, Dice + BCE loss) and a small ViT
(Conv2d patch embedding, class token, positional embedding, pre-norm TransformerEncoderLayer
and nn.MultiheadAttention, AdamW + warmup-cosine LambdaLR, label smoothing, grad clipping)."""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(11)
torch.set_default_dtype(torch.float64)


def numpy_init(model, scale=0.15):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name and name.endswith("weight"):
                p.copy_(torch.from_numpy(1.0 + 0.05 * rng.standard_normal(tuple(p.shape))))
            else:
                p.copy_(torch.from_numpy(scale * rng.standard_normal(tuple(p.shape))))


class DoubleConv(nn.Module):
    def __init__(self, cin, cout, groups=4):
        super().__init__()
        self.block = nn.Sequential(
            nn.Conv2d(cin, cout, kernel_size=3, padding=1, bias=False),
            nn.GroupNorm(groups, cout), nn.SiLU(inplace=True),
            nn.Conv2d(cout, cout, kernel_size=3, padding="same", bias=False),
            nn.GroupNorm(groups, cout), nn.SiLU())

    def forward(self, x):
        return self.block(x)


class UNet(nn.Module):
    def __init__(self, cin=3, base=8):
        super().__init__()
        self.inc = DoubleConv(cin, base)
        self.down1 = nn.Sequential(nn.MaxPool2d(2), DoubleConv(base, base * 2))
        self.down2 = nn.Sequential(nn.MaxPool2d(kernel_size=2, stride=2), DoubleConv(base * 2, base * 2))
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
        self.conv_up1 = DoubleConv(base * 4, base * 2)
        self.conv_up2 = DoubleConv(base * 3, base)
        self.outc = nn.Conv2d(base, 1, kernel_size=1)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        u = self.up(x3)
        u = self.conv_up1(torch.cat([x2, u], dim=1))
        u = F.interpolate(u, scale_factor=2, mode="bilinear", align_corners=False)
        u = self.conv_up2(torch.cat((x1, u), 1))
        return self.outc(u)


def dice_bce_loss(logits, target, smooth=1.0):
    bce = F.binary_cross_entropy_with_logits(logits, target)
    probs = torch.sigmoid(logits).flatten(1)
    t = target.flatten(1)
    inter = (probs * t).sum(dim=1)
    dice = (2.0 * inter + smooth) / (probs.sum(-1) + t.sum(-1) + smooth)
    return bce + (1 - dice).mean(), dice.mean()


unet = UNet()
numpy_init(unet)
opt = torch.optim.Adam(unet.parameters(), lr=3e-3, weight_decay=1e-4)
imgs = torch.from_numpy(rng.standard_normal((4, 3, 16, 16)))
masks = (torch.from_numpy(rng.random((4, 1, 16, 16))) > 0.6).float()   # float64 logits
seg = []
for step in range(4):
    opt.zero_grad(set_to_none=True)
    logits = unet(imgs)
    loss, dice = dice_bce_loss(logits, masks)
    loss.backward()
    opt.step()
    seg += [loss.item(), dice.item()]
with torch.no_grad():
    pred = (torch.sigmoid(unet(imgs)) > 0.5).long()
    iou = ((pred == 1) & (masks == 1)).sum() / ((pred == 1) | (masks == 1)).sum().clamp(min=1)
print("unet", " ".join(f"{v:.10f}" for v in seg), tuple(logits.shape), pred.sum().item(),
      f"{iou.item():.10f}")


class PatchEmbed(nn.Module):
    def __init__(self, img=16, patch=4, cin=3, dim=16):
        super().__init__()
        self.num_patches = (img // patch) ** 2
        self.proj = nn.Conv2d(cin, dim, kernel_size=patch, stride=patch)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)  # B, N, D


class ViT(nn.Module):
    def __init__(self, num_classes=5, dim=16, depth=2, heads=4):
        super().__init__()
        self.patch_embed = PatchEmbed(dim=dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, self.patch_embed.num_patches + 1, dim))
        layer = nn.TransformerEncoderLayer(d_model=dim, nhead=heads, dim_feedforward=dim * 2,
                                           dropout=0.0, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=depth, enable_nested_tensor=False)
        self.attn_pool = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x, return_attn=False):
        x = self.patch_embed(x)
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        x = torch.cat((cls, x), dim=1) + self.pos_embed
        x = self.encoder(x)
        q = x[:, :1]
        pooled, attn = self.attn_pool(q, x, x, need_weights=True, average_attn_weights=True)
        out = self.head(self.norm(pooled.squeeze(1) + x[:, 0]))
        return (out, attn) if return_attn else out


vit = ViT()
numpy_init(vit, 0.2)
decay = [p for n, p in vit.named_parameters() if p.ndim >= 2 and "pos_embed" not in n
         and "cls_token" not in n]
no_decay = [p for n, p in vit.named_parameters() if not (p.ndim >= 2 and "pos_embed" not in n
                                                         and "cls_token" not in n)]
optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05},
                               {"params": no_decay, "weight_decay": 0.0}], lr=1e-3,
                              betas=(0.9, 0.95))
warmup, total = 2, 6


def lr_lambda(step):
    if step < warmup:
        return float(step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return 0.5 * (1.0 + math.cos(math.pi * progress))


scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)
criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
xs = torch.from_numpy(rng.standard_normal((8, 3, 16, 16)))
ys = torch.from_numpy(rng.integers(0, 5, size=8))
vit_losses, lrs, norms = [], [], []
vit.train()
for step in range(5):
    optimizer.zero_grad()
    loss = criterion(vit(xs), ys)
    loss.backward()
    norms.append(torch.nn.utils.clip_grad_norm_(vit.parameters(), max_norm=0.5).item())
    optimizer.step()
    scheduler.step()
    vit_losses.append(loss.item())
    lrs.append(scheduler.get_last_lr()[0])
vit.eval()
with torch.no_grad():
    logits, attn = vit(xs, return_attn=True)
    acc = (logits.argmax(dim=-1) == ys).float().mean()
print("vit_loss", " ".join(f"{v:.10f}" for v in vit_losses))
print("vit_lr", " ".join(f"{v:.10f}" for v in lrs), optimizer.param_groups[1]["lr"] == lrs[-1])
print("vit_norms", " ".join(f"{v:.10f}" for v in norms))
print("vit_eval", tuple(attn.shape), f"{attn.sum().item():.10f}", f"{logits.std().item():.10f}",
      f"{acc.item():.4f}", f"{vit.cls_token.norm().item():.10f}")


# Multi-class segmentation head in float32: class-weighted CE with ignore_index on a 3-d target,
# one-hot Dice, resizing with every interpolate mode, a learned ConvTranspose2d upsampler, a
# fixed 2-D sin-cos position table, scaled_dot_product_attention and OneCycleLR.
def sincos_2d(h, w, dim, temperature=10000.0):
    y, x = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    omega = 1.0 / temperature ** (torch.arange(dim // 4) / (dim // 4 - 1))
    y = y.flatten()[:, None] * omega[None, :]
    x = x.flatten()[:, None] * omega[None, :]
    return torch.cat((x.sin(), x.cos(), y.sin(), y.cos()), dim=1).float()


class SegHead(nn.Module):
    def __init__(self, cin=4, dim=8, n_classes=3):
        super().__init__()
        self.stem = nn.Conv2d(cin, dim, 3, stride=2, padding=1)
        self.register_buffer("pos", sincos_2d(4, 4, dim))
        self.qkv = nn.Linear(dim, dim * 3)
        self.up = nn.ConvTranspose2d(dim, dim, kernel_size=2, stride=2)
        self.cls = nn.Conv2d(dim, n_classes, 1)

    def forward(self, x):
        f = F.avg_pool2d(F.relu(self.stem(x)), 2)                 # B, D, 4, 4
        b, d, h, w = f.shape
        tok = f.flatten(2).transpose(1, 2) + self.pos
        q, k, v = self.qkv(tok).chunk(3, dim=-1)
        q, k, v = (t.view(b, h * w, 2, d // 2).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, dropout_p=0.0)
        f = f + a.transpose(1, 2).reshape(b, h * w, d).transpose(1, 2).reshape(b, d, h, w)
        f = F.interpolate(self.up(f), size=(16, 16), mode="nearest")
        return self.cls(f)


head = SegHead().float()
with torch.no_grad():
    for p in head.parameters():
        p.copy_(torch.from_numpy(rng.standard_normal(tuple(p.shape)).astype(np.float32) * 0.3))
opt = torch.optim.SGD(head.parameters(), lr=0.05, momentum=0.9, nesterov=True)
sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=4, pct_start=0.5)
x = torch.from_numpy(rng.standard_normal((2, 4, 16, 16)).astype(np.float32))
target = torch.from_numpy(rng.integers(0, 3, size=(2, 16, 16)))
target[:, :2, :] = 255
ce = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 0.5], dtype=torch.float32), ignore_index=255)
mc = []
for step in range(4):
    out = head(x)
    valid = target != 255
    onehot = F.one_hot(target.clamp(max=2), num_classes=3).permute(0, 3, 1, 2).float()
    probs = out.softmax(dim=1) * valid.unsqueeze(1)
    dice = 1 - (2 * (probs * onehot).sum((0, 2, 3)) + 1) / (probs.sum((0, 2, 3)) +
                                                           (onehot * valid.unsqueeze(1)).sum((0, 2, 3)) + 1)
    loss = ce(out, target) + dice.mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
    mc += [loss.item(), sched.get_last_lr()[0]]
with torch.no_grad():
    small = head(x)
    resized = [F.interpolate(small, scale_factor=0.5, mode=m).sum().item() for m in ("nearest", "area")]
    resized += [F.interpolate(small, size=(10, 12), mode=m, align_corners=ac).sum().item()
                for m, ac in (("bilinear", False), ("bilinear", True), ("bicubic", False))]
    resized.append(F.interpolate(small, scale_factor=2, mode="nearest-exact").sum().item())
    resized.append(nn.Upsample(size=24, mode="nearest")(small).mean().item())
    resized.append(F.adaptive_max_pool2d(small, (3, 5)).sum().item())
print("multiclass", " ".join(f"{v:.6f}" for v in mc), int(small.argmax(1).sum()))
print("resize", " ".join(f"{v:.6f}" for v in resized))
