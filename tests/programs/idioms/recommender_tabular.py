"""Recommender / tabular idioms: matrix factorisation with nn.Embedding and biases, a
factorisation machine (sum-square trick), DLRM-style bmm + triu_indices interactions, DeepFM and
Wide&Deep, BCEWithLogitsLoss(pos_weight), AUC via argsort/cumsum, feature hashing with
torch.remainder, EmbeddingBag with per_sample_weights, Adagrad-style sparse updates through
index_add_, running-statistics normalisation buffers, F.normalize, unique(return_inverse) label
encoding, k-fold splits, a TabTransformer over column embeddings, boosting-style residual fitting
of tiny MLPs, early stopping and torch.save/torch.load of a dict of tensors."""
import io

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(17)
torch.set_default_dtype(torch.float64)
f = lambda t: " ".join(f"{v:.10g}" for v in torch.as_tensor(t).flatten().tolist())


def init_(m, scale=0.1):
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.from_numpy(np.asarray(rng.standard_normal(tuple(p.shape)) * scale)))
    return m


def auc(scores, labels):
    order = torch.argsort(scores, descending=True)
    y = labels[order]
    tps, fps = torch.cumsum(y, 0), torch.cumsum(1 - y, 0)
    tpr, fpr = tps / tps[-1], fps / fps[-1]
    return torch.trapezoid(tpr, fpr)


# ---- data: users, items, categorical + dense features --------------------------------------
NU, NI, N = 12, 15, 96
users = torch.from_numpy(rng.integers(0, NU, N))
items = torch.from_numpy(rng.integers(0, NI, N))
true_u, true_i = rng.standard_normal((NU, 3)), rng.standard_normal((NI, 3))
ratings = torch.from_numpy((true_u[users.numpy()] * true_i[items.numpy()]).sum(1)
                           + 0.1 * rng.standard_normal(N))
clicks = (ratings > 0.8).to(torch.float64)
raw_city = np.array(["paris", "tokyo", "lima", "oslo", "paris", "lima"])[rng.integers(0, 6, N)]
dense = torch.from_numpy(rng.standard_normal((N, 4)) * np.array([1.0, 3.0, 0.5, 10.0]) + 2.0)

# label encoding with unique(return_inverse) (strings -> ids via NumPy first)
city_vals, city_codes = np.unique(raw_city, return_inverse=True)
codes = torch.from_numpy(rng.integers(100, 110, N))
uniq, inv, counts = torch.unique(codes, sorted=True, return_inverse=True, return_counts=True)
hashed = torch.remainder(codes * 2654435761, 7)
print("encode", [str(c) for c in city_vals], f(uniq), f(inv[:8]), f(counts), f(hashed[:10]),
      f(torch.remainder(torch.tensor([-7, 7, -3]), 4)), f(torch.fmod(torch.tensor([-7.0, 7.0]), 4)))


# ---- matrix factorisation ---------------------------------------------------------------------
class MF(nn.Module):
    def __init__(self, nu, ni, k):
        super().__init__()
        self.u, self.i = nn.Embedding(nu, k), nn.Embedding(ni, k)
        self.ub, self.ib = nn.Embedding(nu, 1), nn.Embedding(ni, 1)
        self.mu = nn.Parameter(torch.zeros(()))

    def forward(self, u, i):
        return ((self.u(u) * self.i(i)).sum(-1) + self.ub(u).squeeze(-1) + self.ib(i).squeeze(-1)
                + self.mu)


mf = init_(MF(NU, NI, 4), 0.3)
opt = torch.optim.Adam(mf.parameters(), lr=0.05, weight_decay=1e-4)
mf_losses = []
for epoch in range(12):
    for idx in np.array_split(np.arange(N), 3):
        idx_t = torch.from_numpy(idx)
        loss = F.mse_loss(mf(users[idx_t], items[idx_t]), ratings[idx_t])
        opt.zero_grad()
        loss.backward()
        opt.step()
    mf_losses.append(loss.item())
with torch.no_grad():
    scores = mf.u.weight @ mf.i.weight.T + mf.ib.weight.T
    top = torch.topk(scores[0], 3)
print("mf", f(mf_losses[::3]), f(top.values), f(top.indices), f(mf.u.weight.grad.abs().sum()))

# ---- Adagrad-style sparse update through index_add_ ---------------------------------------------
table = torch.from_numpy(rng.standard_normal((NI, 4)) * 0.1)
accum = torch.zeros(NI)
target_vec = torch.from_numpy(rng.standard_normal((N, 4)))
for step in range(5):
    rows = table[items].clone().requires_grad_(True)
    loss = (rows - target_vec).pow(2).sum(-1).mean()
    g, = torch.autograd.grad(loss, rows)
    gsum = torch.zeros_like(table).index_add_(0, items, g)
    touched = torch.unique(items)
    accum.index_add_(0, touched, gsum[touched].pow(2).mean(-1))
    table.index_add_(0, touched, -0.5 * gsum[touched] / (accum[touched].sqrt() + 1e-10).unsqueeze(-1))
print("sparse", f(loss), f(table.sum()), f(accum.max()), len(touched))


# ---- FM / DLRM / DeepFM / Wide&Deep ----------------------------------------------------------
class FM(nn.Module):
    def __init__(self, cards, k):
        super().__init__()
        self.offsets = torch.tensor(np.concatenate([[0], np.cumsum(cards)[:-1]]))
        self.emb = nn.Embedding(sum(cards), k)
        self.lin = nn.Embedding(sum(cards), 1)
        self.bias = nn.Parameter(torch.zeros(1))

    def interactions(self, x):
        e = self.emb(x + self.offsets)
        return 0.5 * (e.sum(1).pow(2) - e.pow(2).sum(1)).sum(-1), e

    def forward(self, x):
        inter, _ = self.interactions(x)
        return self.lin(x + self.offsets).sum((1, 2)) + self.bias + inter


class DLRM(nn.Module):
    def __init__(self, cards, k, nd):
        super().__init__()
        self.embs = nn.ModuleList([nn.Embedding(c, k) for c in cards])
        self.bot = nn.Sequential(nn.Linear(nd, 8), nn.ReLU(), nn.Linear(8, k))
        nf = len(cards) + 1
        self.register_buffer("li", torch.triu_indices(nf, nf, offset=1)[0])
        self.register_buffer("lj", torch.triu_indices(nf, nf, offset=1)[1])
        self.top = nn.Sequential(nn.Linear(k + nf * (nf - 1) // 2, 8), nn.ReLU(), nn.Linear(8, 1))

    def forward(self, x, d):
        z = self.bot(d)
        t = torch.stack([z] + [e(x[:, j]) for j, e in enumerate(self.embs)], dim=1)
        zz = torch.bmm(t, t.transpose(1, 2))
        return self.top(torch.cat([z, zz[:, self.li, self.lj]], 1)).squeeze(-1)


class DeepFM(nn.Module):
    def __init__(self, cards, k):
        super().__init__()
        self.fm = FM(cards, k)
        self.deep = nn.Sequential(nn.Linear(len(cards) * k, 16), nn.ReLU(), nn.Dropout(0.0),
                                  nn.Linear(16, 1))
        self.wide = nn.Linear(4, 1)

    def forward(self, x, d):
        inter, e = self.fm.interactions(x)
        lin = self.fm.lin(x + self.fm.offsets).sum((1, 2)) + self.fm.bias
        return lin + inter + self.deep(e.flatten(1)).squeeze(-1) + self.wide(d).squeeze(-1)


cards = [NU, NI, len(city_vals), 7]
xcat = torch.stack([users, items, torch.from_numpy(city_codes), hashed], 1)
mean, std = dense.mean(0, keepdim=True), dense.std(0, unbiased=True, keepdim=True)
xd = (dense - mean) / std
pos_weight = (clicks == 0).sum() / (clicks == 1).sum()
crit = nn.BCEWithLogitsLoss(pos_weight=pos_weight.reshape(1))
out = {}
for name, model, args in [("fm", FM(cards, 3), (xcat,)), ("dlrm", DLRM(cards, 3, 4), (xcat, xd)),
                          ("deepfm", DeepFM(cards, 3), (xcat, xd))]:
    init_(model, 0.2)
    opt = torch.optim.Adagrad(model.parameters(), lr=0.1, lr_decay=1e-3, initial_accumulator_value=0.1)
    for step in range(15):
        opt.zero_grad()
        logits = model(*args)
        loss = crit(logits, clicks)
        loss.backward()
        opt.step()
    with torch.no_grad():
        out[name] = (loss.item(), auc(model(*args), clicks).item())
print("ctr", f(pos_weight), " ".join(f"{k} {v[0]:.10g} {v[1]:.10g}" for k, v in out.items()))

# ---- EmbeddingBag with per_sample_weights + F.normalize --------------------------------------
bag = init_(nn.EmbeddingBag(20, 5, mode="sum"), 0.5)
flat = torch.from_numpy(rng.integers(0, 20, 11))
offsets = torch.tensor([0, 3, 4, 8])
w = torch.from_numpy(rng.random(11))
pooled = bag(flat, offsets, per_sample_weights=w)
bag2 = nn.EmbeddingBag.from_pretrained(bag.weight.detach(), mode="mean", freeze=True)
bagmax = nn.EmbeddingBag.from_pretrained(bag.weight.detach(), mode="max")
normed = F.normalize(pooled, p=2, dim=1)
pooled.pow(2).sum().backward()
print("bag", f(pooled.sum(1)), f(bag2(flat, offsets).sum(1)), f(bagmax(flat.view(-1, 1)).sum()),
      f(normed.norm(dim=1)), f(F.normalize(pooled.detach(), p=1, dim=0)[0]), f(bag.weight.grad.sum(1)[:6]))


# ---- running-statistics normaliser, TabTransformer ------------------------------------------
class RunningNorm(nn.Module):
    def __init__(self, d, momentum=0.1):
        super().__init__()
        self.momentum = momentum
        self.register_buffer("mean", torch.zeros(d))
        self.register_buffer("var", torch.ones(d))
        self.register_buffer("count", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        if self.training:
            with torch.no_grad():
                m, v = x.mean(0), x.var(0, unbiased=False)
                self.mean.mul_(1 - self.momentum).add_(m, alpha=self.momentum)
                self.var.lerp_(v, self.momentum)
                self.count += 1
        return (x - self.mean) / torch.sqrt(self.var + 1e-5)


class TabTransformer(nn.Module):
    def __init__(self, cards, k, nd):
        super().__init__()
        self.col = nn.ModuleList([nn.Embedding(c, k) for c in cards])
        self.col_id = nn.Parameter(torch.zeros(len(cards), k))
        self.attn = nn.MultiheadAttention(k, 2, batch_first=True, dropout=0.0)
        self.ln = nn.LayerNorm(k)
        self.norm = RunningNorm(nd)
        self.head = nn.Sequential(nn.Linear(len(cards) * k + nd, 8), nn.GELU(), nn.Linear(8, 1))

    def forward(self, x, d):
        tok = torch.stack([e(x[:, j]) for j, e in enumerate(self.col)], 1) + self.col_id
        a, w = self.attn(tok, tok, tok, need_weights=True, average_attn_weights=True)
        h = self.ln(tok + a)
        return self.head(torch.cat([h.flatten(1), self.norm(d)], 1)).squeeze(-1), w


# k-fold CV with early stopping on validation AUC
folds = np.array_split(rng.permutation(N), 3)
fold_res = []
for k_i in range(3):
    va = torch.from_numpy(folds[k_i])
    tr = torch.from_numpy(np.concatenate([folds[j] for j in range(3) if j != k_i]))
    model = init_(TabTransformer(cards, 4, 4), 0.2)
    opt = torch.optim.AdamW(model.parameters(), lr=0.02)
    best, best_state, bad, epochs = -1.0, None, 0, 0
    for epoch in range(20):
        model.train()
        opt.zero_grad()
        logit, _ = model(xcat[tr], dense[tr])
        F.binary_cross_entropy_with_logits(logit, clicks[tr], pos_weight=pos_weight).backward()
        opt.step()
        model.eval()
        with torch.no_grad():
            vl, attw = model(xcat[va], dense[va])
            score = auc(vl, clicks[va]).item()
        epochs += 1
        if score > best + 1e-4:
            best, bad = score, 0
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        else:
            bad += 1
            if bad >= 4:
                break
    fold_res.append((best, epochs))
model.load_state_dict(best_state)
print("tab", " ".join(f"{b:.10g} {e}" for b, e in fold_res), f(model.norm.count),
      f(model.norm.mean), f(attw[0].sum(-1)), tuple(attw.shape), sorted(best_state)[:3])

# ---- boosting-like residual fitting of tiny MLPs -----------------------------------------------
X = torch.from_numpy(rng.uniform(-2, 2, (64, 2)))
y = torch.sin(X[:, 0]) * X[:, 1] + 0.05 * torch.from_numpy(rng.standard_normal(64))
pred, shrink, stage_losses, learners = torch.full_like(y, y.mean().item()), 0.5, [], []
for stage in range(4):
    resid = y - pred
    m = init_(nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 1)), 0.5)
    o = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    for _ in range(25):
        o.zero_grad()
        l = F.smooth_l1_loss(m(X).squeeze(-1), resid, beta=0.5)
        l.backward()
        o.step()
    with torch.no_grad():
        pred = pred + shrink * m(X).squeeze(-1)
    learners.append(m)
    stage_losses.append(F.mse_loss(pred, y).item())
print("boost", f(stage_losses), f(F.huber_loss(pred, y, delta=0.3)), f(F.l1_loss(pred, y)))

# ---- assorted tabular preprocessing ---------------------------------------------------------
col = dense[:, 1].clone()
col[::7] = float("nan")
edges = torch.nanquantile(col, torch.tensor([0.25, 0.5, 0.75]))
binned = torch.bucketize(torch.nan_to_num(col, nan=0.0), edges, right=True)
oh = F.one_hot(binned, num_classes=4)
fill = torch.where(torch.isnan(col), torch.nanmean(col), col)
seg_mean = torch.zeros(4).scatter_reduce(0, binned, fill, reduce="mean", include_self=False)
seg_max = torch.full((4,), -1e9).scatter_reduce(0, binned, fill, reduce="amax")
cnt = torch.bincount(binned, weights=clicks, minlength=4)
acc = torch.zeros(NU).index_put_((users,), clicks, accumulate=True)
emb_mn = nn.Embedding(NI, 3, padding_idx=0, max_norm=1.0)
init_(emb_mn, 1.0)
_ = emb_mn(items[:10])
seen = torch.isin(items, torch.tensor([1, 2, 3]))
cm_vals, cm_idx = torch.cummax(ratings[:8], 0)
print("prep", f(edges), f(oh.sum(0)), f(seg_mean), f(seg_max), f(cnt), f(acc),
      f(emb_mn.weight.norm(dim=1)[:6]), f(seen.sum()), f(cm_vals), f(cm_idx),
      f(torch.searchsorted(edges, torch.tensor([0.0, 2.0, 5.0]))), f(torch.histc(fill, bins=4)),
      f(torch.unique_consecutive(binned.sort().values)), f(torch.nansum(col)),
      f(torch.masked_fill(col, col.isnan(), -1.0)[:8]))

# ---- save / load a dict of tensors ------------------------------------------------------------
buf = io.BytesIO()
torch.save({"table": table, "codes": codes, "meta": {"k": 4, "names": ["a", "b"]},
            "stats": [mean.squeeze(0), std.squeeze(0)], "mf": mf.state_dict()}, buf)
buf.seek(0)
ck = torch.load(buf, weights_only=True)
mf2 = MF(NU, NI, 4)
missing = mf2.load_state_dict(ck["mf"], strict=True)
print("ckpt", sorted(ck), f(torch.equal(ck["table"], table)), str(ck["codes"].dtype).split(".")[-1],
      ck["meta"]["k"], f(ck["stats"][1]), f(mf2(users[:3], items[:3])), len(missing.missing_keys))
