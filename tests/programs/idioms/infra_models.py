"""Tabular / metric-learning / distillation / RL / GNN idioms."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Bernoulli, Categorical, Normal

rng = np.random.default_rng(5)
f = lambda t: " ".join(f"{v:.10f}" for v in torch.as_tensor(t).flatten().tolist())


def init_(m, scale=0.3):
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.from_numpy(rng.standard_normal(tuple(p.shape)) * scale).to(p.dtype))
    return m


class TabMLP(nn.Module):
    def __init__(self, d, h, k, p=0.3):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d, h), nn.BatchNorm1d(h), nn.ReLU(), nn.Dropout(p),
                                 nn.Linear(h, h), nn.BatchNorm1d(h), nn.GELU(), nn.Dropout(p),
                                 nn.Linear(h, k))

    def forward(self, x):
        return self.net(x)


X = torch.from_numpy(rng.standard_normal((16, 6)))
teacher = init_(TabMLP(6, 12, 4).double())
student = init_(TabMLP(6, 6, 4, p=0.1).double())
# train-mode forwards with dropout switched off update the BatchNorm running statistics
with torch.no_grad():
    for m in teacher.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
    teacher.train()
    teacher(X)
    teacher(X * 2)
teacher.eval()
bn = teacher.net[1]
print("bn", f(bn.running_mean[:3]), f(bn.running_var[:3]), bn.num_batches_tracked.item())

T = 2.0
kd = nn.KLDivLoss(reduction="batchmean", log_target=True)
student.eval()
with torch.no_grad():
    t_logits = teacher(X)
s_logits = student(X)
loss_kd = kd(F.log_softmax(s_logits / T, -1), F.log_softmax(t_logits / T, -1)) * T * T
labels = torch.from_numpy(rng.integers(0, 4, 16))
loss = 0.7 * loss_kd + 0.3 * F.cross_entropy(s_logits, labels, label_smoothing=0.1)
loss.backward()
print("kd", f"{loss_kd.item():.10f}", f"{loss.item():.10f}",
      f"{student.net[0].weight.grad.abs().sum().item():.10f}",
      f"{F.kl_div(F.log_softmax(s_logits, -1), F.softmax(t_logits, -1), reduction='sum').item():.10f}")

# --- losses
a, p_, n_ = (torch.from_numpy(rng.standard_normal((5, 4))).requires_grad_() for _ in range(3))
y = torch.tensor([1.0, -1.0, 1.0, 1.0, -1.0], dtype=torch.float64)
tgt = torch.from_numpy(rng.standard_normal((5, 4)))
var = torch.from_numpy(rng.random((5, 4)) + 0.1)
counts = torch.from_numpy(rng.poisson(2.0, (5, 4)).astype(np.float64))
losses = [nn.TripletMarginLoss(margin=1.0, p=2)(a, p_, n_),
          nn.TripletMarginWithDistanceLoss(distance_function=lambda u, v: 1 - F.cosine_similarity(u, v),
                                           margin=0.5)(a, p_, n_),
          nn.CosineEmbeddingLoss(margin=0.2)(a, p_, y),
          nn.MarginRankingLoss(margin=0.1)(a[:, 0], p_[:, 0], y),
          nn.HuberLoss(delta=0.5)(a, tgt), nn.SmoothL1Loss(beta=0.5)(a, tgt),
          nn.PoissonNLLLoss(log_input=True)(a, counts),
          nn.PoissonNLLLoss(log_input=False, full=True)(a.exp(), counts),
          nn.GaussianNLLLoss(full=True)(a, tgt, var),
          nn.HingeEmbeddingLoss(margin=1.0)(a.abs(), y[:, None].expand(5, 4)),
          nn.SoftMarginLoss()(a, y[:, None].expand(5, 4)),
          nn.MultiLabelSoftMarginLoss()(a, (tgt > 0).double()),
          nn.BCEWithLogitsLoss(pos_weight=torch.full((4,), 2.0, dtype=torch.float64))(a, (tgt > 0).double()),
          nn.MultiMarginLoss(margin=0.5)(a, torch.tensor([0, 1, 2, 3, 0]))]
total = sum(losses)
total.backward()
print("losses", f(torch.stack([l.detach() for l in losses])))
print("loss_grads", f(a.grad.sum(1)), f(n_.grad.sum()))

# --- metric learning: normalize, cosine_similarity, cdist, InfoNCE
z1 = F.normalize(torch.from_numpy(rng.standard_normal((6, 8))), dim=1)
z2 = F.normalize(z1 + 0.3 * torch.from_numpy(rng.standard_normal((6, 8))), dim=1)
sim = z1 @ z2.T / 0.1
info_nce = (F.cross_entropy(sim, torch.arange(6)) + F.cross_entropy(sim.T, torch.arange(6))) / 2
cs = F.cosine_similarity(z1[:, None, :], z2[None, :, :], dim=-1)
d = torch.cdist(z1, z2)
d1 = torch.cdist(z1, z2, p=1)
pd = F.pairwise_distance(z1, z2)
print("metric", f"{info_nce.item():.10f}", f"{cs.diagonal().sum().item():.10f}",
      f"{d.sum().item():.10f}", f"{d1.max().item():.10f}", f"{pd.sum().item():.10f}",
      d.argmin(1).tolist(), f"{torch.pdist(z1).sum().item():.10f}")

# --- REINFORCE
policy = init_(nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 3)).double())
states = torch.from_numpy(rng.standard_normal((10, 4)))
actions = torch.from_numpy(rng.integers(0, 3, 10))
rewards = rng.standard_normal(10)
returns, G = [], 0.0
for r in rewards[::-1]:
    G = r + 0.99 * G
    returns.insert(0, G)
returns = torch.tensor(returns, dtype=torch.float64)
returns = (returns - returns.mean()) / (returns.std() + 1e-8)
dist = Categorical(logits=policy(states))
pg = -(dist.log_prob(actions) * returns).sum() - 0.01 * dist.entropy().mean()
pg.backward()
print("reinforce", f"{pg.item():.10f}", f(dist.probs[0]), f"{policy[0].weight.grad.norm().item():.10f}",
      f(Categorical(probs=torch.tensor([0.2, 0.3, 0.5], dtype=torch.float64)).log_prob(torch.tensor([2, 0]))))
nd = Normal(torch.tensor([0.0, 1.0], dtype=torch.float64), torch.tensor([1.0, 0.5], dtype=torch.float64))
bd = Bernoulli(logits=torch.tensor([0.3, -1.2], dtype=torch.float64))
print("dists", f(nd.log_prob(torch.tensor([0.5, 0.2], dtype=torch.float64))), f(nd.entropy()),
      f(nd.cdf(torch.tensor([0.5, 0.2], dtype=torch.float64))),
      f(bd.log_prob(torch.tensor([1.0, 0.0], dtype=torch.float64))), f(bd.probs), f(bd.entropy()))

# --- GNN message passing
N, E = 5, 8
src = torch.from_numpy(rng.integers(0, N, E))
dst = torch.from_numpy(rng.integers(0, N, E))
h = torch.from_numpy(rng.standard_normal((N, 3))).requires_grad_()
W = nn.Linear(3, 3, bias=False).double()
init_(W)
msg = W(h)[src]
agg_sum = torch.zeros(N, 3, dtype=torch.float64).index_add_(0, dst, msg)
agg_mean = torch.zeros(N, 3, dtype=torch.float64).scatter_reduce(
    0, dst[:, None].expand(E, 3), msg, reduce="mean", include_self=False)
agg_max = torch.full((N, 3), -1e9, dtype=torch.float64).scatter_reduce(
    0, dst[:, None].expand(E, 3), msg, reduce="amax", include_self=True)
deg = torch.bincount(dst, minlength=N).double()
adj = torch.sparse_coo_tensor(torch.stack([dst, src]), torch.ones(E, dtype=torch.float64), (N, N))
agg_sp = torch.sparse.mm(adj, W(h))
out = F.relu(agg_sum + agg_mean + h).sum() + agg_sp.sum()
out.backward()
print("gnn", f(agg_sum.sum(1)), f(agg_mean.sum(1)), f(agg_max.clamp(min=-10).sum(1)), deg.tolist(),
      f"{(agg_sp - agg_sum).abs().max().item():.10f}", f(h.grad.sum(1)),
      adj.coalesce().values().tolist(), f(adj.to_dense().sum(0)))

# --- embeddings with padding_idx, parameters_to_vector
emb = nn.Embedding(10, 4, padding_idx=0).double()
with torch.no_grad():
    emb.weight[1:].copy_(torch.from_numpy(rng.standard_normal((9, 4))))
tok = torch.tensor([[1, 2, 0, 0], [3, 0, 0, 0]])
e = emb(tok)
mask = (tok != 0).unsqueeze(-1).double()
pooled = (e * mask).sum(1) / mask.sum(1)
pooled.sum().backward()
bag = nn.EmbeddingBag.from_pretrained(emb.weight.detach(), mode="mean", padding_idx=0)
print("emb", f(pooled), f(emb.weight.grad.sum(1)), f(bag(tok)),
      f(F.embedding(tok, emb.weight, padding_idx=0, max_norm=None).sum((1, 2))))
vec = nn.utils.parameters_to_vector(policy.parameters())
nn.utils.vector_to_parameters(vec * 0.5, policy.parameters())
print("vec", vec.numel(), f"{vec.sum().item():.10f}", f"{policy[2].bias.sum().item():.10f}",
      sum(p.numel() for p in policy.parameters() if p.requires_grad))

# --- DQN-style update: gather, max over actions, soft target update, more distributions
from torch.distributions import (Beta, Dirichlet, Independent, Laplace, MultivariateNormal,
                                 OneHotCategorical, Poisson, StudentT, TransformedDistribution,
                                 kl_divergence)
from torch.distributions.transforms import AffineTransform, TanhTransform

q_net = init_(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).double())
q_tgt = init_(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).double())
q_tgt.load_state_dict(q_net.state_dict())
q_tgt.requires_grad_(False)
nxt = torch.from_numpy(rng.standard_normal((10, 4)))
done = torch.from_numpy((rng.random(10) < 0.2).astype(np.float64))
q = q_net(states).gather(1, actions.unsqueeze(1)).squeeze(1)
with torch.no_grad():
    best = q_net(nxt).argmax(1, keepdim=True)
    target = torch.from_numpy(rewards) + 0.99 * (1 - done) * q_tgt(nxt).gather(1, best).squeeze(1)
dqn = F.smooth_l1_loss(q, target)
dqn.backward()
with torch.no_grad():
    for pt, po in zip(q_tgt.parameters(), q_net.parameters()):
        pt.mul_(0.95).add_(po - po.grad * 0.1, alpha=0.05)
mx = q_net(nxt).max(dim=1)
print("dqn", f"{dqn.item():.10f}", f(target[:3]), f"{q_tgt[2].weight.sum().item():.10f}",
      mx.indices.tolist(), f"{mx.values.sum().item():.10f}")

loc = torch.tensor([0.5, -0.2], dtype=torch.float64)
cov = torch.tensor([[1.0, 0.3], [0.3, 0.5]], dtype=torch.float64)
mvn = MultivariateNormal(loc, covariance_matrix=cov)
ind = Independent(Normal(loc, torch.tensor([1.0, 0.7], dtype=torch.float64)), 1)
squashed = TransformedDistribution(Normal(loc, torch.ones(2, dtype=torch.float64)),
                                   [TanhTransform(cache_size=1), AffineTransform(0.0, 2.0)])
v = torch.tensor([[0.1, 0.2], [-0.3, 0.4]], dtype=torch.float64)
print("dists2", f(mvn.log_prob(v)), f(mvn.entropy()), f(ind.log_prob(v)), f(squashed.log_prob(v)),
      f(Beta(torch.tensor(2.0, dtype=torch.float64), torch.tensor(3.0, dtype=torch.float64)).log_prob(
          torch.tensor(0.3, dtype=torch.float64))),
      f(Dirichlet(torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)).log_prob(
          torch.tensor([0.2, 0.3, 0.5], dtype=torch.float64))),
      f(OneHotCategorical(logits=torch.tensor([0.1, 0.2, 0.7], dtype=torch.float64)).log_prob(
          F.one_hot(torch.tensor([2, 0]), 3).double())),
      f(Poisson(torch.tensor([2.5], dtype=torch.float64)).log_prob(torch.tensor([3.0]))),
      f(Laplace(torch.tensor(0.5, dtype=torch.float64), 2.0).cdf(torch.tensor(1.0))),
      f(StudentT(torch.tensor(4.0, dtype=torch.float64)).log_prob(torch.tensor(0.7))),
      f(kl_divergence(ind, Independent(Normal(loc * 0, torch.ones(2, dtype=torch.float64)), 1))),
      tuple(ind.event_shape), tuple(mvn.batch_shape), tuple(mvn.scale_tril.shape))
print("dists32", f(kl_divergence(Categorical(logits=torch.tensor([0.1, 0.2, 0.7])),
                                 Categorical(logits=torch.tensor([0.3, 0.3, 0.4])))))

# --- more scatter reductions (and their gradients), sparse ops, classification losses
src = torch.tensor([0, 1, 1, 2, 3, 3, 3])
val = torch.from_numpy(rng.standard_normal(7)).requires_grad_()
red = [torch.ones(4, dtype=torch.float64).scatter_reduce(0, src, val, "prod"),
       torch.zeros(5, dtype=torch.float64).scatter_reduce(0, src, val, "amin", include_self=False),
       torch.ones(4, dtype=torch.float64).scatter_reduce(0, src, val, "mean"),
       torch.zeros(4, dtype=torch.float64).scatter_reduce(0, src, val, "amax", include_self=False),
       torch.zeros(4, dtype=torch.float64).index_put((src,), val, accumulate=True)]
sum(r.pow(2).sum() for r in red).backward()
ii = torch.tensor([[0, 1, 1, 2], [2, 0, 2, 1]])
sv = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
sp = torch.sparse_coo_tensor(ii, sv, (3, 3))
dn = torch.from_numpy(rng.standard_normal((3, 2))).requires_grad_()
torch.mm(sp, dn).sum().backward()
# ember: to_sparse_csr / sparse_csr_tensor are unsupported (COO only; docs/sparse.md)
print("scatter", " ".join(f(r.detach()) for r in red), f(val.grad), f(torch.sparse.sum(sp, dim=1).to_dense()),
      sp._nnz(), f(sp.t().to_dense()), f(torch.sparse.softmax(sp, 1).to_dense()), f(dn.grad),
      f(sp.to_dense().to_sparse().coalesce().indices()))
lg = torch.from_numpy(rng.standard_normal((4, 3))).requires_grad_()
pp = torch.from_numpy(rng.standard_normal((4, 3)))
yy = torch.tensor([0, 2, 1, -100])
w3 = torch.tensor([1.0, 2.0, 0.5], dtype=torch.float64)
ce = F.cross_entropy(lg[:3], yy[:3], reduction="none")
focal = ((1 - torch.exp(-ce)) ** 2 * ce).mean()
cls = [F.nll_loss(F.log_softmax(lg, 1), yy, weight=w3, ignore_index=-100),
       F.cross_entropy(lg, yy, weight=w3, label_smoothing=0.2), F.cross_entropy(lg, F.softmax(pp, 1)),
       F.binary_cross_entropy(torch.sigmoid(lg), (pp > 0).double(), weight=w3),
       F.triplet_margin_loss(lg, pp, -pp, swap=True), focal,
       F.ctc_loss(F.log_softmax(torch.from_numpy(rng.standard_normal((6, 2, 4))), 2),
                  torch.tensor([[1, 2], [3, 3]]), torch.tensor([6, 5]), torch.tensor([2, 2]))]
sum(cls).backward()
print("cls", f(torch.stack([c.detach() for c in cls])), f(lg.grad.sum(1)))
