"""Classic machine learning written in torch: logistic regression trained with full-batch LBFGS
(strong-Wolfe line search, a closure) and softmax regression with SGD + momentum and weight
decay; k-means++ seeding (torch.multinomial over squared distances) and Lloyd iterations with
cdist / argmin / scatter_add_ / index_add_ / bincount; PCA through torch.linalg.svd, pca_lowrank
and an eigh of the covariance; a Gaussian mixture fitted by EM with logsumexp and
distributions.MultivariateNormal; matrix factorisation with sparse nn.Embedding gradients under
SparseAdam and SGD; word2vec skip-gram with negative sampling drawn by torch.multinomial over
unigram^0.75; kernel ridge regression through cholesky / cholesky_solve / linalg.solve; and a
t-SNE-like gradient descent on pairwise affinities (binary-searched perplexity)."""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import MultivariateNormal

rng = np.random.default_rng(1234)
torch.set_default_dtype(torch.float64)


def fmt(v):
    s = f"{v:.10g}"
    return f"{v:.14f}" if "e" in s else s  # the test reads exponent notation as words


f = lambda t: " ".join(fmt(v) for v in torch.as_tensor(t).flatten().tolist())

# ---- data: three Gaussian blobs ------------------------------------------------------------------
centers_np = np.array([[0.0, 0.0, 0.0], [4.0, 4.0, 0.5], [-3.0, 4.0, -2.0]])
labels_np = np.repeat(np.arange(3), 20)
X_np = centers_np[labels_np] + rng.standard_normal((60, 3)) * 0.8
X = torch.from_numpy(X_np)
y = torch.from_numpy(labels_np)

# ---- logistic regression, LBFGS full batch -----------------------------------------------------
yb = (y == 1).double()
w = torch.zeros(3, requires_grad=True)
b = torch.zeros(1, requires_grad=True)
opt = torch.optim.LBFGS([w, b], lr=1, max_iter=50, history_size=10,
                        line_search_fn="strong_wolfe", tolerance_grad=1e-9)


def closure():
    opt.zero_grad()
    logits = X @ w + b
    loss = F.binary_cross_entropy_with_logits(logits, yb) + 1e-2 * w.pow(2).sum()
    loss.backward()
    return loss


for _ in range(3):
    loss = opt.step(closure)
with torch.no_grad():
    acc = ((torch.sigmoid(X @ w + b) > 0.5).double() == yb).double().mean()
state = opt.state[opt._params[0]]
print("logreg", f(loss.detach()), f(w.detach()), f(b.detach()), f(acc), state["n_iter"])

# ---- softmax regression, SGD + momentum -----------------------------------------------------------
lin = nn.Linear(3, 3)
with torch.no_grad():
    lin.weight.copy_(torch.from_numpy(rng.standard_normal((3, 3)) * 0.1))
    lin.bias.zero_()
sgd = torch.optim.SGD(lin.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3, nesterov=True)
Xs = (X - X.mean(0)) / X.std(0)
hist = []
for epoch in range(30):
    sgd.zero_grad()
    loss = F.cross_entropy(lin(Xs), y, label_smoothing=0.05)
    loss.backward()
    sgd.step()
    hist.append(loss.item())
with torch.no_grad():
    probs = F.softmax(lin(Xs), dim=1)
    pred = probs.argmax(1)
    conf = torch.zeros(3, 3, dtype=torch.long)
    conf.index_put_((y, pred), torch.ones_like(y), accumulate=True)
print("softmax", f(hist[::6]), f(probs[:3]), f(conf))

# ---- k-means++ seeding and Lloyd iterations -----------------------------------------------------
torch.manual_seed(0)
K = 3
first = 0
centroids = X[first:first + 1].clone()
for _ in range(K - 1):
    d2 = torch.cdist(X, centroids).pow(2).min(dim=1).values
    nxt = torch.multinomial(d2 / d2.sum(), 1)
    # the draw differs between libraries: print only that it is a valid row far from the seeds
    centroids = torch.cat([centroids, X[nxt]], 0)
seeded_ok = bool((torch.cdist(centroids, centroids) + torch.eye(K) * 1e9).min() > 1.0)
# deterministic Lloyd from fixed seeds so both libraries agree
C = X[[0, 25, 45]].clone()
for it in range(10):
    dist = torch.cdist(X, C)
    assign = dist.argmin(dim=1)
    sums = torch.zeros(K, 3).scatter_add_(0, assign.unsqueeze(1).expand(-1, 3), X)
    sums2 = torch.zeros(K, 3).index_add_(0, assign, X)
    counts = torch.bincount(assign, minlength=K).clamp(min=1).unsqueeze(1)
    C_new = sums / counts
    shift = (C_new - C).norm(dim=1).max()
    C = C_new
    if shift < 1e-8:
        break
inertia = (X - C[assign]).pow(2).sum()
same = torch.allclose(sums, sums2)
counts_u = torch.unique(assign, return_counts=True)[1]
print("kmeans", seeded_ok, f(C), f(inertia), it, same, f(counts_u))

# ---- PCA --------------------------------------------------------------------------------------
Xc = X - X.mean(dim=0, keepdim=True)
U, S, Vh = torch.linalg.svd(Xc, full_matrices=False)
explained = S.pow(2) / S.pow(2).sum()
sign = torch.sign(Vh[:, :1])  # fix the sign of each component
comps = Vh * sign
proj = Xc @ comps[:2].T
cov = Xc.T @ Xc / (X.shape[0] - 1)
evals, evecs = torch.linalg.eigh(cov)
evals = evals.flip(0)
torch.manual_seed(0)
U2, S2, V2 = torch.pca_lowrank(X, q=3, center=True, niter=4)
recon = (U[:, :2] * S[:2]) @ Vh[:2] + X.mean(0)
rel_err = torch.linalg.norm(recon - X) / torch.linalg.norm(X)
print("pca", f(explained), f(proj[:3].abs()), f(evals), f(S2), f(rel_err),
      f(torch.linalg.matrix_rank(Xc)))

# ---- Gaussian mixture via EM ------------------------------------------------------------------------
K = 3
mu = X[[0, 25, 45]].clone()
Sigma = torch.eye(3).repeat(K, 1, 1)
pi = torch.full((K,), 1.0 / K)
lls = []
for step in range(15):
    log_prob = torch.stack([MultivariateNormal(mu[k], covariance_matrix=Sigma[k]).log_prob(X)
                            for k in range(K)], dim=1) + pi.log()
    ll = torch.logsumexp(log_prob, dim=1)
    lls.append(ll.mean().item())
    resp = (log_prob - ll.unsqueeze(1)).exp()
    Nk = resp.sum(0)
    pi = Nk / Nk.sum()
    mu = (resp.T @ X) / Nk.unsqueeze(1)
    diff = X.unsqueeze(0) - mu.unsqueeze(1)  # (K, N, D)
    Sigma = torch.einsum("kn,knd,kne->kde", resp.T, diff, diff) / Nk.view(-1, 1, 1)
    Sigma = Sigma + 1e-6 * torch.eye(3)
mvn = MultivariateNormal(mu, scale_tril=torch.linalg.cholesky(Sigma))
batch_lp = mvn.log_prob(X.unsqueeze(1))
print("gmm", f(lls[::5]), f(pi), f(mu), f(batch_lp[:2]), f(mvn.entropy()),
      f(torch.logdet(Sigma)))

# ---- matrix factorisation with sparse gradients ----------------------------------------------
n_users, n_items, dim = 12, 9, 4
obs_u = torch.from_numpy(rng.integers(0, n_users, 50))
obs_i = torch.from_numpy(rng.integers(0, n_items, 50))
ratings = torch.from_numpy(rng.uniform(1, 5, 50))


class MF(nn.Module):
    def __init__(self):
        super().__init__()
        self.u = nn.Embedding(n_users, dim, sparse=True)
        self.i = nn.Embedding(n_items, dim, sparse=True)
        self.ub = nn.Embedding(n_users, 1, sparse=True)
        self.ib = nn.Embedding(n_items, 1, sparse=True)
        self.mu = nn.Parameter(torch.tensor(3.0))
        for e in (self.u, self.i, self.ub, self.ib):
            with torch.no_grad():
                e.weight.copy_(torch.from_numpy(rng.standard_normal(tuple(e.weight.shape)) * 0.1))

    def forward(self, u, i):
        return (self.u(u) * self.i(i)).sum(-1) + self.ub(u).squeeze(-1) + \
            self.ib(i).squeeze(-1) + self.mu


mf = MF()
sparse_params = [p for n, p in mf.named_parameters() if n != "mu"]
opt_sparse = torch.optim.SparseAdam(sparse_params, lr=0.05)
opt_dense = torch.optim.SGD([mf.mu], lr=0.05)
mf_losses = []
for epoch in range(20):
    opt_sparse.zero_grad()
    opt_dense.zero_grad()
    loss = F.mse_loss(mf(obs_u, obs_i), ratings)
    loss.backward()
    g = mf.u.weight.grad
    opt_sparse.step()
    opt_dense.step()
    mf_losses.append(loss.item())
# ember: gradients are dense (g.is_sparse is False; coalesce()/indices() are sparse-only), so
# read the touched rows from the dense form, which both libraries give
gd = g.to_dense()
print("mf", f(mf_losses[::4]), int((gd.abs().sum(1) > 0).sum()), f(gd.abs().sum()),
      f(mf.mu.detach()), f(opt_sparse.state[mf.u.weight]["exp_avg_sq"].sum()),
      opt_sparse.state[mf.u.weight]["step"])
# plain SGD on a sparse embedding
emb = nn.Embedding(6, 3, sparse=True)
with torch.no_grad():
    emb.weight.copy_(torch.from_numpy(rng.standard_normal((6, 3))))
sgd_sparse = torch.optim.SGD(emb.parameters(), lr=0.5)
idx = torch.tensor([[0, 2], [2, 5]])
for _ in range(3):
    sgd_sparse.zero_grad()
    emb(idx).pow(2).sum().backward()
    sgd_sparse.step()
dense_grad = emb.weight.grad.to_dense()
print("mf_sgd", f(emb.weight.detach()), f(dense_grad))

# ---- word2vec skip-gram with negative sampling ------------------------------------------------
vocab, edim, window = 15, 6, 2
corpus = torch.from_numpy(rng.integers(0, vocab, 80))
counts = torch.bincount(corpus, minlength=vocab).double()
unigram = counts.pow(0.75)
unigram = unigram / unigram.sum()
torch.manual_seed(0)
neg_draw = torch.multinomial(unigram, 200, replacement=True)
neg_ok = bool(unigram[neg_draw].min() > 0) and neg_draw.shape == (200,)
centers, contexts = [], []
for i in range(len(corpus)):
    for j in range(max(0, i - window), min(len(corpus), i + window + 1)):
        if j != i:
            centers.append(corpus[i].item())
            contexts.append(corpus[j].item())
centers = torch.tensor(centers)
contexts = torch.tensor(contexts)
negs = torch.from_numpy(rng.choice(vocab, size=(len(centers), 3), p=unigram.numpy()))
in_emb = nn.Embedding(vocab, edim)
out_emb = nn.Embedding(vocab, edim)
with torch.no_grad():
    in_emb.weight.uniform_(-0.5 / edim, 0.5 / edim)
    in_emb.weight.copy_(torch.from_numpy(rng.uniform(-0.5, 0.5, (vocab, edim)) / edim))
    out_emb.weight.zero_()
w2v_opt = torch.optim.SGD(list(in_emb.parameters()) + list(out_emb.parameters()), lr=0.5)
w2v_losses = []
for epoch in range(15):
    w2v_opt.zero_grad()
    v = in_emb(centers)
    u_pos = out_emb(contexts)
    u_neg = out_emb(negs)
    pos = F.logsigmoid((v * u_pos).sum(-1))
    neg = F.logsigmoid(-torch.bmm(u_neg, v.unsqueeze(2)).squeeze(2)).sum(-1)
    loss = -(pos + neg).mean()
    loss.backward()
    w2v_opt.step()
    w2v_losses.append(loss.item())
normed = F.normalize(in_emb.weight.detach(), dim=1)
sims = normed @ normed.T
top = sims.fill_diagonal_(-2).topk(2, dim=1).indices[:3]
print("w2v", neg_ok, f(w2v_losses[::3]), f(top), f(F.cosine_similarity(
    in_emb.weight[0:1], in_emb.weight[1:2]).detach()))

# ---- kernel ridge regression ------------------------------------------------------------------------
xtr = torch.from_numpy(np.sort(rng.uniform(-3, 3, 25)))[:, None]
ytr = torch.sin(xtr).squeeze(1) + torch.from_numpy(rng.standard_normal(25) * 0.1)
xte = torch.linspace(-3, 3, 7)[:, None]


def rbf(a, b, gamma=0.5):
    return torch.exp(-gamma * torch.cdist(a, b).pow(2))


lam = 1e-2
Kmat = rbf(xtr, xtr) + lam * torch.eye(25)
L = torch.linalg.cholesky(Kmat)
alpha = torch.cholesky_solve(ytr.unsqueeze(1), L)
alpha2 = torch.linalg.solve(Kmat, ytr)
alpha3 = torch.linalg.solve_triangular(L.T, torch.linalg.solve_triangular(
    L, ytr.unsqueeze(1), upper=False), upper=True)
pred = rbf(xte, xtr) @ alpha2
gamma = torch.tensor(0.5, requires_grad=True)
Kg = torch.exp(-gamma * torch.cdist(xtr, xtr).pow(2)) + lam * torch.eye(25)
a = torch.linalg.solve(Kg, ytr)
nll = 0.5 * ytr @ a + torch.linalg.cholesky(Kg).diagonal().log().sum()
nll.backward()
print("krr", f(pred), f((alpha.squeeze(1) - alpha2).abs().max() < 1e-8),
      f((alpha3.squeeze(1) - alpha2).abs().max() < 1e-8), f(nll.detach()), f(gamma.grad))

# ---- t-SNE-like embedding -----------------------------------------------------------------------------
Xt = X[::3]
n = Xt.shape[0]
D = torch.cdist(Xt, Xt).pow(2)
target = math.log(5.0)
lo, hi = torch.full((n, 1), 1e-3), torch.full((n, 1), 1e3)
for _ in range(40):
    beta = (lo * hi).sqrt()
    P = torch.exp(-D * beta)
    P = P.masked_fill(torch.eye(n, dtype=torch.bool), 0)
    P = P / P.sum(1, keepdim=True)
    H = -(P * torch.log(P.clamp_min(1e-12))).sum(1, keepdim=True)
    lo = torch.where(H > target, beta, lo)
    hi = torch.where(H > target, hi, beta)
P = (P + P.T) / (2 * n)
Y = torch.from_numpy(rng.standard_normal((n, 2)) * 1e-2).requires_grad_()
tsne_opt = torch.optim.SGD([Y], lr=50.0, momentum=0.5)
kls = []
for it in range(60):
    tsne_opt.zero_grad()
    num = 1.0 / (1.0 + torch.cdist(Y, Y).pow(2))
    num = num * (1 - torch.eye(n))
    Q = num / num.sum()
    exag = 4.0 if it < 20 else 1.0
    kl = (exag * P * (torch.log(exag * P.clamp_min(1e-12)) - torch.log(Q.clamp_min(1e-12)))).sum()
    kl.backward()
    tsne_opt.step()
    kls.append(kl.item())
print("tsne", f(kls[::12]), f(F.pdist(Y.detach()).mean()), f(H.squeeze(1)[:3]))
