"""Numerics-heavy research idioms, part one: a Fourier neural operator (rfft2/irfft2 with complex
weights as nn.Parameter(cfloat), einsum on complex tensors, Adam on complex parameters), a 1-D
FNO layer with rfft/irfftn, spectral derivatives and a spectral Poisson solve, normalizing flows
(affine coupling, a Glow 1x1 convolution in LU form, Householder and planar flows, slogdet,
solve_triangular, triangular_solve), ZCA whitening, orthogonal Procrustes and a matrix_exp
rotation with gradients, a complex-valued network (torch.complex, abs, angle, view_as_real,
polar, modReLU), torch.special functions with gradcheck, nan-aware reductions and dtype
promotion."""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(5)
f = lambda t: " ".join(f"{v:.10g}" for v in torch.as_tensor(t).flatten().tolist())


def fill_(module, scale=0.3):
    with torch.no_grad():
        for p in module.parameters():
            if p.is_complex():
                re = rng.standard_normal(tuple(p.shape)) * scale
                im = rng.standard_normal(tuple(p.shape)) * scale
                p.copy_(torch.complex(torch.from_numpy(re).float(), torch.from_numpy(im).float()))
            else:
                p.copy_(torch.from_numpy(rng.standard_normal(tuple(p.shape)) * scale))
    return module


# ---- Fourier neural operator (float32, cfloat weights) ---------------------------------------
class SpectralConv2d(nn.Module):
    def __init__(self, in_channels, out_channels, modes1, modes2):
        super().__init__()
        self.in_channels, self.out_channels = in_channels, out_channels
        self.modes1, self.modes2 = modes1, modes2
        self.scale = 1 / (in_channels * out_channels)
        self.weights1 = nn.Parameter(self.scale * torch.rand(in_channels, out_channels, modes1,
                                                             modes2, dtype=torch.cfloat))
        self.weights2 = nn.Parameter(self.scale * torch.rand(in_channels, out_channels, modes1,
                                                             modes2, dtype=torch.cfloat))

    def compl_mul2d(self, input, weights):
        return torch.einsum("bixy,ioxy->boxy", input, weights)

    def forward(self, x):
        batchsize = x.shape[0]
        x_ft = torch.fft.rfft2(x)
        out_ft = torch.zeros(batchsize, self.out_channels, x.size(-2), x.size(-1) // 2 + 1,
                             dtype=torch.cfloat, device=x.device)
        out_ft[:, :, :self.modes1, :self.modes2] = \
            self.compl_mul2d(x_ft[:, :, :self.modes1, :self.modes2], self.weights1)
        out_ft[:, :, -self.modes1:, :self.modes2] = \
            self.compl_mul2d(x_ft[:, :, -self.modes1:, :self.modes2], self.weights2)
        return torch.fft.irfft2(out_ft, s=(x.size(-2), x.size(-1)))


class FNO2d(nn.Module):
    def __init__(self, modes=3, width=6):
        super().__init__()
        self.fc0 = nn.Linear(3, width)
        self.convs = nn.ModuleList([SpectralConv2d(width, width, modes, modes) for _ in range(2)])
        self.ws = nn.ModuleList([nn.Conv2d(width, width, 1) for _ in range(2)])
        self.fc1 = nn.Linear(width, 16)
        self.fc2 = nn.Linear(16, 1)

    def get_grid(self, shape, device):
        b, sx, sy = shape[0], shape[1], shape[2]
        gridx = torch.tensor(np.linspace(0, 1, sx), dtype=torch.float)
        gridx = gridx.reshape(1, sx, 1, 1).repeat([b, 1, sy, 1])
        gridy = torch.tensor(np.linspace(0, 1, sy), dtype=torch.float)
        gridy = gridy.reshape(1, 1, sy, 1).repeat([b, sx, 1, 1])
        return torch.cat((gridx, gridy), dim=-1).to(device)

    def forward(self, x):
        grid = self.get_grid(x.shape, x.device)
        x = torch.cat((x, grid), dim=-1)
        x = self.fc0(x).permute(0, 3, 1, 2)
        for i, (conv, w) in enumerate(zip(self.convs, self.ws)):
            x = conv(x) + w(x)
            if i < len(self.convs) - 1:
                x = F.gelu(x)
        x = x.permute(0, 2, 3, 1)
        return self.fc2(F.gelu(self.fc1(x)))


class LpLoss:
    def __call__(self, x, y):
        diff = torch.norm(x.reshape(x.size(0), -1) - y.reshape(y.size(0), -1), 2, 1)
        return (diff / torch.norm(y.reshape(y.size(0), -1), 2, 1)).mean()


fno = fill_(FNO2d(), 0.3)
n = 8
a = torch.from_numpy(rng.standard_normal((3, n, n, 1))).float()
u = torch.from_numpy(np.cumsum(rng.standard_normal((3, n, n, 1)), axis=1)).float()
opt = torch.optim.Adam(fno.parameters(), lr=1e-2, weight_decay=1e-4)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
lp = LpLoss()
fno_losses = []
for _ in range(4):
    opt.zero_grad()
    loss = lp(fno(a), u)
    loss.backward()
    opt.step()
    sched.step()
    fno_losses.append(loss.item())
w1 = fno.convs[0].weights1
print("fno", f(fno_losses), w1.dtype == torch.cfloat, w1.grad.dtype == torch.complex64,
      f(w1.grad.abs().sum()), f(w1.detach().angle().abs().sum()),
      f(opt.state[w1]["exp_avg_sq"].real.sum() * 1e6), opt.state[w1]["exp_avg"].is_complex())


# ---- 1-D spectral layer (float64), spectral derivatives and a Poisson solve -------------------
class SpectralConv1d(nn.Module):
    def __init__(self, c, modes):
        super().__init__()
        self.modes = modes
        self.weights = nn.Parameter(torch.randn(c, c, modes, dtype=torch.cdouble) / c)

    def forward(self, x):
        x_ft = torch.fft.rfft(x, norm="ortho")
        out_ft = torch.zeros(x.shape[0], x.shape[1], x.shape[-1] // 2 + 1,
                             dtype=torch.cdouble)
        out_ft[..., :self.modes] = torch.einsum("bix,iox->box", x_ft[..., :self.modes],
                                                self.weights)
        return torch.fft.irfftn(out_ft, s=[x.shape[-1]], dim=[-1], norm="ortho")


sc1 = SpectralConv1d(2, 4)
with torch.no_grad():
    sc1.weights.copy_(torch.from_numpy(rng.standard_normal((2, 2, 4))
                                       + 1j * rng.standard_normal((2, 2, 4))))
x1 = torch.from_numpy(rng.standard_normal((2, 2, 12))).requires_grad_(True)
y1 = sc1(x1)
(y1.pow(2).sum() + y1[:, 0].sin().sum()).backward()
gc_ok = torch.autograd.gradcheck(lambda t, w: torch.fft.irfft(torch.fft.rfft(t) * w, n=6),
                                 (torch.from_numpy(rng.standard_normal(6)).requires_grad_(True),
                                  torch.from_numpy(rng.standard_normal(4) + 1j * rng.standard_normal(4))
                                  .requires_grad_(True)))
L = 2 * math.pi
N = 32
xs = torch.arange(N, dtype=torch.float64) * L / N
fx = torch.exp(torch.sin(xs))
k = torch.fft.rfftfreq(N, d=L / N) * 2 * math.pi
dfx = torch.fft.irfft(1j * k * torch.fft.rfft(fx), n=N)
d2fx = torch.fft.ifft(-(torch.fft.fftfreq(N, d=1.0 / N) ** 2) * torch.fft.fft(fx)).real
exact = torch.cos(xs) * fx
# Poisson: -lap(u) = rhs on a periodic 2-D grid
X, Y = torch.meshgrid(xs, xs, indexing="ij")
rhs = torch.sin(X) * torch.cos(2 * Y)
kx = torch.fft.fftfreq(N, d=1.0 / N)
KX, KY = torch.meshgrid(kx, kx, indexing="ij")
k2 = KX ** 2 + KY ** 2
k2[0, 0] = 1.0
u_hat = torch.fft.fft2(rhs) / k2
u_hat[0, 0] = 0
u_sol = torch.fft.ifft2(u_hat).real
spec = torch.fft.fftshift(torch.fft.fftn(rhs, norm="forward")).abs()
print("spectral", f(y1.sum()), f(x1.grad.sum()), f(sc1.weights.grad.real.sum()),
      f(sc1.weights.grad.imag.sum()), gc_ok, f((dfx - exact).abs().max() < 1e-6),
      f(d2fx[:4]), f((u_sol - rhs / 5).abs().max() < 1e-10), f(spec.max()),
      f(torch.fft.hfft(torch.fft.ihfft(fx)).sub(fx).abs().max() < 1e-12),
      f(torch.fft.irfft2(torch.fft.rfft2(rhs)).sub(rhs).abs().max() < 1e-12))

# ---- normalizing flows (float64) -------------------------------------------------------------
torch.set_default_dtype(torch.float64)


class AffineCoupling(nn.Module):
    def __init__(self, dim, hidden=8, flip=False):
        super().__init__()
        self.flip = flip
        self.net = nn.Sequential(nn.Linear(dim // 2, hidden), nn.Tanh(), nn.Linear(hidden, dim))

    def forward(self, x):
        x0, x1 = x.chunk(2, dim=-1)
        if self.flip:
            x0, x1 = x1, x0
        s, t = self.net(x0).chunk(2, dim=-1)
        s = torch.tanh(s)
        z1 = x1 * torch.exp(s) + t
        z = torch.cat([z1, x0] if self.flip else [x0, z1], dim=-1)
        return z, s.sum(-1)


class InvConvLU(nn.Module):
    def __init__(self, c):
        super().__init__()
        w = torch.linalg.qr(torch.from_numpy(rng.standard_normal((c, c))))[0]
        P, L, U = torch.linalg.lu(w)
        s = torch.diagonal(U)
        self.register_buffer("P", P)
        self.register_buffer("sign_s", torch.sign(s))
        self.register_buffer("l_mask", torch.tril(torch.ones(c, c), -1))
        self.register_buffer("eye", torch.eye(c))
        self.L = nn.Parameter(L)
        self.U = nn.Parameter(torch.triu(U, 1))
        self.log_s = nn.Parameter(torch.log(torch.abs(s)))

    def weight(self):
        L = self.L * self.l_mask + self.eye
        U = self.U * self.l_mask.T + torch.diag(self.sign_s * torch.exp(self.log_s))
        return self.P @ L @ U

    def forward(self, x):
        return x @ self.weight().T, self.log_s.sum().expand(x.shape[0])

    def inverse(self, z):
        L = self.L * self.l_mask + self.eye
        U = self.U * self.l_mask.T + torch.diag(self.sign_s * torch.exp(self.log_s))
        y = torch.linalg.solve_triangular(L, (self.P.T @ z.T), upper=False, unitriangular=True)
        return torch.linalg.solve_triangular(U, y, upper=True).T


class Householder(nn.Module):
    def __init__(self, dim, n):
        super().__init__()
        self.vs = nn.Parameter(torch.from_numpy(rng.standard_normal((n, dim))))

    def forward(self, x):
        for v in self.vs:
            v = v / v.norm()
            x = x - 2 * (x @ v).unsqueeze(-1) * v
        return x, torch.zeros(x.shape[0])


class Planar(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.u = nn.Parameter(torch.from_numpy(rng.standard_normal(dim) * 0.3))
        self.w = nn.Parameter(torch.from_numpy(rng.standard_normal(dim) * 0.3))
        self.b = nn.Parameter(torch.zeros(1))

    def forward(self, z):
        wu = self.w @ self.u
        u_hat = self.u + (F.softplus(wu) - 1 - wu) * self.w / self.w.pow(2).sum()
        lin = z @ self.w + self.b
        z = z + u_hat * torch.tanh(lin).unsqueeze(-1)
        psi = (1 - torch.tanh(lin) ** 2).unsqueeze(-1) * self.w
        return z, torch.log(torch.abs(1 + psi @ u_hat) + 1e-8)


D = 4
flows = nn.ModuleList([AffineCoupling(D), InvConvLU(D), AffineCoupling(D, flip=True),
                       Householder(D, 2), Planar(D)])
with torch.no_grad():
    for name, p in flows.named_parameters():
        if ".net." in name:
            p.copy_(torch.from_numpy(rng.standard_normal(tuple(p.shape)) * 0.3))
base = torch.distributions.MultivariateNormal(torch.zeros(D), torch.eye(D))
data = torch.from_numpy(rng.standard_normal((32, D)) @ np.array(
    [[1.0, 0.5, 0, 0], [0, 1.0, 0.3, 0], [0, 0, 0.7, 0.2], [0.1, 0, 0, 1.2]]))


def flow_nll(x):
    logdet = torch.zeros(x.shape[0])
    for fl in flows:
        x, ld = fl(x)
        logdet = logdet + ld
    return -(base.log_prob(x) + logdet).mean(), x


opt = torch.optim.Adam(flows.parameters(), lr=5e-3)
flow_losses = []
for _ in range(6):
    opt.zero_grad()
    loss, _ = flow_nll(data)
    loss.backward()
    opt.step()
    flow_losses.append(loss.item())
conv = flows[1]
W = conv.weight()
sign, logabs = torch.linalg.slogdet(W)
zz = data[:3] @ W.T
back = conv.inverse(zz)
# numeric log-det of the whole flow at one point, through autograd.functional.jacobian
x0 = data[0].clone()
J = torch.autograd.functional.jacobian(lambda v: flow_nll(v.unsqueeze(0))[1].squeeze(0), x0)
ld_num = torch.linalg.slogdet(J).logabsdet
xin = data[:1]
ld_total = torch.zeros(1)
for fl in flows:
    xin, ld = fl(xin)
    ld_total = ld_total + ld
T = torch.triu(torch.from_numpy(rng.standard_normal((4, 4)))) + 3 * torch.eye(4)
T.requires_grad_(True)
Bm = torch.from_numpy(rng.standard_normal((4, 2))).requires_grad_(True)
sol, coeff = torch.triangular_solve(Bm, T, upper=True)
sol2 = torch.linalg.solve_triangular(T, Bm, upper=True)
sol3 = torch.linalg.solve_triangular(T.mT, Bm.mT, upper=False, left=False)
(sol.sum() + sol2.pow(2).sum() + sol3.sum()).backward()
LUf, piv = torch.linalg.lu_factor(W.detach())
print("flow", f(flow_losses), f(sign), f(logabs), f(conv.log_s.sum()),
      f((back - data[:3]).abs().max() < 1e-10), f(ld_num), f(ld_total),
      f((ld_num - ld_total).abs() < 1e-8), f(sol.sum()), f((sol - sol2).abs().max() < 1e-12),
      f(T.grad.sum()), f(Bm.grad.sum()), f((coeff - T).abs().max()), f(piv),
      f(torch.linalg.det(W.detach())), f(LUf.diagonal().abs().log().sum()))

# ---- whitening, Procrustes and rotations with gradients ---------------------------------------
Xw = torch.from_numpy(rng.standard_normal((40, 3)) @ np.array([[2.0, 0.3, 0], [0, 1.0, 0.5],
                                                                [0, 0, 0.4]]))
Xc = Xw - Xw.mean(0, keepdim=True)
cov = Xc.T @ Xc / (Xc.shape[0] - 1)
evals, evecs = torch.linalg.eigh(cov)
W_zca = evecs @ torch.diag(1.0 / torch.sqrt(evals + 1e-5)) @ evecs.T
Xz = Xc @ W_zca
Lc = torch.linalg.cholesky(cov)
Xch = torch.linalg.solve_triangular(Lc, Xc.T, upper=False).T
R_true = torch.linalg.matrix_exp(torch.tensor([[0.0, -0.4, 0.2], [0.4, 0.0, -0.1],
                                               [-0.2, 0.1, 0.0]]))
Y = Xc @ R_true.T + 0.01 * torch.from_numpy(rng.standard_normal((40, 3)))
Uu, Ss, Vh = torch.linalg.svd(Y.T @ Xc)
R_hat = Uu @ Vh
theta = torch.zeros(3, requires_grad=True)
opt = torch.optim.SGD([theta], lr=0.02, momentum=0.5)
rot_losses = []
for _ in range(12):
    opt.zero_grad()
    Kx = torch.zeros(3, 3)
    Kx = Kx + torch.tensor([[0, 0, 0], [0, 0, -1.0], [0, 1.0, 0]]) * theta[0]
    Kx = Kx + torch.tensor([[0, 0, 1.0], [0, 0, 0], [-1.0, 0, 0]]) * theta[1]
    Kx = Kx + torch.tensor([[0, -1.0, 0], [1.0, 0, 0], [0, 0, 0]]) * theta[2]
    R = torch.linalg.matrix_exp(Kx)
    loss = (Xc @ R.T - Y).pow(2).mean()
    loss.backward()
    opt.step()
    rot_losses.append(loss.item())
M = torch.from_numpy(rng.standard_normal((5, 3))).requires_grad_(True)
Q, Rq = torch.linalg.qr(M)
Ue, Se, Vhe = torch.linalg.svd(M, full_matrices=False)
ortho = (Ue @ Vhe)
ev, V = torch.linalg.eigh(M.T @ M)
pinv = torch.linalg.pinv(M)
lst = torch.linalg.lstsq(M, torch.from_numpy(rng.standard_normal((5, 1)))).solution
total = (Q.abs().sum() + Rq.diagonal().abs().sum() + ortho.sum() + Se.pow(2).sum() + ev.sum()
         + V.abs().sum() + pinv.sum() + lst.sum())
total.backward()
gc = [torch.autograd.gradcheck(fn, (M.detach().clone().requires_grad_(True),)) for fn in
      (lambda m: torch.linalg.svdvals(m), lambda m: torch.linalg.pinv(m),
       lambda m: torch.linalg.qr(m)[1].abs(), lambda m: torch.linalg.eigvalsh(m.T @ m),
       lambda m: torch.linalg.matrix_exp(m.T @ m * 0.1))]
print("whiten", f(torch.cov(Xz.T).diagonal()), f(torch.cov(Xch.T).diagonal()), f((R_hat - R_true).abs().max() < 0.05),
      f(torch.linalg.det(R_hat)), f(rot_losses[::3]), f(theta.detach()), f(total),
      f(M.grad.sum()), f(M.grad.abs().max()), gc)

# ---- complex-valued network (float32) ---------------------------------------------------------
torch.set_default_dtype(torch.float32)


class ComplexLinear(nn.Module):
    def __init__(self, i, o):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(o, i, dtype=torch.cfloat) / math.sqrt(i))
        self.bias = nn.Parameter(torch.zeros(o, dtype=torch.cfloat))

    def forward(self, z):
        return z @ self.weight.T + self.bias


class ModReLU(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.b = nn.Parameter(torch.full((n,), -0.1))

    def forward(self, z):
        mag = z.abs()
        return torch.polar(F.relu(mag + self.b), z.angle())


cnet = nn.Sequential(ComplexLinear(4, 6), ModReLU(6), ComplexLinear(6, 2))
fill_(cnet, 0.4)
re = torch.from_numpy(rng.standard_normal((10, 4))).float()
im = torch.from_numpy(rng.standard_normal((10, 4))).float()
z_in = torch.complex(re, im)
target = torch.view_as_complex(torch.from_numpy(rng.standard_normal((10, 2, 2))).float())
opt = torch.optim.SGD(cnet.parameters(), lr=0.05)
c_losses = []
for _ in range(5):
    opt.zero_grad()
    out = cnet(z_in)
    loss = (out - target).abs().pow(2).mean() + 0.1 * torch.view_as_real(out).pow(2).mean()
    loss.backward()
    opt.step()
    c_losses.append(loss.item())
zr = torch.view_as_real(out.detach())
print("complex", f(c_losses), f(zr.shape), f(out.detach().angle()[0]), f(out.detach().abs()[0]),
      f(cnet[0].weight.grad.real.sum()), f(cnet[0].weight.grad.imag.sum()),
      f(cnet[1].b.grad), str(out.dtype).split(".")[-1], f((z_in * z_in.conj()).real[0]),
      f(torch.exp(1j * torch.tensor([0.5, 1.0])).imag), f((z_in.real - re).abs().max()),
      str((z_in + torch.tensor(1.0, dtype=torch.float64)).dtype).split(".")[-1], f(torch.sgn(z_in[0]).abs()))

# ---- torch.special with gradients, nan-aware reductions, promotion (float64) ------------------
torch.set_default_dtype(torch.float64)
sp = torch.special
xp = torch.tensor([0.3, 1.0, 2.5, 7.0])
pr = torch.tensor([0.05, 0.3, 0.5, 0.9])
vals = [sp.gammaln(xp), sp.digamma(xp), sp.polygamma(1, xp), sp.erfinv(pr * 2 - 1), sp.i0(xp),
        sp.i0e(xp), sp.i1(xp), sp.i1e(xp), sp.logit(pr), sp.logit(pr, eps=0.1),
        sp.xlogy(torch.tensor([0.0, 1.0, 2.0, 3.0]), xp), sp.xlog1py(pr, xp), sp.log_ndtr(xp - 3),
        sp.ndtr(xp - 1), sp.ndtri(pr), sp.erfcx(xp), sp.entr(pr), sp.sinc(xp + 0.25),
        sp.multigammaln(xp + 2, 3), sp.log1p(pr), sp.expit(xp), sp.zeta(xp + 1, torch.tensor(2.0)),
        sp.bessel_j0(xp[:3]), sp.bessel_j1(xp[:3]), sp.softmax(xp, 0), sp.log_softmax(xp, 0),
        sp.logsumexp(xp, 0), torch.lgamma(xp), torch.mvlgamma(xp + 2, p=2)]
grad_fns = [sp.gammaln, sp.digamma, sp.erfinv, sp.i0, sp.logit, sp.log_ndtr, sp.ndtri,
            sp.erfcx, sp.entr, sp.sinc, sp.i0e, sp.i1, sp.i1e, sp.ndtr, sp.expit,
            lambda t: sp.xlogy(t, t + 1), lambda t: sp.xlog1py(t, t),
            lambda t: sp.multigammaln(t + 2, 2), lambda t: sp.polygamma(2, t + 1)]
checks = [torch.autograd.gradcheck(fn, (pr.clone().requires_grad_(True),)) for fn in grad_fns]
nanx = torch.tensor([[1.0, float("nan"), 3.0, 4.0], [float("nan"), float("nan"), 2.0, -1.0],
                     [0.5, 2.0, float("nan"), 8.0]])
nq = torch.nanquantile(nanx, torch.tensor([0.25, 0.5, 0.9]), dim=1)
nanw = nanx.clone().requires_grad_(True)
(torch.nanmean(nanw, dim=1).sum() + torch.nansum(nanw * 2) + torch.nanquantile(nanw, 0.3, dim=0).sum()).backward()
print("special", f(torch.cat([v.flatten() for v in vals])), checks)
print("nan", f(torch.nanmean(nanx, dim=1)), f(torch.nansum(nanx, dim=0)), f(nq),
      f(torch.nanmedian(nanx, dim=1).values), f(torch.nanmedian(nanx)),
      f(torch.nanquantile(nanx, 0.5, interpolation="nearest")),
      f(torch.nan_to_num(nanw.grad, nan=-7.0)), f(nanx.nanmean()), f(nanx.isnan().sum()),
      f(torch.nan_to_num(torch.tensor([float("inf"), -float("inf"), float("nan")]))))
i32 = torch.tensor([1, 2, 3], dtype=torch.int32)
f32 = torch.tensor([0.5, 1.5, 2.5], dtype=torch.float32)
f64 = torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64)
proms = [i32 + 1.5, i32 * f32, f32 + f64, i32 / 2, i32 // 2, f32 + torch.tensor(2.0, dtype=torch.float64),
         i32 + torch.tensor(2.5), torch.tensor([True, False]) + 1, f32 * (1 + 2j),
         torch.tensor([1, 2], dtype=torch.uint8) + torch.tensor([1, 2], dtype=torch.int8),
         f32.to(torch.bfloat16) + f32.to(torch.float16), f64 + f32.to(torch.complex64),
         torch.arange(3) * 0.5, torch.tensor(3) ** -1.0, i32.sum(), f32.to(torch.float16).mean()]
print("promote", [str(t.dtype).split(".")[-1] for t in proms],
      str(torch.result_type(i32, 2.0)).split(".")[-1],
      str(torch.promote_types(torch.int64, torch.float16)).split(".")[-1],
      str(torch.get_default_dtype()).split(".")[-1], f(proms[5]), f(proms[11].real),
      f(torch.where(f32 > 1, f32, f64)), str(torch.where(f32 > 1, f32, f64).dtype).split(".")[-1],
      str(torch.where(f32 > 1, f32, 0.0).dtype).split(".")[-1],
      f(torch.where(i32 > 1, i32, 0.5)), f(torch.clamp(i32, 0.5, 2.5)), f(i32.where(i32 > 1, 0.5)),
      str(torch.clamp(i32, min=0.5).dtype).split(".")[-1])
