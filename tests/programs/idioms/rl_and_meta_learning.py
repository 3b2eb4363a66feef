"""RL and meta-learning idioms: PPO on a hand-written deterministic chain environment (GAE with a
reversed loop and a torch.flip/cumsum discounted return, clipped surrogate via clamp/min, value
loss, entropy bonus from Categorical and a TanhTransform Normal policy, log_prob of NumPy-chosen
actions, advantage normalisation, NumPy minibatch permutations, clip_grad_norm_), a DQN with a
target network, Huber loss over gather and Polyak soft updates through no_grad/copy_/lerp_, a
SAC-style actor/twin-critic step (torch.min, reparameterised sample from loc/scale and NumPy
noise, tanh-squashed log-probs), MAML with autograd.grad(create_graph=True) over
torch.func.functional_call, Reptile and prototypical networks (cdist, log_softmax)."""
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Categorical, Normal, TransformedDistribution
from torch.distributions.transforms import TanhTransform
from torch.func import functional_call

rng = np.random.default_rng(31)
torch.set_default_dtype(torch.float64)


def fmt(v):
    s = f"{v:.10g}"
    return f"{v:.14f}" if "e" in s else s  # the test reads exponent notation as words


f = lambda t: " ".join(fmt(v) for v in torch.as_tensor(t).flatten().tolist())


def init_(m, scale=0.3):
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.from_numpy(rng.standard_normal(tuple(p.shape)) * scale))
    return m


class Chain:
    """Deterministic 5-state chain: action 1 moves right (reward 1 at the end), 0 moves left."""
    def __init__(self, n=5):
        self.n, self.s = n, 0

    def reset(self):
        self.s = 0
        return self.obs()

    def obs(self):
        return np.eye(self.n)[self.s]

    def step(self, a):
        self.s = min(self.s + 1, self.n - 1) if a == 1 else max(self.s - 1, 0)
        done = self.s == self.n - 1
        return self.obs(), float(done) - 0.05, done


# ---- PPO -------------------------------------------------------------------------------------
class ActorCritic(nn.Module):
    def __init__(self, d=5, h=16, k=2):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(d, h), nn.Tanh())
        self.pi, self.v = nn.Linear(h, k), nn.Linear(h, 1)
        self.log_std = nn.Parameter(torch.zeros(1))
        self.mu = nn.Linear(h, 1)

    def forward(self, x):
        h = self.body(x)
        return self.pi(h), self.v(h).squeeze(-1), self.mu(h)


def gae(rewards, values, dones, last_v, gamma=0.99, lam=0.95):
    adv, last = torch.zeros_like(rewards), 0.0
    for t in reversed(range(len(rewards))):
        nv = last_v if t == len(rewards) - 1 else values[t + 1]
        nonterm = 1.0 - dones[t]
        delta = rewards[t] + gamma * nv * nonterm - values[t]
        last = delta + gamma * lam * nonterm * last
        adv[t] = last
    return adv


def discounted_flip(r, gamma):
    # returns via flip/cumsum of gamma powers (no terminal in the segment)
    T = r.shape[0]
    w = gamma ** torch.arange(T, dtype=r.dtype)
    return torch.flip(torch.cumsum(torch.flip(r * w, [0]), 0), [0]) / w


ac = init_(ActorCritic())
opt = torch.optim.Adam(ac.parameters(), lr=3e-3, eps=1e-5)
env, T = Chain(), 16
obs_np = env.reset()
ppo_log = []
for it in range(3):
    obs_b, act_b, cont_b, rew_b, done_b = [], [], [], [], []
    with torch.no_grad():
        for t in range(T):
            o = torch.from_numpy(obs_np)
            logits, _, _ = ac(o)
            p = torch.softmax(logits, -1).numpy()
            a = int(rng.random() < p[1])  # NumPy chooses the action
            obs_b.append(obs_np); act_b.append(a); cont_b.append(rng.uniform(-0.9, 0.9))
            obs_np, r, d = env.step(a)
            rew_b.append(r); done_b.append(float(d))
            if d:
                obs_np = env.reset()
        obs = torch.from_numpy(np.stack(obs_b))
        acts, conts = torch.tensor(act_b), torch.tensor(cont_b)
        rews, dones = torch.tensor(rew_b), torch.tensor(done_b)
        logits, values, mu = ac(obs)
        old_lp = Categorical(logits=logits).log_prob(acts)
        sq = TransformedDistribution(Normal(mu.squeeze(-1), ac.log_std.exp()), [TanhTransform()])
        old_clp = sq.log_prob(conts)
        last_v = ac(torch.from_numpy(obs_np))[1]
        adv = gae(rews, values, dones, last_v)
        ret = adv + values
    disc = discounted_flip(rews, 0.9)
    stats = []
    for epoch in range(2):
        perm = rng.permutation(T)
        for mb in np.split(perm, 2):
            idx = torch.from_numpy(mb)
            logits, v, mu = ac(obs[idx])
            dist = Categorical(logits=logits)
            lp = dist.log_prob(acts[idx])
            sq = TransformedDistribution(Normal(mu.squeeze(-1), ac.log_std.exp()), [TanhTransform()])
            clp = sq.log_prob(conts[idx])
            a_mb = adv[idx]
            a_mb = (a_mb - a_mb.mean()) / (a_mb.std() + 1e-8)
            ratio = torch.exp(lp + clp - old_lp[idx] - old_clp[idx])
            s1, s2 = ratio * a_mb, torch.clamp(ratio, 0.8, 1.2) * a_mb
            pg = -torch.min(s1, s2).mean()
            v_clipped = values[idx] + (v - values[idx]).clamp(-0.2, 0.2)
            vl = 0.5 * torch.max((v - ret[idx]) ** 2, (v_clipped - ret[idx]) ** 2).mean()
            ent = dist.entropy().mean() + sq.base_dist.entropy().mean()
            loss = pg + 0.5 * vl - 0.01 * ent
            opt.zero_grad()
            loss.backward()
            gn = nn.utils.clip_grad_norm_(ac.parameters(), 0.5)
            opt.step()
            with torch.no_grad():
                kl = ((ratio - 1) - ratio.log()).mean()
                frac = ((ratio - 1.0).abs() > 0.2).double().mean()
            stats += [loss.item(), gn.item(), kl.item(), frac.item()]
    ppo_log += [rews.sum().item(), disc[0].item(), adv.abs().sum().item()] + stats
print("ppo", f(ppo_log))

# ---- DQN with a target network ------------------------------------------------------------
q_net = init_(nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 2)))
q_tgt = copy.deepcopy(q_net)
for p in q_tgt.parameters():
    p.requires_grad_(False)
q_opt = torch.optim.RMSprop(q_net.parameters(), lr=1e-2)
S = torch.from_numpy(np.eye(5)[rng.integers(0, 5, 12)])
A = torch.from_numpy(rng.integers(0, 2, 12))
R = torch.from_numpy(rng.standard_normal(12))
S2 = torch.from_numpy(np.eye(5)[rng.integers(0, 5, 12)])
D = torch.from_numpy((rng.random(12) < 0.2).astype(np.float64))
dqn_log = []
for step in range(4):
    q = q_net(S).gather(1, A.unsqueeze(1)).squeeze(1)
    with torch.no_grad():
        a2 = q_net(S2).argmax(dim=1, keepdim=True)  # double DQN
        target = R + 0.9 * (1 - D) * q_tgt(S2).gather(1, a2).squeeze(1)
    loss = F.huber_loss(q, target, delta=1.0)
    q_opt.zero_grad()
    loss.backward()
    q_opt.step()
    with torch.no_grad():
        for pt, p in zip(q_tgt.parameters(), q_net.parameters()):
            if step % 2 == 0:
                pt.copy_(0.9 * pt + 0.1 * p)
            else:
                pt.lerp_(p, 0.1)
    dqn_log += [loss.item(), q_tgt[2].weight.sum().item()]
print("dqn", f(dqn_log), f(F.smooth_l1_loss(q, target, reduction="none", beta=0.5).detach()))

# ---- SAC-style twin critics -----------------------------------------------------------------
actor = init_(nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 4)))
q1 = init_(nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 1)))
q2 = init_(nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 1)))
log_alpha = torch.zeros(1, requires_grad=True)
a_opt = torch.optim.Adam(list(actor.parameters()) + [log_alpha], lr=1e-3)
obs = torch.from_numpy(rng.standard_normal((8, 3)))
sac_log = []
for step in range(3):
    mu, log_std = actor(obs).chunk(2, dim=-1)
    log_std = torch.clamp(log_std, -5, 2)
    base = Normal(mu, log_std.exp())
    eps = torch.from_numpy(rng.standard_normal(mu.shape))
    u = base.loc + base.scale * eps  # rsample with NumPy noise
    act = torch.tanh(u)
    logp = (base.log_prob(u) - torch.log(1 - act.pow(2) + 1e-6)).sum(-1)
    sq = TransformedDistribution(base, [TanhTransform(cache_size=1)])
    logp2 = sq.log_prob(act.clamp(-0.999999, 0.999999)).sum(-1)
    qa = torch.min(q1(torch.cat([obs, act], -1)), q2(torch.cat([obs, act], -1))).squeeze(-1)
    alpha = log_alpha.exp()
    a_loss = (alpha.detach() * logp - qa).mean()
    al_loss = -(log_alpha * (logp.detach() - 2.0)).mean()
    a_opt.zero_grad()
    (a_loss + al_loss).backward()
    a_opt.step()
    sac_log += [a_loss.item(), al_loss.item(), (logp - logp2).abs().max().item() < 1e-3,
                actor[2].bias.grad.norm().item()]
print("sac", f(sac_log))

# ---- MAML over functional_call and Reptile ---------------------------------------------------
def make_task():
    amp, ph = rng.uniform(0.5, 2.0), rng.uniform(0, np.pi)
    x = rng.uniform(-3, 3, (10, 1))
    return torch.from_numpy(x), torch.from_numpy(amp * np.sin(x + ph))


model = init_(nn.Sequential(nn.Linear(1, 20), nn.Tanh(), nn.Linear(20, 1)), 0.5)
meta_opt = torch.optim.Adam(model.parameters(), lr=1e-3)
maml_log = []
for it in range(3):
    meta_opt.zero_grad()
    outer = 0.0
    for _ in range(2):
        x, y = make_task()
        params = dict(model.named_parameters())
        for _ in range(2):
            inner = F.mse_loss(functional_call(model, params, (x[:5],)), y[:5])
            grads = torch.autograd.grad(inner, list(params.values()), create_graph=True)
            params = {n: p - 0.05 * g for (n, p), g in zip(params.items(), grads)}
        q_loss = F.mse_loss(functional_call(model, params, (x[5:],)), y[5:])
        (q_loss / 2).backward()
        outer += q_loss.item() / 2
    maml_log += [outer, model[0].weight.grad.norm().item()]
    meta_opt.step()
print("maml", f(maml_log))

rep_log = []
for it in range(3):
    x, y = make_task()
    fast = copy.deepcopy(model)
    inner_opt = torch.optim.SGD(fast.parameters(), lr=0.02)
    for _ in range(3):
        inner_opt.zero_grad()
        F.mse_loss(fast(x), y).backward()
        inner_opt.step()
    with torch.no_grad():
        for p, fp in zip(model.parameters(), fast.parameters()):
            p.add_(fp - p, alpha=0.5)
    rep_log.append(sum(p.sum() for p in model.parameters()).item())
print("reptile", f(rep_log))

# ---- prototypical networks ----------------------------------------------------------------
enc = init_(nn.Sequential(nn.Linear(4, 12), nn.ReLU(), nn.Linear(12, 6)))
p_opt = torch.optim.SGD(enc.parameters(), lr=0.05, momentum=0.9, nesterov=True)
centers = rng.standard_normal((3, 4)) * 2
proto_log = []
for ep in range(3):
    ys = np.repeat(np.arange(3), 3)
    sup = torch.from_numpy(centers[ys] + rng.standard_normal((9, 4)) * 0.5)
    yq = torch.from_numpy(np.repeat(np.arange(3), 2))
    qry = torch.from_numpy(centers[yq.numpy()] + rng.standard_normal((6, 4)) * 0.5)
    z = enc(sup).view(3, 3, -1)
    protos = z.mean(dim=1)
    d = torch.cdist(enc(qry), protos) ** 2
    logp = F.log_softmax(-d, dim=1)
    loss = F.nll_loss(logp, yq)
    acc = (logp.argmax(1) == yq).float().mean()
    d2 = ((enc(qry).unsqueeze(1) - protos.unsqueeze(0)) ** 2).sum(-1)
    p_opt.zero_grad()
    loss.backward()
    p_opt.step()
    proto_log += [loss.item(), acc.item(), (d - d2).abs().max().item() < 1e-8]
print("proto", f(proto_log))

# ---- extras: action masks, Independent, kl, vmap-ed MAML over tasks, n-step returns -----------
from torch.distributions import Independent, kl_divergence
from torch.func import grad, vmap

logits = torch.from_numpy(rng.standard_normal((4, 5)))
mask = torch.from_numpy(rng.random((4, 5)) < 0.3)
mask[:, 0] = False
masked = logits.masked_fill(mask, float("-inf"))
cm = Categorical(logits=masked)
cu = Categorical(logits=logits)
ind = Independent(Normal(logits, torch.ones_like(logits) * 0.5), 1)
acts_np = torch.from_numpy(np.where(mask.numpy(), 0, rng.integers(0, 5, (4, 5)))[:, 0])
ex = [cm.entropy(), cm.log_prob(acts_np), kl_divergence(cm, cu), ind.log_prob(logits * 0.9),
      ind.entropy(), cm.probs.sum(-1), F.one_hot(acts_np, 5).sum(0)]
rw = torch.from_numpy(rng.standard_normal(10))
nstep = (rw.unfold(0, 3, 1) * (0.9 ** torch.arange(3.0))).sum(-1)
ex.append(nstep)

xs = torch.from_numpy(rng.uniform(-3, 3, (3, 8, 1)))
ys = torch.sin(xs * torch.tensor([1.0, 1.5, 2.0]).view(3, 1, 1))
params = {n: p.detach() for n, p in model.named_parameters()}


def task_loss(p, x, y):
    return F.mse_loss(functional_call(model, p, (x,)), y)


def adapt_then_query(p, x, y):
    g = grad(task_loss)(p, x[:4], y[:4])
    fast = {n: p[n] - 0.05 * g[n] for n in p}
    return task_loss(fast, x[4:], y[4:])


batched = vmap(adapt_then_query, in_dims=(None, 0, 0))(params, xs, ys)
looped = torch.stack([adapt_then_query(params, xs[i], ys[i]) for i in range(3)])
ex += [batched, (batched - looped).abs().max() < 1e-10]
print("extras", " ".join(f(t) for t in ex))
