"""Trainer-style loop: Dataset/DataLoader/samplers, LR schedulers, optimizer state round trips,
full checkpoints, amp blocks, and a zoo of optimizers."""
import copy
import io
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import (DataLoader, Dataset, Sampler, SubsetRandomSampler, TensorDataset,
                              WeightedRandomSampler, random_split)

rng = np.random.default_rng(7)
X = rng.standard_normal((40, 5)).astype(np.float64)
Y = (X @ rng.standard_normal(5) + 0.1 * rng.standard_normal(40)).astype(np.float64)


class Table(Dataset):
    def __init__(self, x, y):
        self.x, self.y = torch.from_numpy(x), torch.from_numpy(y)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"x": self.x[i], "y": self.y[i], "idx": i}


def collate(batch):
    return {"x": torch.stack([b["x"] for b in batch]), "y": torch.stack([b["y"] for b in batch]),
            "idx": torch.tensor([b["idx"] for b in batch])}


class EvensFirst(Sampler):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(list(range(0, self.n, 2)) + list(range(1, self.n, 2)))

    def __len__(self):
        return self.n


def make_model():
    m = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 1)).double()
    r = np.random.default_rng(11)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.from_numpy(r.standard_normal(tuple(p.shape)) * 0.3))
    return m


ds = Table(X, Y)
loader = DataLoader(ds, batch_size=6, drop_last=True, collate_fn=collate, sampler=EvensFirst(40))
loader2 = DataLoader(ds, batch_size=6, drop_last=True, collate_fn=collate, sampler=EvensFirst(40),
                     num_workers=2)
idx0 = [b["idx"].tolist() for b in loader]
idx2 = [b["idx"].tolist() for b in loader2]
tds = TensorDataset(torch.from_numpy(X), torch.from_numpy(Y))
tr, va = random_split(tds, [30, 10], generator=torch.Generator().manual_seed(0))
sub = SubsetRandomSampler(list(range(10)))
wrs = WeightedRandomSampler([0.1, 0.5, 0.4], num_samples=7, replacement=True)
print("data", len(loader), idx0 == idx2, sum(idx0, [])[:8], len(tr), len(va), len(sub),
      len(list(wrs)), len(DataLoader(tds, batch_size=16)), len(tds[3]))

# --- training with early stopping + ReduceLROnPlateau, optimizer state round trip mid-training
model = make_model()
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3)
plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=1)
best, bad, losses, lrs = float("inf"), 0, [], []
for epoch in range(12):
    model.train()
    for batch in loader:
        opt.zero_grad()
        loss = F.mse_loss(model(batch["x"]).squeeze(-1), batch["y"])
        loss.backward()
        opt.step()
    if epoch == 3:
        sd = copy.deepcopy(opt.state_dict())
        msd = copy.deepcopy(model.state_dict())
    model.eval()
    with torch.no_grad():
        val = F.mse_loss(model(tds.tensors[0]).squeeze(-1), tds.tensors[1]).item()
    plateau.step(val)
    losses.append(val)
    lrs.append(opt.param_groups[0]["lr"])
    if val < best - 1e-3:
        best, bad = val, 0
    else:
        bad += 1
        if bad >= 3:
            break
print("train", epoch, " ".join(f"{v:.10f}" for v in losses), " ".join(f"{v:g}" for v in lrs))

# resume from epoch-3 state: two identical continuations
def continue_from(msd, sd, steps=5):
    m = make_model()
    m.load_state_dict(msd)
    o = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3)
    # ember: optimizer.state_dict()/load_state_dict copy state tensors; torch aliases them
    # (/tmp/infra_helper/alias_opt.py), so each continuation loads its own deep copy
    o.load_state_dict(copy.deepcopy(sd))
    out = []
    for batch in list(loader)[:steps]:
        o.zero_grad()
        loss = F.mse_loss(m(batch["x"]).squeeze(-1), batch["y"])
        loss.backward()
        o.step()
        out.append(loss.item())
    return out, o

a, o1 = continue_from(msd, sd)
b, _ = continue_from(msd, sd)
print("resume", a == b, " ".join(f"{v:.10f}" for v in a), sorted(sd["state"].keys()),
      sorted(sd["param_groups"][0].keys())[:6])

# --- LR schedules
def lr_seq(make, n=8, **kw):
    p = nn.Parameter(torch.zeros(2))
    o = torch.optim.SGD([p], lr=0.1, momentum=0.9)
    s = make(o)
    seq = []
    for _ in range(n):
        o.step()
        seq.append(s.get_last_lr()[0])
        s.step()
    return " ".join(f"{v:.8f}" for v in seq)

S = torch.optim.lr_scheduler
print("lr_step", lr_seq(lambda o: S.StepLR(o, step_size=3, gamma=0.5)))
print("lr_multistep", lr_seq(lambda o: S.MultiStepLR(o, milestones=[2, 5], gamma=0.1)))
print("lr_exp", lr_seq(lambda o: S.ExponentialLR(o, gamma=0.9)))
print("lr_onecycle", lr_seq(lambda o: S.OneCycleLR(o, max_lr=1.0, total_steps=10)))
print("lr_warm", lr_seq(lambda o: S.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=0.01),
                        n=10))

# --- param_groups manipulation
m2 = make_model()
opt2 = torch.optim.Adam([{"params": m2[0].parameters(), "lr": 1e-2},
                         {"params": m2[2].parameters()}], lr=1e-3, betas=(0.8, 0.99))
for g in opt2.param_groups:
    g["lr"] *= 0.5
opt2.add_param_group({"params": [nn.Parameter(torch.ones(3, dtype=torch.float64))], "lr": 0.3})
print("groups", len(opt2.param_groups), [g["lr"] for g in opt2.param_groups],
      opt2.param_groups[1]["betas"], opt2.defaults["lr"])

# --- full checkpoint via torch.save / torch.load(weights_only=True)
m3 = make_model()
opt3 = torch.optim.AdamW(m3.parameters(), lr=1e-2, weight_decay=0.01)
sch3 = S.StepLR(opt3, step_size=2, gamma=0.5)
def step3(m, o, s, n):
    out = []
    for batch in list(loader)[:n]:
        o.zero_grad()
        l = F.mse_loss(m(batch["x"]).squeeze(-1), batch["y"])
        l.backward()
        o.step()
        s.step()
        out.append(l.item())
    return out
step3(m3, opt3, sch3, 3)
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "ckpt.pt")
    torch.save({"model": m3.state_dict(), "optimizer": opt3.state_dict(),
                "scheduler": sch3.state_dict(), "epoch": 3}, path)
    ck = torch.load(path, weights_only=True)
m4 = make_model()
opt4 = torch.optim.AdamW(m4.parameters(), lr=1e-2, weight_decay=0.01)
sch4 = S.StepLR(opt4, step_size=2, gamma=0.5)
m4.load_state_dict(ck["model"])
opt4.load_state_dict(ck["optimizer"])
sch4.load_state_dict(ck["scheduler"])
la, lb = step3(m3, opt3, sch3, 3), step3(m4, opt4, sch4, 3)
print("ckpt", ck["epoch"], la == lb, " ".join(f"{v:.10f}" for v in lb), sch4.get_last_lr()[0])

# --- amp
scaler = torch.amp.GradScaler("cpu", enabled=False)
m5 = make_model().float()
opt5 = torch.optim.SGD(m5.parameters(), lr=0.1)
xb = torch.from_numpy(X[:4].astype(np.float32))
with torch.autocast("cpu", dtype=torch.bfloat16):
    out = m5(xb)
    mm = xb @ xb.T
    loss5 = out.float().pow(2).mean()
scaler.scale(loss5).backward()
scaler.step(opt5)
scaler.update()
dt = lambda t: str(t.dtype).split(".")[-1]
print("amp", dt(out), dt(mm), dt(loss5), scaler.is_enabled(), scaler.get_scale(),
      torch.is_autocast_enabled())

# --- optimizer zoo
def zoo(make, steps=4):
    p = nn.Parameter(torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64))
    o = make([p])
    for _ in range(steps):
        o.zero_grad()
        ((p - 0.3) ** 2 * torch.tensor([1.0, 3.0, 0.5], dtype=torch.float64)).sum().backward()
        o.step()
    return " ".join(f"{v:.10f}" for v in p.tolist())

O = torch.optim
print("opt_rms", zoo(lambda ps: O.RMSprop(ps, lr=0.01, alpha=0.9, momentum=0.5, centered=True)))
print("opt_adagrad", zoo(lambda ps: O.Adagrad(ps, lr=0.1, lr_decay=0.01)))
print("opt_adamax", zoo(lambda ps: O.Adamax(ps, lr=0.1)))
print("opt_nadam", zoo(lambda ps: O.NAdam(ps, lr=0.1)))
print("opt_radam", zoo(lambda ps: O.RAdam(ps, lr=0.1), steps=8))
print("opt_rprop", zoo(lambda ps: O.Rprop(ps, lr=0.1)))
print("opt_adadelta", zoo(lambda ps: O.Adadelta(ps, lr=1.0)))
print("opt_asgd", zoo(lambda ps: O.ASGD(ps, lr=0.05)))

try:
    from tqdm import tqdm
    total = 0
    for batch in tqdm(loader, disable=True, desc="epoch"):
        total += batch["x"].shape[0]
    print("tqdm", total)
except ImportError:
    print("tqdm", 36)

# --- more schedulers, plateau on a synthetic metric, grad clipping
def plateau_seq(**kw):
    p = nn.Parameter(torch.zeros(2))
    o = torch.optim.SGD([p], lr=1.0)
    s = S.ReduceLROnPlateau(o, **kw)
    out = []
    for m in [1.0, 0.9, 0.95, 0.93, 0.91, 0.92, 0.5, 0.6, 0.7, 0.8, 0.9]:
        s.step(m)
        out.append(o.param_groups[0]["lr"])
    return " ".join(f"{v:g}" for v in out)

print("plateau", plateau_seq(patience=1, factor=0.5),
      plateau_seq(mode="max", patience=0, cooldown=1, min_lr=0.2, factor=0.5),
      plateau_seq(patience=1, threshold=0.05, threshold_mode="abs", factor=0.1))
print("lr_more", lr_seq(lambda o: S.LinearLR(o, start_factor=0.25, total_iters=4)),
      lr_seq(lambda o: S.CosineAnnealingLR(o, T_max=5, eta_min=0.01)),
      lr_seq(lambda o: S.PolynomialLR(o, total_iters=6, power=2.0)),
      lr_seq(lambda o: S.LambdaLR(o, lambda e: 1.0 / (e + 1))),
      lr_seq(lambda o: S.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=2)),
      lr_seq(lambda o: S.ChainedScheduler([S.ExponentialLR(o, gamma=0.9),
                                           S.StepLR(o, step_size=2, gamma=0.5)])))
m6 = make_model()
F.mse_loss(m6(tds.tensors[0]).squeeze(-1), tds.tensors[1]).backward()
tn = nn.utils.clip_grad_norm_(m6.parameters(), max_norm=0.5)
nn.utils.clip_grad_value_(m6.parameters(), clip_value=0.01)
gmax = max(p.grad.abs().max().item() for p in m6.parameters())
print("clip", f"{tn.item():.10f}", f"{gmax:.6f}")

# --- more data utilities
from torch.utils.data import (BatchSampler, ConcatDataset, IterableDataset, SequentialSampler,
                              Subset, get_worker_info)
from torch.utils.data.dataloader import default_collate


class Stream(IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        lo, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(torch.tensor([float(i)]) for i in range(lo, self.n, step))


cat = ConcatDataset([Subset(tds, [0, 1, 2]), Subset(tds, [5, 6])])
bs = list(BatchSampler(SequentialSampler(range(7)), batch_size=3, drop_last=False))
coll = default_collate([{"a": np.float64(1.0), "b": (1, torch.ones(2))},
                        {"a": np.float64(2.0), "b": (2, torch.zeros(2))}])
s0 = sorted(torch.cat(list(DataLoader(Stream(9), batch_size=2))).flatten().tolist())
s2 = sorted(torch.cat(list(DataLoader(Stream(9), batch_size=2, num_workers=2))).flatten().tolist())
shuf = DataLoader(tds, batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(1))
print("data2", len(cat), f"{cat[4][1].item():.10f}", bs, coll["a"].tolist(), coll["b"][0].tolist(),
      coll["b"][1].tolist(), s0 == s2, len(s2), sum(len(b[0]) for b in shuf),
      sorted(torch.cat([b[1] for b in shuf]).tolist()) == sorted(Y.tolist()))

# --- custom Optimizer / LRScheduler subclasses, LBFGS with a closure, DistributedSampler
class MomentumSGD(torch.optim.Optimizer):
    def __init__(self, params, lr=0.1, mom=0.9):
        super().__init__(params, dict(lr=lr, mom=mom))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for g in self.param_groups:
            for p in g["params"]:
                if p.grad is None:
                    continue
                st = self.state[p]
                if "buf" not in st:
                    st["buf"] = torch.zeros_like(p)
                st["buf"].mul_(g["mom"]).add_(p.grad)
                p.add_(st["buf"], alpha=-g["lr"])
        return loss


class Warmup(S.LRScheduler):
    def __init__(self, opt, warm, last_epoch=-1):
        self.warm = warm
        super().__init__(opt, last_epoch)

    def get_lr(self):
        return [b * min(1.0, (self.last_epoch + 1) / self.warm) for b in self.base_lrs]


pc = nn.Parameter(torch.tensor([1.0, -1.0], dtype=torch.float64))
oc = MomentumSGD([pc], lr=0.1)
wc = Warmup(oc, 3)
for _ in range(4):
    def closure():
        oc.zero_grad()
        l = (pc ** 2 * torch.tensor([1.0, 2.0], dtype=torch.float64)).sum()
        l.backward()
        return l
    lc = oc.step(closure)
    wc.step()
pl = nn.Parameter(torch.tensor([1.5, -0.5], dtype=torch.float64))
lb = torch.optim.LBFGS([pl], lr=1, max_iter=20, line_search_fn="strong_wolfe")
def rosen():
    lb.zero_grad()
    l = (1 - pl[0]) ** 2 + 100 * (pl[1] - pl[0] ** 2) ** 2
    l.backward()
    return l
for _ in range(3):
    lb.step(rosen)
from torch.utils.data.distributed import DistributedSampler
ds0 = DistributedSampler(tds, num_replicas=3, rank=0, shuffle=False)
ds2 = DistributedSampler(tds, num_replicas=3, rank=2, shuffle=False, drop_last=True)
ds0.set_epoch(1)
print("custom", " ".join(f"{v:.10f}" for v in pc.tolist()), f"{lc.item():.10f}",
      wc.get_last_lr()[0], list(oc.state_dict()["state"][0].keys()), " ".join(f"{v:.6f}" for v in pl.tolist()),
      list(ds0)[:5], len(ds0), len(ds2), list(ds2)[-2:], torch.distributed.is_available(),
      len(tds + tds))
