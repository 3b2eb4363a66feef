"""A DDPM/DDIM toy: sinusoidal timestep embeddings, a tiny UNet (GroupNorm, SiLU, a
self-attention block through F.scaled_dot_product_attention and an einsum twin), linear and
cosine noise schedules (linspace/cumprod/gather/sqrt), q_sample and the epsilon loss on NumPy
noise, AdamW with betas and gradient clipping, EMA through torch._foreach_* and lerp_, a few
DDIM steps with classifier-free guidance, and an autocast(cpu, bfloat16) forward."""
import copy
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(21)
torch.set_default_dtype(torch.float64)
f = lambda t: " ".join(f"{v:.10f}" for v in torch.as_tensor(t).flatten().tolist())
dt = lambda d: str(d).split(".")[-1]
T, C, HW, NCLS = 50, 2, 8, 3


def timestep_embedding(t, dim, max_period=10000):
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(0, half, dtype=torch.float64) / half)
    args = t[:, None].to(torch.float64) * freqs[None]
    emb = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
    if dim % 2:
        emb = torch.cat([emb, torch.zeros_like(emb[:, :1])], dim=-1)
    return emb


class ResBlock(nn.Module):
    def __init__(self, cin, cout, tdim):
        super().__init__()
        self.norm1 = nn.GroupNorm(2, cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.temb = nn.Linear(tdim, cout)
        self.norm2 = nn.GroupNorm(2, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x, temb):
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.temb(F.silu(temb))[:, :, None, None]
        h = self.conv2(F.silu(self.norm2(h)))
        return h + self.skip(x)


class AttnBlock(nn.Module):
    def __init__(self, c, heads=2, use_sdpa=True):
        super().__init__()
        self.norm = nn.GroupNorm(2, c)
        self.qkv = nn.Conv2d(c, 3 * c, 1)
        self.proj = nn.Conv2d(c, c, 1)
        self.heads, self.use_sdpa = heads, use_sdpa

    def forward(self, x):
        b, c, h, w = x.shape
        q, k, v = self.qkv(self.norm(x)).reshape(b, 3, self.heads, c // self.heads, h * w).unbind(1)
        q, k, v = (t.transpose(-1, -2) for t in (q, k, v))
        if self.use_sdpa:
            o = F.scaled_dot_product_attention(q, k, v)
        else:
            att = torch.einsum("bhqd,bhkd->bhqk", q, k) * (c // self.heads) ** -0.5
            o = torch.einsum("bhqk,bhkd->bhqd", att.softmax(dim=-1), v)
        o = o.transpose(-1, -2).reshape(b, c, h, w)
        return x + self.proj(o)


class TinyUNet(nn.Module):
    def __init__(self, ch=8, tdim=16):
        super().__init__()
        self.tdim = tdim
        self.time_mlp = nn.Sequential(nn.Linear(tdim, tdim * 2), nn.SiLU(), nn.Linear(tdim * 2, tdim))
        self.class_emb = nn.Embedding(NCLS + 1, tdim)  # index NCLS = null class for CFG
        self.inc = nn.Conv2d(C, ch, 3, padding=1)
        self.down = ResBlock(ch, ch, tdim)
        self.pool = nn.Conv2d(ch, 2 * ch, 3, stride=2, padding=1)
        self.mid = ResBlock(2 * ch, 2 * ch, tdim)
        self.attn = AttnBlock(2 * ch)
        self.up = nn.ConvTranspose2d(2 * ch, ch, 4, stride=2, padding=1)
        self.dec = ResBlock(2 * ch, ch, tdim)
        self.out = nn.Sequential(nn.GroupNorm(2, ch), nn.SiLU(), nn.Conv2d(ch, C, 3, padding=1))

    def forward(self, x, t, y):
        temb = timestep_embedding(t, self.tdim).to(self.inc.weight.dtype)
        temb = self.time_mlp(temb) + self.class_emb(y)
        h0 = self.down(self.inc(x), temb)
        h = self.attn(self.mid(self.pool(h0), temb))
        h = self.dec(torch.cat([self.up(h), h0], dim=1), temb)
        return self.out(h)


def fill_(model, scale=0.15):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.copy_(torch.from_numpy(rng.standard_normal(tuple(p.shape)) * 0.01))
            elif "norm" in name or p.dim() == 1:
                p.copy_(torch.from_numpy(1 + rng.standard_normal(tuple(p.shape)) * 0.05))
            else:
                p.copy_(torch.from_numpy(rng.standard_normal(tuple(p.shape)) * scale))


# ---- schedules ----
betas = torch.linspace(1e-4, 0.02, T, dtype=torch.float64)
alphas = 1.0 - betas
alphas_cumprod = torch.cumprod(alphas, dim=0)
alphas_cumprod_prev = F.pad(alphas_cumprod[:-1], (1, 0), value=1.0)
sqrt_ac, sqrt_1m_ac = alphas_cumprod.sqrt(), torch.sqrt(1.0 - alphas_cumprod)
posterior_var = betas * (1.0 - alphas_cumprod_prev) / (1.0 - alphas_cumprod)
steps = torch.arange(T + 1, dtype=torch.float64) / T
cos_ac = torch.cos((steps + 0.008) / 1.008 * math.pi / 2) ** 2
cos_betas = torch.clip(1 - cos_ac[1:] / cos_ac[:-1], 0, 0.999)
print("sched", f(torch.stack([alphas_cumprod[-1], posterior_var[1:].sum(), cos_betas.sum(),
                              sqrt_1m_ac.mean(), alphas_cumprod_prev[:3].prod()])))


def extract(a, t, shape):
    out = a.gather(-1, t)
    return out.reshape(t.shape[0], *((1,) * (len(shape) - 1)))


def q_sample(x0, t, noise):
    return extract(sqrt_ac, t, x0.shape) * x0 + extract(sqrt_1m_ac, t, x0.shape) * noise


model = TinyUNet()
fill_(model)
ema = copy.deepcopy(model).requires_grad_(False)
ema_params = list(ema.parameters())
opt = torch.optim.AdamW(model.parameters(), lr=2e-3, betas=(0.9, 0.99), weight_decay=0.01)
data = torch.from_numpy(rng.standard_normal((4, C, HW, HW)))
labels = torch.tensor([0, 1, 2, 1])
losses, norms = [], []
for step in range(4):
    t = torch.from_numpy(rng.integers(0, T, size=4)).long()
    noise = torch.from_numpy(rng.standard_normal(data.shape))
    drop = torch.from_numpy(rng.random(4) < 0.3)
    y = torch.where(drop, torch.full_like(labels, NCLS), labels)
    xt = q_sample(data, t, noise)
    loss = F.mse_loss(model(xt, t, y), noise)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    norms.append(nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0).item())
    opt.step()
    with torch.no_grad():
        params = [p.detach() for p in model.parameters()]
        if step % 2 == 0:
            torch._foreach_mul_(ema_params, 0.9)
            torch._foreach_add_(ema_params, params, alpha=0.1)
        else:
            torch._foreach_lerp_(ema_params, params, 0.1)
    losses.append(loss.item())
print("train", f(losses), f(norms))
diff = torch._foreach_sub([p.detach() for p in model.parameters()], ema_params)
print("ema", f(torch.stack(torch._foreach_norm(diff)).sum()),
      f(sum(p.sum() for p in ema.parameters())))

# ---- einsum attention agrees with SDPA ----
attn2 = AttnBlock(16, use_sdpa=False)
attn2.load_state_dict(model.attn.state_dict())
probe = torch.from_numpy(rng.standard_normal((2, 16, 4, 4)))
with torch.no_grad():
    print("attn", f((model.attn(probe) - attn2(probe)).abs().max() < 1e-10), f(attn2(probe).std()))


# ---- DDIM sampling with classifier-free guidance ----
@torch.no_grad()
def ddim_sample(net, n, guidance=2.0, nsteps=4, eta=0.5):
    x = torch.from_numpy(rng.standard_normal((n, C, HW, HW)))
    ts = torch.linspace(T - 1, 0, nsteps).round().long()
    y = torch.arange(n) % NCLS
    for i, tcur in enumerate(ts):
        tb = tcur.repeat(n)
        eps_both = net(torch.cat([x, x]), torch.cat([tb, tb]), torch.cat([y, torch.full_like(y, NCLS)]))
        eps_c, eps_u = eps_both.chunk(2)
        eps = eps_u + guidance * (eps_c - eps_u)
        a_t = alphas_cumprod[tcur]
        a_prev = alphas_cumprod[ts[i + 1]] if i + 1 < len(ts) else torch.tensor(1.0)
        x0 = ((x - (1 - a_t).sqrt() * eps) / a_t.sqrt()).clamp(-5, 5)
        sigma = eta * torch.sqrt((1 - a_prev) / (1 - a_t) * (1 - a_t / a_prev))
        dir_xt = torch.sqrt(torch.clamp(1 - a_prev - sigma ** 2, min=0.0)) * eps
        z = torch.from_numpy(rng.standard_normal(x.shape))
        x = a_prev.sqrt() * x0 + dir_xt + sigma * z
    return x, ts


samples, ts = ddim_sample(ema, 3)
print("ddim", ts.tolist(), f(samples.mean()), f(samples.abs().amax(dim=(1, 2, 3))))


# ---- one DDPM ancestral step ----
@torch.no_grad()
def p_sample(net, x, t_index):
    t = torch.full((x.shape[0],), t_index, dtype=torch.long)
    eps = net(x, t, torch.zeros_like(t))
    coef = extract(betas, t, x.shape) / extract(sqrt_1m_ac, t, x.shape)
    mean = extract(1.0 / alphas.sqrt(), t, x.shape) * (x - coef * eps)
    z = torch.from_numpy(rng.standard_normal(x.shape)) if t_index > 0 else torch.zeros_like(x)
    return mean + extract(posterior_var, t, x.shape).sqrt() * z


xs = torch.from_numpy(rng.standard_normal((2, C, HW, HW)))
for ti in (2, 1, 0):
    xs = p_sample(model, xs, ti)
print("ddpm", f(xs.sum()), f(xs.var(unbiased=False)))

# ---- autocast(cpu, bfloat16) forward ----
m32 = copy.deepcopy(model).float()
x32, t32 = data.float(), torch.tensor([3, 10, 20, 40])
with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
    out = m32(x32, t32, labels)
    lin = m32.time_mlp[0](torch.ones(2, 16, dtype=torch.float32))
    gn = m32.out[0](x32.repeat(1, 4, 1, 1))
    l_amp = F.mse_loss(out.float(), x32)
    qa = x32.flatten(2).transpose(1, 2)
    att = torch.einsum("bqd,bkd->bqk", qa, qa).softmax(-1)
    sd = F.scaled_dot_product_attention(qa, qa, qa)
print("autocast", dt(out.dtype), dt(lin.dtype), dt(gn.dtype), dt(l_amp.dtype), dt(att.dtype),
      dt(sd.dtype),
      f"{round(l_amp.item(), 2):.2f}")

# ---- attention variants and the elementwise helpers samplers use ----
q = torch.from_numpy(rng.standard_normal((2, 2, 5, 4)))
k, v = (torch.from_numpy(rng.standard_normal((2, 2, 6, 4))) for _ in range(2))
keep = torch.from_numpy(rng.random((5, 6)) > 0.3)
a, b, w = (torch.from_numpy(rng.standard_normal(6)) for _ in range(3))
print("sdpa", f(torch.stack([F.scaled_dot_product_attention(q, k, v, scale=0.3).sum(),
                             F.scaled_dot_product_attention(q, k, v, attn_mask=keep).sum(),
                             F.scaled_dot_product_attention(q, k, v, attn_mask=torch.where(keep, 0.0, -1e9)).sum(),
                             F.scaled_dot_product_attention(q, k[:, :, :5], v[:, :, :5], is_causal=True).sum(),
                             F.scaled_dot_product_attention(q.repeat(1, 2, 1, 1), k, v, enable_gqa=True).sum()])))
print("elementwise", f(torch.stack([torch.lerp(a, b, w.sigmoid()).sum(), torch.addcmul(a, b, w, value=0.5).sum(),
                                    torch.addcdiv(a, b, w.abs() + 1, value=2).sum(), a.clamp(min=b, max=b + 1).sum(),
                                    torch.logaddexp(a, b).sum(), torch.expm1(a).sum(), torch.rsqrt(w.abs()).sum(),
                                    torch.linalg.vector_norm(a, ord=3), torch.nan_to_num(a.log()).sum()])))
