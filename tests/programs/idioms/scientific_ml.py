"""Scientific-ML idioms: a PINN for a 1-D Poisson problem (inputs requiring grad, autograd.grad
with create_graph for first and second derivatives, Adam then LBFGS with strong_wolfe), a neural
ODE with a hand-written RK4 integrator, torch.func (grad, vmap, jacrev, jacfwd, hessian,
functional_call) against explicit autograd, torch.linalg with gradients in float64,
MultivariateNormal(scale_tril) and Gaussian-process regression with cholesky/cholesky_solve."""
import math

import numpy as np
import torch
import torch.nn as nn
from torch.func import functional_call, grad, hessian, jacfwd, jacrev, vmap

rng = np.random.default_rng(21)
torch.set_default_dtype(torch.float64)
f = lambda t: " ".join(f"{v:.10g}" for v in torch.as_tensor(t).flatten().tolist())


def init_(m, scale=0.5):
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.from_numpy(rng.standard_normal(tuple(p.shape)) * scale))
    return m


# ---- PINN: u''(x) = -pi^2 sin(pi x), u(0)=u(1)=0 -------------------------------------------
pinn = init_(nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(),
                           nn.Linear(16, 1)))
xc = torch.from_numpy(np.linspace(0.0, 1.0, 24)[:, None]).requires_grad_(True)
xb = torch.tensor([[0.0], [1.0]])


def pinn_loss():
    u = pinn(xc)
    du, = torch.autograd.grad(u, xc, grad_outputs=torch.ones_like(u), create_graph=True)
    d2u, = torch.autograd.grad(du.sum(), xc, create_graph=True)
    res = d2u + math.pi ** 2 * torch.sin(math.pi * xc)
    return res.pow(2).mean() + 10.0 * pinn(xb).pow(2).mean()


opt = torch.optim.Adam(pinn.parameters(), lr=1e-2)
adam_losses = []
for step in range(30):
    opt.zero_grad()
    loss = pinn_loss()
    loss.backward()
    opt.step()
    adam_losses.append(loss.item())
lbfgs = torch.optim.LBFGS(pinn.parameters(), lr=1.0, max_iter=12, history_size=10,
                          line_search_fn="strong_wolfe")


def closure():
    lbfgs.zero_grad()
    loss = pinn_loss()
    loss.backward()
    return loss


# (more L-BFGS iterations amplify last-bit rounding differences chaotically: kept short)
lbfgs_losses = [lbfgs.step(closure).item() for _ in range(2)]
lbfgs_losses.append(pinn_loss().item())
st = lbfgs.state[lbfgs._params[0]]
with torch.no_grad():
    xt = torch.linspace(0, 1, 5).unsqueeze(1)
    err = (pinn(xt) - torch.sin(math.pi * xt)).abs().max()
print("pinn", f(adam_losses[::6]), f(lbfgs_losses), f(err), st["n_iter"], st["func_evals"])

# ---- neural ODE with RK4 ----------------------------------------------------------------------
class ODEFunc(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(3, 12), nn.Softplus(), nn.Linear(12, 2))

    def forward(self, t, y):
        tt = t.expand(y.shape[0], 1)
        return self.net(torch.cat([y, tt], dim=-1))


def rk4(func, y0, ts):
    ys = [y0]
    y = y0
    for t0, t1 in zip(ts[:-1], ts[1:]):
        h = t1 - t0
        k1 = func(t0, y)
        k2 = func(t0 + h / 2, y + h / 2 * k1)
        k3 = func(t0 + h / 2, y + h / 2 * k2)
        k4 = func(t1, y + h * k3)
        y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        ys.append(y)
    return torch.stack(ys)


ode = init_(ODEFunc(), 0.3)
ts = torch.linspace(0.0, 1.0, 9)
y0 = torch.from_numpy(rng.standard_normal((4, 2)))
theta = ts[:, None, None]
target = torch.stack([y0[:, 0] * torch.cos(ts[:, None]) - y0[:, 1] * torch.sin(ts[:, None]),
                      y0[:, 0] * torch.sin(ts[:, None]) + y0[:, 1] * torch.cos(ts[:, None])], -1)
opt = torch.optim.AdamW(ode.parameters(), lr=5e-3, weight_decay=1e-3)
ode_losses = []
for _ in range(8):
    opt.zero_grad()
    traj = rk4(ode, y0, ts)
    loss = nn.functional.mse_loss(traj, target)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(ode.parameters(), 1.0)
    opt.step()
    ode_losses.append(loss.item())
print("node", f(ode_losses), f(traj[-1, 0]), tuple(traj.shape))

# ---- torch.func ------------------------------------------------------------------------------
mlp = init_(nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1)))
params = {k: v.detach() for k, v in mlp.named_parameters()}
xs = torch.from_numpy(rng.standard_normal((5, 3)))


def scalar_f(x):
    return functional_call(mlp, params, (x.unsqueeze(0),)).squeeze()


g_vmap = vmap(grad(scalar_f))(xs)
xs_req = xs.clone().requires_grad_(True)
g_auto, = torch.autograd.grad(mlp(xs_req).sum(), xs_req)
jr = jacrev(scalar_f)(xs[0])
jf = jacfwd(scalar_f)(xs[0])
H = hessian(scalar_f)(xs[0])
H_auto = torch.autograd.functional.hessian(lambda x: mlp(x.unsqueeze(0)).squeeze(), xs[0])
J_vec = jacrev(lambda x: torch.sin(x) * x.sum())(xs[1])


def loss_p(p, x, y):
    return ((functional_call(mlp, p, (x,)).squeeze(-1) - y) ** 2).mean()


ys = torch.from_numpy(rng.standard_normal(5))
gp = grad(loss_p)(params, xs, ys)
per_ex = vmap(grad(loss_p), in_dims=(None, 0, 0))(params, xs.unsqueeze(1), ys.unsqueeze(1))
print("func", f((g_vmap - g_auto).abs().max() < 1e-12), f(g_vmap[0]), f(jr), f((jr - jf).abs().max() < 1e-12),
      f(H.diagonal()), f((H - H_auto).abs().max() < 1e-12), f(J_vec.sum(0)),
      f(gp["2.weight"]), f(torch.allclose(per_ex["0.bias"].mean(0), gp["0.bias"])), tuple(per_ex["0.weight"].shape))

# ---- torch.linalg with gradients -------------------------------------------------------------
A0 = rng.standard_normal((4, 4))
A = torch.from_numpy(A0 @ A0.T + 4 * np.eye(4)).requires_grad_(True)
B = torch.from_numpy(rng.standard_normal((4, 2))).requires_grad_(True)
M = torch.from_numpy(rng.standard_normal((5, 3))).requires_grad_(True)
X = torch.linalg.solve(A, B)
lst = torch.linalg.lstsq(M, torch.from_numpy(rng.standard_normal((5, 2)))).solution
evals, evecs = torch.linalg.eigh(A)
U, S, Vh = torch.linalg.svd(M, full_matrices=False)
Q, R = torch.linalg.qr(M)
L = torch.linalg.cholesky(A)
Ainv = torch.linalg.inv(A)
det = torch.linalg.det(A)
sign, logabs = torch.linalg.slogdet(A)
E = torch.linalg.matrix_exp(0.1 * A)
P = torch.linalg.pinv(M)
norms = torch.stack([torch.linalg.norm(M), torch.linalg.norm(M, ord="fro"),
                     torch.linalg.norm(M, ord="nuc"), torch.linalg.matrix_norm(M, ord=2),
                     torch.linalg.vector_norm(M, ord=3), torch.linalg.norm(M, dim=1).sum(),
                     torch.linalg.vector_norm(M, ord=float("inf")), torch.linalg.matrix_norm(M, ord=1)])
total = (X.sum() + lst.pow(2).sum() + evals.sum() + (evecs[:, -1] ** 2).sum() + S.sum()
         + R.diagonal().abs().sum() + L.diagonal().log().sum() + Ainv.trace() + det.log()
         + logabs + E.sum() + P.abs().sum() + norms.sum() + (U @ torch.diag(S) @ Vh - M).abs().sum())
total.backward()
v0 = xs[2].clone()
_, jvp_out = torch.func.jvp(scalar_f, (xs[0],), (v0,))
_, vjp_fn = torch.func.vjp(lambda x: torch.tanh(x) * 2, xs[0])
Jaf = torch.autograd.functional.jacobian(lambda x: x.pow(3).cumsum(0), xs[0])
_, vhp_out = torch.autograd.functional.vhp(lambda x: (x.sin() * x).sum(), xs[0], v0)
_, hvp_out = torch.func.jvp(grad(scalar_f), (xs[0],), (v0,))
print("func2", f(jvp_out), f((jvp_out - jr @ v0).abs() < 1e-12), f(vjp_fn(v0)[0]), f(Jaf),
      f(vhp_out), f(hvp_out), f((hvp_out - H @ v0).abs().max() < 1e-12))

C = torch.from_numpy(rng.standard_normal((4, 4))).requires_grad_(True)
LU, piv = torch.linalg.lu_factor(C)
sol = torch.linalg.lu_solve(LU, piv, B.detach())
Pm, Lm, Um = torch.linalg.lu(C)
sol_ex, info = torch.linalg.solve_ex(C, B.detach())
Lc, info_c = torch.linalg.cholesky_ex(A.detach())
tri = torch.linalg.solve_triangular(Lc, B.detach().T, upper=False, left=False)
ev_c = torch.linalg.eigvals(C.detach())
out2 = (torch.linalg.svdvals(C).sum() + torch.linalg.eigvalsh(A.detach() + C @ C.T).sum()
        + torch.linalg.multi_dot([C, C.T, C]).trace() + torch.linalg.matrix_power(C, 3).sum()
        + sol.sum() + (Pm @ Lm @ Um - C).abs().sum() + torch.linalg.vecdot(C, C).sum()
        + torch.linalg.cross(C[:, :3], C[:, 1:]).sum() + torch.logdet(A.detach() + C @ C.T))
out2.backward()
print("linalg2", f(sol), f((sol - sol_ex).abs().max() < 1e-10), int(info), int(info_c), f(tri),
      f(ev_c.abs().sort().values), f(out2), f(C.grad.sum()), f(C.grad.abs().max()),
      f(torch.linalg.vander(torch.tensor([1.0, 2.0, 3.0]))), f(torch.linalg.diagonal(C.detach())))
print("linalg", f(X[0]), f(evals), f(S), f(logabs), f(sign), f(det), f(E.trace()), f(norms),
      f(A.grad.sum()), f(B.grad.sum()), f(M.grad.abs().sum()), f(torch.linalg.cond(A)),
      f(torch.linalg.matrix_rank(M)))

# ---- MultivariateNormal + GP regression ------------------------------------------------------
loc = torch.from_numpy(rng.standard_normal(3))
Lt = torch.tril(torch.from_numpy(rng.standard_normal((3, 3)) * 0.3)) + 1.5 * torch.eye(3)
mvn = torch.distributions.MultivariateNormal(loc, scale_tril=Lt)
pts = torch.from_numpy(rng.standard_normal((4, 3)))
mvn2 = torch.distributions.MultivariateNormal(torch.zeros(3), covariance_matrix=Lt @ Lt.T)
W, Dg = torch.from_numpy(rng.standard_normal((3, 2)) * 0.5), torch.from_numpy(rng.random(3) + 0.5)
lowrank = torch.distributions.LowRankMultivariateNormal(loc, cov_factor=W, cov_diag=Dg)
indep = torch.distributions.Independent(torch.distributions.Normal(loc, Dg), 1)
print("mvn2", f(lowrank.log_prob(pts)), f(lowrank.entropy()), f(lowrank.covariance_matrix.sum()),
      f(indep.log_prob(pts)), f(indep.entropy()), tuple(indep.event_shape))
print("mvn", f(mvn.log_prob(pts)), f(mvn.entropy()), f(mvn.covariance_matrix.diagonal()),
      f(torch.distributions.kl_divergence(mvn, mvn2)), f(mvn2.scale_tril.diagonal()),
      f(mvn.mean), tuple(mvn.batch_shape), tuple(mvn.event_shape))

Xtr = torch.from_numpy(np.sort(rng.uniform(-3, 3, 15))[:, None])
ytr = torch.sin(Xtr).squeeze(-1) + 0.1 * torch.from_numpy(rng.standard_normal(15))
Xte = torch.linspace(-3, 3, 6).unsqueeze(-1)
log_ls = torch.zeros((), requires_grad=True)
log_sf = torch.zeros((), requires_grad=True)
log_sn = torch.tensor(-1.0, requires_grad=True)


def kern(a, b):
    d2 = torch.cdist(a, b).pow(2)
    return log_sf.exp().pow(2) * torch.exp(-0.5 * d2 / log_ls.exp().pow(2))


def nll():
    K = kern(Xtr, Xtr) + (log_sn.exp().pow(2) + 1e-6) * torch.eye(len(Xtr))
    Lk = torch.linalg.cholesky(K)
    alpha = torch.cholesky_solve(ytr.unsqueeze(-1), Lk)
    return (0.5 * ytr @ alpha.squeeze(-1) + Lk.diagonal().log().sum()
            + 0.5 * len(Xtr) * math.log(2 * math.pi)), Lk, alpha


opt = torch.optim.Adam([log_ls, log_sf, log_sn], lr=0.05)
gp_losses = []
for _ in range(25):
    opt.zero_grad()
    loss, _, _ = nll()
    loss.backward()
    opt.step()
    gp_losses.append(loss.item())
with torch.no_grad():
    _, Lk, alpha = nll()
    Ks = kern(Xte, Xtr)
    mean = Ks @ alpha.squeeze(-1)
    v = torch.linalg.solve_triangular(Lk, Ks.T, upper=False)
    var = kern(Xte, Xte).diagonal() - v.pow(2).sum(0)
print("gp", f(gp_losses[::5]), f(mean), f(var), f(torch.stack([log_ls, log_sf, log_sn]).exp()))
