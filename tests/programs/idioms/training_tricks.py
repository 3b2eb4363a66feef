"""Training tricks from popular repositories: gradient accumulation, clip_grad_norm_ (foreach,
error_if_nonfinite), _foreach_mul_/_foreach_add_ EMA, SAM, a Lookahead wrapper around Adam,
mixup/cutmix with NumPy lambdas, drop path with a NumPy mask, hand-written label smoothing,
R-drop KL with fixed dropout masks, an R1 gradient penalty on a spectral-normed discriminator,
no_grad model surgery, frozen BatchNorm, layer-wise LR decay groups, chained LR schedulers,
zero_grad(set_to_none=False), buffer persistence, post-accumulate-grad hooks (optimizer in
backward) and autograd.Functions with mark_non_differentiable / set_materialize_grads /
once_differentiable."""
import io
from collections import defaultdict

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd.function import once_differentiable
from torch.optim.lr_scheduler import (ConstantLR, LambdaLR, LinearLR, PolynomialLR,
                                      SequentialLR, ChainedScheduler, CosineAnnealingLR)

rng = np.random.default_rng(23)
torch.set_default_dtype(torch.float64)
f = lambda t: " ".join(f"{v:.10g}" for v in torch.as_tensor(t).flatten().tolist())


def init_(m, scale=0.3):
    with torch.no_grad():
        for n, p in m.named_parameters():
            p.copy_(torch.from_numpy(np.asarray(rng.standard_normal(tuple(p.shape)) * scale)))
    return m


def gnorm(m):
    return torch.sqrt(sum(p.grad.pow(2).sum() for p in m.parameters() if p.grad is not None))


class Net(nn.Module):
    def __init__(self, d=6, h=10, k=3):
        super().__init__()
        self.stem = nn.Linear(d, h)
        self.bn = nn.BatchNorm1d(h)
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(h, h), nn.GELU()) for _ in range(2)])
        self.head = nn.Linear(h, k)
        self.register_buffer("seen", torch.zeros((), dtype=torch.long))
        self.register_buffer("tmp", torch.zeros(2), persistent=False)

    def forward(self, x, drop_masks=None, drop_p=0.0):
        h = F.relu(self.bn(self.stem(x)))
        for j, blk in enumerate(self.blocks):
            r = blk(h)
            if drop_masks is not None:  # stochastic depth with a NumPy-drawn per-sample mask
                r = r * drop_masks[j].unsqueeze(-1) / (1 - drop_p)
            h = h + r
        if self.training:
            self.seen += x.shape[0]
        return self.head(h)


X = torch.from_numpy(rng.standard_normal((32, 6)))
Y = torch.from_numpy(rng.integers(0, 3, 32))

# ---- gradient accumulation + clip_grad_norm_ + EMA via _foreach ------------------------------
net = init_(Net())
ema = [p.detach().clone() for p in net.parameters()]
opt = torch.optim.AdamW(net.parameters(), lr=1e-2, weight_decay=0.05)
accum_losses, norms = [], []
for step in range(4):
    opt.zero_grad(set_to_none=True)
    for micro in torch.chunk(torch.arange(32), 4):
        loss = F.cross_entropy(net(X[micro]), Y[micro]) / 4
        loss.backward()
    norms.append(nn.utils.clip_grad_norm_(net.parameters(), 0.5, foreach=True,
                                          error_if_nonfinite=True).item())
    opt.step()
    with torch.no_grad():
        params = [p.detach() for p in net.parameters()]
        if hasattr(torch, "_foreach_mul_"):
            torch._foreach_mul_(ema, 0.9)
            torch._foreach_add_(ema, params, alpha=0.1)
        else:
            for e, p in zip(ema, params):
                e.mul_(0.9).add_(p, alpha=0.1)
    accum_losses.append(loss.item() * 4)
nn.utils.clip_grad_value_(net.parameters(), 0.01)
try:
    bad = nn.Linear(2, 1)
    bad(torch.tensor([[float("inf"), 1.0]])).sum().backward()
    nn.utils.clip_grad_norm_(bad.parameters(), 1.0, error_if_nonfinite=True)
    nonfinite = "no-error"
except RuntimeError:
    nonfinite = "RuntimeError"
print("accum", f(accum_losses), f(norms), f(sum(e.sum() for e in ema)), int(net.seen),
      f(max(p.grad.abs().max() for p in net.parameters())), nonfinite)

# ---- SAM --------------------------------------------------------------------------------------
net = init_(Net())
base = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
rho, sam_losses = 0.05, []
for step in range(4):
    loss = F.cross_entropy(net(X), Y)
    loss.backward()
    grad_norm = torch.norm(torch.stack([p.grad.norm(p=2) for p in net.parameters()]), p=2)
    e_ws = []
    with torch.no_grad():
        for p in net.parameters():
            e_w = p.grad * (rho / (grad_norm + 1e-12))
            p.add_(e_w)
            e_ws.append(e_w)
    base.zero_grad()
    loss2 = F.cross_entropy(net(X), Y)
    loss2.backward()
    with torch.no_grad():
        for p, e_w in zip(net.parameters(), e_ws):
            p.sub_(e_w)
    base.step()
    base.zero_grad()
    sam_losses.append((loss.item(), loss2.item()))
print("sam", " ".join(f"{a:.10g} {b:.10g}" for a, b in sam_losses), int(net.seen))


# ---- Lookahead around Adam -------------------------------------------------------------------
class Lookahead(torch.optim.Optimizer):
    def __init__(self, inner, k=3, alpha=0.5):
        self.inner, self.k, self.alpha = inner, k, alpha
        self.param_groups = inner.param_groups
        self.defaults = inner.defaults
        self.state = defaultdict(dict)
        for g in self.param_groups:
            for p in g["params"]:
                self.state[p]["slow"] = p.detach().clone()
        self.steps = 0

    def zero_grad(self, set_to_none=True):
        self.inner.zero_grad(set_to_none=set_to_none)

    @torch.no_grad()
    def step(self, closure=None):
        loss = self.inner.step(closure)
        self.steps += 1
        if self.steps % self.k == 0:
            for g in self.param_groups:
                for p in g["params"]:
                    slow = self.state[p]["slow"]
                    slow.add_(p - slow, alpha=self.alpha)
                    p.copy_(slow)
        return loss


net = init_(Net())
la = Lookahead(torch.optim.Adam(net.parameters(), lr=0.02, betas=(0.9, 0.99), eps=1e-7))
la_losses = []
for step in range(7):
    la.zero_grad()
    loss = F.cross_entropy(net(X), Y)
    loss.backward()
    la.step()
    la_losses.append(loss.item())
print("lookahead", f(la_losses), f(la.inner.state[net.head.weight]["exp_avg_sq"].sum()),
      int(la.inner.state[net.head.weight]["step"]))

# ---- mixup / cutmix / drop path / label smoothing / R-drop ------------------------------------
img = torch.from_numpy(rng.standard_normal((8, 1, 6, 6)))
lbl = torch.from_numpy(rng.integers(0, 3, 8))
conv = init_(nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                           nn.Flatten(), nn.Dropout(0.0), nn.Linear(4, 3)))
lam = float(rng.beta(0.4, 0.4))
perm = torch.from_numpy(rng.permutation(8))
mixed = lam * img + (1 - lam) * img[perm]
out = conv(mixed)
mix_loss = lam * F.cross_entropy(out, lbl) + (1 - lam) * F.cross_entropy(out, lbl[perm])
cut_lam = float(rng.beta(1.0, 1.0))
cut = int(round(6 * np.sqrt(1 - cut_lam)))
cy, cx = 1, 2
cutmixed = img.clone()
cutmixed[:, :, cy:cy + cut, cx:cx + cut] = img[perm][:, :, cy:cy + cut, cx:cx + cut]
area_lam = 1 - cut * cut / 36
onehot = F.one_hot(lbl, 3).to(torch.float64)
soft = area_lam * onehot + (1 - area_lam) * onehot[perm]
cut_loss = torch.sum(-soft * F.log_softmax(conv(cutmixed), -1), -1).mean()
eps = 0.1
logp = F.log_softmax(out, dim=-1)
ls_hand = ((1 - eps) * -logp.gather(1, lbl.unsqueeze(1)).squeeze(1) - eps * logp.mean(-1)).mean()
ls_torch = F.cross_entropy(out, lbl, label_smoothing=eps)
soft_ce = F.cross_entropy(out, soft)

net = init_(Net())
drop_p = 0.3
masks = [torch.from_numpy((rng.random(32) > drop_p).astype(np.float64)) for _ in range(2)]
dp_out = net(X, masks, drop_p)
m1 = torch.from_numpy((rng.random((32, 3)) > 0.2) / 0.8)
m2 = torch.from_numpy((rng.random((32, 3)) > 0.2) / 0.8)
o1, o2 = net(X) * m1, net(X) * m2
kl = 0.5 * (F.kl_div(F.log_softmax(o1, -1), F.log_softmax(o2, -1), reduction="batchmean",
                     log_target=True)
            + F.kl_div(F.log_softmax(o2, -1), F.softmax(o1, -1), reduction="batchmean"))
rdrop = 0.5 * (F.cross_entropy(o1, Y) + F.cross_entropy(o2, Y)) + 1.0 * kl
rdrop.backward()
print("aug", f(lam), f(mix_loss), cut, f(cut_loss), f(ls_hand), f(ls_torch), f(soft_ce),
      f(dp_out.sum()), f(kl), f(rdrop), f(gnorm(net)))

# ---- R1 penalty on a spectral-normed discriminator --------------------------------------------
D = nn.Sequential(nn.utils.spectral_norm(nn.Linear(4, 16)), nn.LeakyReLU(0.2),
                  nn.utils.parametrizations.spectral_norm(nn.Linear(16, 1)))
with torch.no_grad():
    for n, p in D.named_parameters():
        p.copy_(torch.from_numpy(np.asarray(rng.standard_normal(tuple(p.shape)) * 0.3)))
    for n, b in D.named_buffers():
        if b.dtype.is_floating_point:
            b.copy_(F.normalize(torch.from_numpy(rng.standard_normal(tuple(b.shape))), dim=0))
dopt = torch.optim.Adam(D.parameters(), lr=1e-3, betas=(0.0, 0.99))
real = torch.from_numpy(rng.standard_normal((10, 4)) + 1.0)
fake = torch.from_numpy(rng.standard_normal((10, 4)))
r1_vals = []
for step in range(3):
    real_in = real.detach().requires_grad_(True)
    d_real = D(real_in)
    g, = torch.autograd.grad(d_real.sum(), real_in, create_graph=True)
    r1 = g.pow(2).sum(1).mean()
    loss = F.softplus(-d_real).mean() + F.softplus(D(fake)).mean() + 5.0 * r1
    dopt.zero_grad()
    loss.backward()
    dopt.step()
    r1_vals.append((loss.item(), r1.item()))
D.eval()
sig = torch.linalg.matrix_norm(D[2].weight.detach(), ord=2)
print("r1", " ".join(f"{a:.10g} {b:.10g}" for a, b in r1_vals), f(sig), f(D(real).mean()),
      sorted(n for n, _ in D.named_buffers())[:2])

# ---- model surgery, frozen BN, layer-wise LR decay, schedulers ------------------------------
net = init_(Net())
with torch.no_grad():
    old = net.head
    net.head = nn.Sequential(nn.Linear(10, 10), nn.Tanh(), nn.Linear(10, 5))
    net.head[2].weight.zero_()
    net.head[2].weight[:3].copy_(old.weight)
    net.head[2].bias.zero_()
    net.head[0].weight.copy_(torch.eye(10))
    net.head[0].bias.zero_()
    net.blocks[1] = nn.Sequential(nn.Linear(10, 10), nn.SiLU())
    init_(net.blocks[1])
net.aux = nn.Linear(10, 2)
net.train()
for m in net.modules():
    if isinstance(m, nn.BatchNorm1d):
        m.eval()
        m.requires_grad_(False)
bn_before = net.bn.running_mean.clone()
decay, base_lr = 0.5, 0.1
groups = [{"params": net.stem.parameters(), "lr": base_lr * decay ** 3},
          {"params": net.blocks[0].parameters(), "lr": base_lr * decay ** 2},
          {"params": net.blocks[1].parameters(), "lr": base_lr * decay},
          {"params": list(net.head.parameters()) + list(net.aux.parameters()), "lr": base_lr}]
opt = torch.optim.SGD(groups, lr=base_lr, momentum=0.9, weight_decay=1e-4)
warm = LinearLR(opt, start_factor=0.1, end_factor=1.0, total_iters=3)
hold = ConstantLR(opt, factor=0.5, total_iters=2)
cos_s = CosineAnnealingLR(opt, T_max=5, eta_min=1e-4)
sched = SequentialLR(opt, schedulers=[warm, hold, cos_s], milestones=[3, 5])
lrs, surg_losses = [], []
Y5 = torch.from_numpy(rng.integers(0, 5, 32))
for step in range(10):
    opt.zero_grad(set_to_none=False)
    loss = F.cross_entropy(net(X), Y5)
    loss.backward()
    opt.step()
    sched.step()
    lrs.append(opt.param_groups[0]["lr"])
    surg_losses.append(loss.item())
print("surgery", f(surg_losses[::3]), f(lrs), f(torch.equal(bn_before, net.bn.running_mean)),
      net.bn.weight.grad is None, net.aux.weight.grad is None, len(opt.param_groups),
      f([g["lr"] for g in opt.param_groups]))

opt2 = torch.optim.Adam([nn.Parameter(torch.zeros(2))], lr=1.0)
lam_s = LambdaLR(opt2, lr_lambda=lambda e: 1.0 / (1 + e))
cos = CosineAnnealingLR(opt2, T_max=5, eta_min=0.01)
chain = ChainedScheduler([lam_s, cos])
opt3 = torch.optim.SGD([nn.Parameter(torch.zeros(2))], lr=1.0)
chain3 = ChainedScheduler([ConstantLR(opt3, factor=0.5, total_iters=2),
                           PolynomialLR(opt3, total_iters=4, power=2.0),
                           LinearLR(opt3, start_factor=0.2, total_iters=3)])
chain_lrs, chain3_lrs = [], []
for _ in range(6):
    opt2.step()
    chain.step()
    chain_lrs.append(chain.get_last_lr()[0])
    opt3.step()
    chain3.step()
    chain3_lrs.append(opt3.param_groups[0]["lr"])
print("sched", f(chain_lrs), f(lam_s.state_dict()["last_epoch"]), f(chain3_lrs))

# ---- buffers in state_dict, zero_grad(set_to_none=False), post-accumulate hooks ----------------
sd = net.state_dict()
buf = io.BytesIO()
torch.save(sd, buf)
buf.seek(0)
sd2 = torch.load(buf)
opt.zero_grad(set_to_none=False)
zeros = [(p.grad is None, p.grad is not None and not p.grad.any())
         for p in net.parameters() if p.requires_grad]
zeros = f"{sum(a for a, _ in zeros)}/{sum(b for _, b in zeros)}/{len(zeros)}"
print("state", "seen" in sd, "tmp" in sd, int(sd2["seen"]), "bn.num_batches_tracked" in sd,
      zeros, len(sd))

net = init_(Net())
opts = {p: torch.optim.SGD([p], lr=0.1, momentum=0.5) for p in net.parameters()}
fired = []


def opt_hook(p):
    opts[p].step()
    opts[p].zero_grad()
    fired.append(p.shape[0])


handles = [p.register_post_accumulate_grad_hook(opt_hook) for p in net.parameters()]
ib_losses = []
for _ in range(3):
    loss = F.cross_entropy(net(X), Y)
    loss.backward()
    ib_losses.append(loss.item())
for h in handles:
    h.remove()
print("inbackward", f(ib_losses), len(fired), sorted(set(fired)),
      all(p.grad is None for p in net.parameters()))


# ---- custom autograd.Functions ----------------------------------------------------------------
class SortWithIdx(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        vals, idx = x.sort(dim=-1)
        ctx.mark_non_differentiable(idx)
        ctx.save_for_backward(idx)
        return vals, idx

    @staticmethod
    def backward(ctx, g_vals, g_idx):
        idx, = ctx.saved_tensors
        return torch.zeros_like(g_vals).scatter_(-1, idx, g_vals)


class TwoOut(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(x)
        return x * 2, x.exp()

    @staticmethod
    @once_differentiable
    def backward(ctx, ga, gb):
        x, = ctx.saved_tensors
        out = torch.zeros_like(x)
        if ga is not None:
            out = out + 2 * ga
        if gb is not None:
            out = out + gb * x.exp()
        return out


xs = torch.from_numpy(rng.standard_normal((2, 5))).requires_grad_(True)
vals, idx = SortWithIdx.apply(xs)
(vals * torch.arange(5.0)).sum().backward()
g_sort = xs.grad.clone()
xs.grad = None
a, b = TwoOut.apply(xs)
a.sum().backward()
g_a = xs.grad.clone()
a2, b2 = TwoOut.apply(xs)
try:
    gg, = torch.autograd.grad((a2 * b2).sum(), xs, create_graph=True)
    once = "grad-ok " + f(gg.sum())
    gg.sum().backward()
    once += " double-ok"
except RuntimeError:
    once += " double-RuntimeError"
print("function", f(g_sort), idx.requires_grad, vals.requires_grad, f(idx[0]), f(g_a),
      once, torch.autograd.gradcheck(lambda t: SortWithIdx.apply(t)[0], (xs.detach().clone().requires_grad_(True),)))
