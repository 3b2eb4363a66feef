"""Numerics-heavy research idioms, part two: entropic optimal transport (log-domain Sinkhorn
with logsumexp, a Sinkhorn divergence with gradients to the points), Gumbel-softmax and
straight-through estimators, a VQ-VAE codebook (cdist, argmin, F.embedding, EMA updates of
buffers in place under no_grad, commitment loss, perplexity), a Kalman filter with a
differentiable log-likelihood, differentiable sorting and ranking (NeuralSort, soft ranks,
sort/topk gradients), torch.autograd.functional (jacobian, hessian, vjp, jvp, hvp, vhp) and
torch.func (grad with has_aux, argnums, vmap over ensembles with stack_module_state,
jacrev/jacfwd, functional_call with buffers), and torch.distributions with rsample and log_prob
inside losses."""
import copy
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import (functional_call, grad, grad_and_value, jacfwd, jacrev, linearize,
                        stack_module_state, vmap)

rng = np.random.default_rng(11)
torch.set_default_dtype(torch.float64)
f = lambda t: " ".join(f"{v:.10g}" for v in torch.as_tensor(t, dtype=torch.float64).flatten().tolist())
T = lambda a: torch.from_numpy(np.asarray(a, dtype=np.float64))


def fill_(module, scale=0.4):
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(T(rng.standard_normal(tuple(p.shape)) * scale))
    return module


# ---- entropic optimal transport ---------------------------------------------------------------
def sinkhorn_log(a, b, C, eps, n_iter=60):
    log_a, log_b = a.log(), b.log()
    f_pot = torch.zeros_like(a)
    g_pot = torch.zeros_like(b)
    for _ in range(n_iter):
        f_pot = -eps * torch.logsumexp((g_pot[None, :] - C) / eps + log_b[None, :], dim=1)
        g_pot = -eps * torch.logsumexp((f_pot[:, None] - C) / eps + log_a[:, None], dim=0)
    log_P = (f_pot[:, None] + g_pot[None, :] - C) / eps + log_a[:, None] + log_b[None, :]
    return log_P.exp(), f_pot, g_pot


def batched_sinkhorn(x, y, eps=0.1, n_iter=40):
    C = torch.cdist(x, y, p=2) ** 2
    B, n, m = C.shape
    log_mu = torch.full((B, n), -math.log(n))
    log_nu = torch.full((B, m), -math.log(m))
    u, v = torch.zeros(B, n), torch.zeros(B, m)
    for _ in range(n_iter):
        u = log_mu - torch.logsumexp(-C / eps + v.unsqueeze(1), dim=2)
        v = log_nu - torch.logsumexp(-C / eps + u.unsqueeze(2), dim=1)
    pi = torch.exp(-C / eps + u.unsqueeze(2) + v.unsqueeze(1))
    return (pi * C).sum((1, 2)), pi


xs = T(rng.standard_normal((7, 2))).requires_grad_(True)
ys = T(rng.standard_normal((5, 2)) + 1.0)
a = torch.softmax(T(rng.standard_normal(7)), 0)
b = torch.full((5,), 0.2)
C = torch.cdist(xs, ys).pow(2)
P, fp, gp = sinkhorn_log(a, b, C, eps=0.2)
ot = (P * C).sum()
ot.backward()
xb = T(rng.standard_normal((3, 6, 2))).requires_grad_(True)
yb = T(rng.standard_normal((3, 4, 2)))
cost, pi = batched_sinkhorn(xb, yb)
cost.sum().backward()
cs = torch.cosine_similarity(xb.detach()[:, :, None], yb[:, None], dim=-1)
print("ot", f(ot), f(P.sum(1) - a < 1e-6), f(P.sum(0)), f(fp[:3]), f(xs.grad.sum(0)),
      f(cost), f(pi.sum((1, 2))), f(xb.grad.abs().sum()), f(cs.amax((1, 2))),
      f(torch.logsumexp(torch.tensor([[-1e4, -1e4], [float("-inf"), float("-inf")]]), 1)))

# ---- Gumbel-softmax and straight-through estimators -------------------------------------------
logits = T(rng.standard_normal((6, 5))).requires_grad_(True)
y_soft = F.gumbel_softmax(logits, tau=0.5, hard=False)
y_hard = F.gumbel_softmax(logits, tau=0.5, hard=True)
(y_hard * torch.arange(5.0)).sum().backward()
hard_ok = bool(((y_hard.sum(-1) - 1).abs() < 1e-12).all() and (y_hard.max(-1).values == 1).all())
# with fixed noise, the estimator as papers write it
g_noise = -torch.log(-torch.log(T(rng.uniform(1e-6, 1 - 1e-6, (6, 5)))))
logits2 = logits.detach().clone().requires_grad_(True)
soft = F.softmax((logits2 + g_noise) / 0.7, dim=-1)
index = soft.max(dim=-1, keepdim=True)[1]
hard = torch.zeros_like(soft).scatter_(-1, index, 1.0)
st = hard - soft.detach() + soft
(st * torch.linspace(-1, 1, 5)).sum().backward()
w_b = T(rng.standard_normal(4)).requires_grad_(True)
binar = (torch.sign(w_b) - torch.tanh(w_b)).detach() + torch.tanh(w_b)
rnd = (w_b * 3).round() / 3
ste_round = w_b + (rnd - w_b).detach()
(binar.sum() + (ste_round ** 2).sum()).backward()
relaxed = torch.distributions.RelaxedOneHotCategorical(torch.tensor(0.5), logits=logits.detach()[0])
rb = torch.distributions.RelaxedBernoulli(torch.tensor(0.3), logits=logits.detach()[1])
val = torch.softmax(T(rng.standard_normal(5)), 0)
print("gumbel", hard_ok, f(y_soft.sum(-1)), tuple(y_soft.shape), f(logits.grad.abs().sum() > 0),
      f(st), f(logits2.grad[:2]), f(w_b.grad), f(binar), f(relaxed.log_prob(val)),
      f(rb.log_prob(val.clamp(0.05, 0.95))), f(F.one_hot(index.squeeze(-1), 5).sum(0)))


# ---- VQ-VAE codebook with EMA updates ---------------------------------------------------------
class VectorQuantizerEMA(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, commitment_cost=0.25, decay=0.9,
                 epsilon=1e-5):
        super().__init__()
        self.embedding_dim, self.num_embeddings = embedding_dim, num_embeddings
        self.embedding = nn.Embedding(num_embeddings, embedding_dim)
        self.embedding.weight.data.normal_()
        self.commitment_cost, self.decay, self.epsilon = commitment_cost, decay, epsilon
        self.register_buffer("ema_cluster_size", torch.zeros(num_embeddings))
        self.ema_w = nn.Parameter(torch.Tensor(num_embeddings, embedding_dim))
        self.ema_w.data.normal_()

    def forward(self, inputs):
        inputs = inputs.permute(0, 2, 3, 1).contiguous()
        input_shape = inputs.shape
        flat_input = inputs.view(-1, self.embedding_dim)
        distances = (torch.sum(flat_input ** 2, dim=1, keepdim=True)
                     + torch.sum(self.embedding.weight ** 2, dim=1)
                     - 2 * torch.matmul(flat_input, self.embedding.weight.t()))
        encoding_indices = torch.argmin(distances, dim=1).unsqueeze(1)
        encodings = torch.zeros(encoding_indices.shape[0], self.num_embeddings,
                                device=inputs.device)
        encodings.scatter_(1, encoding_indices, 1)
        quantized = torch.matmul(encodings, self.embedding.weight).view(input_shape)
        if self.training:
            self.ema_cluster_size = self.ema_cluster_size * self.decay + \
                (1 - self.decay) * torch.sum(encodings, 0)
            n = torch.sum(self.ema_cluster_size.data)
            self.ema_cluster_size = ((self.ema_cluster_size + self.epsilon)
                                     / (n + self.num_embeddings * self.epsilon) * n)
            dw = torch.matmul(encodings.t(), flat_input)
            self.ema_w = nn.Parameter(self.ema_w * self.decay + (1 - self.decay) * dw)
            self.embedding.weight = nn.Parameter(self.ema_w / self.ema_cluster_size.unsqueeze(1))
        e_latent_loss = F.mse_loss(quantized.detach(), inputs)
        loss = self.commitment_cost * e_latent_loss
        quantized = inputs + (quantized - inputs).detach()
        avg_probs = torch.mean(encodings, dim=0)
        perplexity = torch.exp(-torch.sum(avg_probs * torch.log(avg_probs + 1e-10)))
        return loss, quantized.permute(0, 3, 1, 2).contiguous(), perplexity, encodings


class Codebook(nn.Module):
    """The other common form: cdist + F.embedding, EMA buffers updated in place."""

    def __init__(self, k, d, decay=0.8, beta=0.25):
        super().__init__()
        self.decay, self.beta = decay, beta
        embed = T(rng.standard_normal((k, d)))
        self.register_buffer("embed", embed)
        self.register_buffer("cluster_size", torch.ones(k))
        self.register_buffer("embed_avg", embed.clone())

    def forward(self, z):
        flat = z.reshape(-1, z.shape[-1])
        dist = torch.cdist(flat, self.embed)
        idx = dist.argmin(dim=-1)
        zq = F.embedding(idx, self.embed).view_as(z)
        if self.training:
            with torch.no_grad():
                onehot = F.one_hot(idx, self.embed.shape[0]).type(flat.dtype)
                self.cluster_size.mul_(self.decay).add_(onehot.sum(0), alpha=1 - self.decay)
                embed_sum = onehot.t() @ flat
                self.embed_avg.mul_(self.decay).add_(embed_sum, alpha=1 - self.decay)
                n = self.cluster_size.sum()
                smoothed = (self.cluster_size + 1e-5) / (n + self.embed.shape[0] * 1e-5) * n
                self.embed.copy_(self.embed_avg / smoothed.unsqueeze(1))
        commit = self.beta * F.mse_loss(z, zq.detach())
        zq = z + (zq - z).detach()
        return zq, commit, idx


vq = VectorQuantizerEMA(6, 3)
with torch.no_grad():
    vq.embedding.weight.copy_(T(rng.standard_normal((6, 3))))
    vq.ema_w.copy_(vq.embedding.weight)
enc = fill_(nn.Conv2d(2, 3, 3, padding=1))
dec = fill_(nn.Conv2d(3, 2, 3, padding=1))
cb = Codebook(5, 3)
imgs = T(rng.standard_normal((2, 2, 4, 4)))
opt = torch.optim.Adam(list(enc.parameters()) + list(dec.parameters()), lr=1e-2)
vq_log = []
for step in range(4):
    opt.zero_grad()
    z = enc(imgs)
    vq_loss, zq, perplexity, encodings = vq(z)
    zq2, commit, idx = cb(z.permute(0, 2, 3, 1))
    recon = dec(zq + zq2.permute(0, 3, 1, 2))
    loss = F.mse_loss(recon, imgs) + vq_loss + commit
    loss.backward()
    opt.step()
    vq_log += [loss.item(), perplexity.item()]
vq.eval()
with torch.no_grad():
    _, _, perp_eval, enc_eval = vq(enc(imgs))
print("vq", f(vq_log), f(vq.ema_cluster_size), f(vq.embedding.weight.sum(1)),
      f(cb.cluster_size), f(cb.embed.sum(1)), f(idx.bincount(minlength=5)),
      f(enc.weight.grad.abs().sum()), f(perp_eval), f(enc_eval.sum(0)),
      type(vq.embedding.weight).__name__, vq.ema_w.requires_grad, sorted(dict(cb.named_buffers())))

# ---- Kalman filter with a differentiable log-likelihood -----------------------------------------
dt = 0.1
Fm = torch.tensor([[1.0, dt], [0.0, 1.0]])
Hm = torch.tensor([[1.0, 0.0]])
obs = T(np.cumsum(rng.standard_normal(12)) * 0.3).unsqueeze(-1)
log_q = torch.tensor(-2.0, requires_grad=True)
log_r = torch.tensor(-1.0, requires_grad=True)


def kalman_nll(log_q, log_r):
    Q = log_q.exp() * torch.tensor([[dt ** 3 / 3, dt ** 2 / 2], [dt ** 2 / 2, dt]])
    R = log_r.exp() * torch.eye(1)
    x = torch.zeros(2)
    P = torch.eye(2)
    nll = torch.zeros(())
    means = []
    for y in obs:
        x = Fm @ x
        P = Fm @ P @ Fm.T + Q
        S = Hm @ P @ Hm.T + R
        innov = y - Hm @ x
        nll = nll - torch.distributions.MultivariateNormal(torch.zeros(1), S).log_prob(innov)
        K = torch.linalg.solve(S, Hm @ P).T
        x = x + K @ innov
        I_KH = torch.eye(2) - K @ Hm
        P = I_KH @ P @ I_KH.T + K @ R @ K.T   # Joseph form
        means.append(x)
    return nll, torch.stack(means), P


nll, means, P_last = kalman_nll(log_q, log_r)
nll.backward()
Hk = torch.autograd.functional.hessian(lambda q, r: kalman_nll(q, r)[0], (log_q.detach(), log_r.detach()))
Ls = torch.linalg.cholesky(P_last)
print("kalman", f(nll), f(means[-1]), f(P_last), f(log_q.grad), f(log_r.grad),
      f(torch.stack([torch.stack(list(r)) for r in Hk])), f(torch.cholesky_inverse(Ls)),
      f(torch.linalg.eigvalsh(P_last)))

# ---- differentiable sorting and ranking -------------------------------------------------------
def neural_sort(s, tau):
    s = s.unsqueeze(-1)
    n = s.shape[1]
    one = torch.ones(n, 1)
    A_s = torch.abs(s - s.permute(0, 2, 1))
    B = torch.matmul(A_s, torch.matmul(one, one.t()))
    scaling = (n + 1 - 2 * (torch.arange(n) + 1)).type(torch.float64)
    C = torch.matmul(s, scaling.unsqueeze(0))
    P_max = (C - B).permute(0, 2, 1)
    return F.softmax(P_max / tau, dim=-1)


def soft_rank(x, reg=0.1):
    diff = x.unsqueeze(-1) - x.unsqueeze(-2)
    return torch.sigmoid(diff / reg).sum(-1) + 0.5


scores = T(rng.standard_normal((2, 5))).requires_grad_(True)
P_hat = neural_sort(scores, tau=0.3)
sorted_soft = P_hat @ scores.unsqueeze(-1)
ranks = soft_rank(scores)
target_rank = torch.tensor([[1.0, 2, 3, 4, 5], [5.0, 4, 3, 2, 1]])
spearman = 1 - 6 * ((ranks - target_rank) ** 2).sum(-1) / (5 * (25 - 1))
vals, order = torch.sort(scores, dim=-1, descending=True, stable=True)
topv, topi = torch.topk(scores, 2, dim=-1)
kth = torch.kthvalue(scores, 2, dim=-1).values
loss = sorted_soft.sum() - spearman.sum() + (vals * torch.arange(5.0)).sum() + topv.pow(2).sum() \
    + kth.sum() + torch.msort(scores.T).diff(dim=0).abs().sum()
loss.backward()
ties = torch.tensor([2.0, 1.0, 2.0, 0.5, 1.0])
print("sort", f(P_hat.sum(-1)), f(sorted_soft.squeeze(-1)), f(ranks), f(spearman), f(order),
      f(topi), f(scores.grad), f(torch.argsort(ties, stable=True)),
      f(torch.argsort(ties, descending=True, stable=True)), f(ties.argsort(stable=True).argsort()),
      f(torch.searchsorted(torch.sort(ties).values, torch.tensor([1.0, 1.5]), right=True)))

# ---- torch.autograd.functional ----------------------------------------------------------------
W1 = T(rng.standard_normal((3, 3)))


def vec_fn(x, y):
    return torch.tanh(W1 @ x) * y.sum() + x.pow(2)


def scal_fn(x, y):
    return (torch.sin(x) * y).sum() + (x @ W1 @ y) ** 2 / 10


x0, y0 = T(rng.standard_normal(3)), T(rng.standard_normal(3))
v3 = T(rng.standard_normal(3))
J = torch.autograd.functional.jacobian(vec_fn, (x0, y0))
Jv = torch.autograd.functional.jacobian(vec_fn, (x0, y0), vectorize=True, strategy="reverse-mode")
Jc = torch.autograd.functional.jacobian(lambda x: vec_fn(x, y0), x0, create_graph=True)
H = torch.autograd.functional.hessian(scal_fn, (x0, y0))
_, vjp_o = torch.autograd.functional.vjp(vec_fn, (x0, y0), v3)
_, jvp_o = torch.autograd.functional.jvp(vec_fn, (x0, y0), (v3, v3))
_, hvp_o = torch.autograd.functional.hvp(lambda x: scal_fn(x, y0), x0, v3)
_, vhp_o = torch.autograd.functional.vhp(lambda x: scal_fn(x, y0), x0, v3)
print("autograd_fn", f(J[0]), f(J[1]), f((J[0] - Jv[0]).abs().max() < 1e-12),
      Jc.requires_grad, f(H[0][0]), f(H[0][1]), f(H[1][1]), f(vjp_o[0]), f(vjp_o[1]),
      f(jvp_o), f(hvp_o), f((hvp_o - vhp_o).abs().max() < 1e-12))

# ---- torch.func -------------------------------------------------------------------------------
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(3, 8), nn.Linear(8, 1)
        self.register_buffer("shift", torch.tensor([0.1, -0.2, 0.3]))

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x - self.shift))).squeeze(-1)


net = fill_(Net())
params = {k: v.detach() for k, v in net.named_parameters()}
buffers = {k: v for k, v in net.named_buffers()}
xs = T(rng.standard_normal((6, 3)))
ys = T(rng.standard_normal(6))


def loss_fn(p, x, y):
    pred = functional_call(net, (p, buffers), (x,))
    return F.mse_loss(pred, y), pred


g, aux = grad(loss_fn, has_aux=True)(params, xs, ys)
(gx, gy) = grad(lambda x, y: loss_fn(params, x, y)[0], argnums=(0, 1))(xs, ys)
gv, val = grad_and_value(lambda p: loss_fn(p, xs, ys)[0])(params)
models = [fill_(Net()) for _ in range(3)]
ens_params, ens_buffers = stack_module_state(models)
# ember: no "meta" device (`.to("meta")` raises UnsupportedError; docs/unsupported.md): the
# deep copy serves as the stateless base, its own parameters unused under functional_call
base_model = copy.deepcopy(models[0])


def fmodel(p, b, x):
    return functional_call(base_model, (p, b), (x,))


ens_out = vmap(fmodel, in_dims=(0, 0, None))(ens_params, ens_buffers, xs)
per_model_loss = vmap(lambda p, b: F.mse_loss(fmodel(p, b, xs), ys))(ens_params, ens_buffers)
per_ex = vmap(grad(lambda p, x, y: loss_fn(p, x.unsqueeze(0), y.unsqueeze(0))[0]),
              in_dims=(None, 0, 0))(params, xs, ys)
jr = jacrev(lambda x: net(x))(xs[:2])
jf = jacfwd(lambda x: torch.sin(x) * x.prod())(xs[0])
jr2 = jacrev(lambda a, b: (a * b).sum(-1), argnums=1)(xs[0], xs[1])
lin_out, jvp_fn = linearize(lambda x: net(x), xs)
lin = torch.stack([jvp_fn(torch.eye(3)[k].expand(6, 3)) for k in range(3)])
print("func", f(g["fc1.weight"].sum()), f(aux[:3]), f(gx.sum(0)), f(gy), f(val),
      f((gv["fc2.bias"] - g["fc2.bias"]).abs() < 1e-12), f(ens_out), f(per_model_loss),
      f(per_ex["fc2.weight"].sum(0)), tuple(ens_params["fc1.weight"].shape), f(jr.sum((1, 2))),
      f(jf), f(jr2), f(torch.stack([m(xs) for m in models]) - ens_out < 1e-12),
      f(lin.sum(0)), f((lin_out - net(xs)).abs().max() < 1e-12))

# ---- distributions with rsample / log_prob in losses ------------------------------------------
D = torch.distributions
loc = T(rng.standard_normal(4)).requires_grad_(True)
raw_scale = T(rng.standard_normal(4)).requires_grad_(True)
conc = T(rng.uniform(0.5, 2.0, 4)).requires_grad_(True)
scale = F.softplus(raw_scale)
q = D.Normal(loc, scale)
z = q.rsample((50,))
eps = (z - loc) / scale
prior = D.Normal(torch.zeros(4), torch.ones(4))
elbo_kl = D.kl_divergence(q, prior).sum()
mc_kl = (q.log_prob(z) - prior.log_prob(z)).sum(-1).mean()
pts = T(rng.uniform(0.1, 0.9, (3, 4)))
dists = {
    "beta": D.Beta(conc, conc.flip(0)), "gamma": D.Gamma(conc, 2.0 * conc.flip(0)),
    "dirichlet": D.Dirichlet(conc), "lognormal": D.LogNormal(loc, scale),
    "laplace": D.Laplace(loc, scale), "studentt": D.StudentT(conc + 1, loc, scale),
    "kumaraswamy": D.Kumaraswamy(conc, conc + 0.5), "vonmises": D.VonMises(loc, conc),
    "cb": D.ContinuousBernoulli(logits=loc), "logitnormal": D.TransformedDistribution(
        D.Normal(loc, scale), [D.transforms.SigmoidTransform()]),
    "affine": D.TransformedDistribution(D.Normal(loc, scale), [
        D.transforms.AffineTransform(1.0, 2.0), D.transforms.ExpTransform()]),
    "tanh": D.TransformedDistribution(D.Normal(loc, scale), [D.transforms.TanhTransform(cache_size=1)]),
}
terms = []
for name, d in dists.items():
    x = pts / pts.sum(-1, keepdim=True) if name == "dirichlet" else pts
    terms.append(d.log_prob(x).sum())
ent = D.Beta(conc, conc.flip(0)).entropy().sum() + D.Gamma(conc, 1.0).entropy().sum() \
    + D.Dirichlet(conc).entropy() + D.StudentT(conc + 1).entropy().sum()
mix = D.MixtureSameFamily(D.Categorical(logits=loc), D.Normal(loc, scale))
mix_lp = mix.log_prob(pts[0]).sum()
total = elbo_kl + sum(terms) + ent + mix_lp
total.backward()
loc2, raw2 = loc.detach().clone().requires_grad_(True), raw_scale.detach().clone().requires_grad_(True)
zc = D.Normal(loc2, F.softplus(raw2)).rsample((7,))
zc.sum().backward()
eps_c = (zc.detach() - loc2.detach()) / F.softplus(raw2.detach())
rsample_ok = bool(torch.allclose(loc2.grad, torch.full((4,), 7.0))
                  and torch.allclose(raw2.grad, eps_c.sum(0) * torch.sigmoid(raw2.detach())))
print("dists", f(elbo_kl), f(torch.stack(terms)), f(ent), f(mix_lp), f(loc.grad),
      f(raw_scale.grad), f(conc.grad), rsample_ok, tuple(z.shape),
      D.Normal(loc, scale).has_rsample, D.Gamma(conc, 1.0).has_rsample,
      D.Categorical(logits=loc).has_rsample, f(D.kl_divergence(D.Beta(conc, conc), D.Beta(conc + 1, conc)).detach()),
      f(D.kl_divergence(D.Dirichlet(conc), D.Dirichlet(conc + 1)).detach()),
      f(D.kl_divergence(D.Gamma(conc, 1.0), D.Gamma(conc, 2.0)).detach()),
      f(D.Independent(D.Normal(loc, scale), 1).log_prob(pts).detach()),
      f(torch.isfinite(mc_kl)))
