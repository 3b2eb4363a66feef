"""Module-API idioms: walks, freezing, hooks, parametrizations, state_dict, dtype casts, deepcopy,
grad-mode nesting, higher-order autograd, tensor utilities and reprs."""
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.nn.utils.parametrize as P
from torch.nn.utils import parametrizations

rng = np.random.default_rng(9)
f = lambda t: " ".join(f"{v:.10f}" for v in torch.as_tensor(t).flatten().tolist())
one = lambda s: str(s).replace("\n", "|")


class Block(nn.Module):
    def __init__(self, d, scale=0.5):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)
        self.scale = scale
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))
        self.register_buffer("cache", torch.zeros(d), persistent=False)

    def extra_repr(self):
        return f"scale={self.scale}"

    def forward(self, x):
        self.steps += 1
        return x + self.scale * F.gelu(self.fc(self.norm(x)))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv1d(2, 4, 3, padding=1), nn.BatchNorm1d(4), nn.ReLU(),
                                  nn.Flatten(), nn.Dropout(0.1))
        self.blocks = nn.ModuleList([Block(16), Block(16, scale=0.25)])
        self.head = nn.Linear(16, 3)
        self.temp = nn.Parameter(torch.tensor(1.5))
        self.extra = nn.ParameterDict({"bias": nn.Parameter(torch.zeros(3))})

    def forward(self, x):
        h = self.stem(x)
        for b in self.blocks:
            h = b(h)
        return self.head(h) / self.temp + self.extra["bias"]


def fill(m):
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.from_numpy(np.asarray(rng.standard_normal(tuple(p.shape)) * 0.3)).to(p.dtype))


net = Net().double()
fill(net)
print("repr", one(str(net).replace("ember.", "torch.")))
print("walk", [n for n, _ in net.named_modules()][:8], [n for n, _ in net.named_children()],
      [n for n, _ in net.named_buffers()], len(list(net.parameters())),
      [n for n, _ in net.blocks[0].named_parameters(prefix="b0", recurse=True)],
      [type(m).__name__ for m in net.stem.children()], net.get_submodule("blocks.1.fc").out_features,
      tuple(net.get_parameter("blocks.0.norm.weight").shape))

# freezing + optimizer over trainable params
net.stem.requires_grad_(False)
for p in net.blocks[0].parameters():
    p.requires_grad = False
opt = torch.optim.SGD(filter(lambda p: p.requires_grad, net.parameters()), lr=0.1)
x = torch.from_numpy(rng.standard_normal((5, 2, 4)))
y = torch.from_numpy(rng.integers(0, 3, 5))

pre, bwd, tgrads = [], [], []
h1 = net.blocks[1].register_forward_pre_hook(lambda m, inp: pre.append(inp[0].shape))
h2 = net.head.register_full_backward_hook(lambda m, gi, go: bwd.append((gi[0].abs().sum().item(),
                                                                        go[0].abs().sum().item())))
h3 = net.blocks[1].register_forward_pre_hook(lambda m, inp: (inp[0] * 2,))
net.train()
net.stem[4].p = 0.0
out = net(x)
out.register_hook(lambda g: tgrads.append(g.sum().item()))
mid = out * 1.0
mid.retain_grad()
loss = F.cross_entropy(mid, y)
loss.backward()
opt.step()
for h in (h1, h2, h3):
    h.remove()
frozen = [n for n, p in net.named_parameters() if p.grad is None]
print("freeze", len(opt.param_groups[0]["params"]), frozen[:4], len(frozen), f"{loss.item():.10f}",
      tuple(pre[0]), f"{bwd[0][0]:.10f}", f"{bwd[0][1]:.10f}", f"{tgrads[0]:.10f}",
      f"{mid.grad.abs().sum().item():.10f}", net.blocks[0].steps.item(), out.is_leaf, mid.grad_fn.name())
net.zero_grad(set_to_none=True)
print("zero", all(p.grad is None for p in net.parameters()), net.head.weight.requires_grad,
      net.stem[0].weight.requires_grad)


# parametrizations
class Symmetric(nn.Module):
    def forward(self, X):
        return X.triu() + X.triu(1).transpose(-1, -2)


lin = nn.Linear(4, 4).double()
fill(lin)
P.register_parametrization(lin, "weight", Symmetric())
W = lin.weight
print("param", torch.allclose(W, W.T), P.is_parametrized(lin), P.is_parametrized(lin, "bias"),
      sorted(lin.state_dict().keys()), f(lin(torch.ones(1, 4, dtype=torch.float64))),
      type(lin.parametrizations.weight).__name__)
with P.cached():
    a_, b_ = lin.weight, lin.weight
    print("cached", a_ is b_)
P.remove_parametrizations(lin, "weight", leave_parametrized=True)
print("removed", P.is_parametrized(lin), torch.allclose(lin.weight, lin.weight.T))

wn = parametrizations.weight_norm(nn.Linear(3, 2).double(), dim=0)
fill(wn)
sn = parametrizations.spectral_norm(nn.Linear(5, 4).double(), n_power_iterations=3)
fill(sn)
with torch.no_grad():
    u0 = torch.from_numpy(rng.standard_normal(4))
    v0 = torch.from_numpy(rng.standard_normal(5))
    sn.parametrizations.weight[0]._u.copy_(u0 / u0.norm())
    sn.parametrizations.weight[0]._v.copy_(v0 / v0.norm())
sn.eval()
sig = torch.linalg.matrix_norm(sn.weight, ord=2)
print("norms", f(wn.weight.norm(dim=1)), f(wn.parametrizations.weight.original0.flatten()),
      sorted(wn.state_dict().keys()), f"{sig.item():.6f}",
      sorted(k for k in sn.state_dict().keys()))

# init (random: shapes / finiteness only)
w = torch.empty(6, 4)
checks = [nn.init.kaiming_uniform_(w, a=5 ** 0.5), nn.init.kaiming_normal_(w, mode="fan_out",
          nonlinearity="relu"), nn.init.xavier_normal_(w), nn.init.xavier_uniform_(w, gain=nn.init.calculate_gain("tanh")),
          nn.init.orthogonal_(w), nn.init.trunc_normal_(w, std=0.02), nn.init.normal_(w, 0, 0.1),
          nn.init.uniform_(w, -0.1, 0.1), nn.init.zeros_(w), nn.init.ones_(w), nn.init.eye_(w)]
orth = nn.init.orthogonal_(torch.empty(4, 6))
print("init", [tuple(c.shape) for c in checks[:3]], all(torch.isfinite(c).all().item() for c in checks),
      torch.allclose(orth @ orth.T, torch.eye(4), atol=1e-5), f"{nn.init.calculate_gain('leaky_relu', 0.2):.10f}",
      nn.init._calculate_fan_in_and_fan_out(torch.empty(8, 3, 5)))

# state_dict round trips
sd = net.state_dict()
sd2 = {k: v for k, v in sd.items() if not k.startswith("head.")}
sd2["unused.weight"] = torch.zeros(2)
fresh = Net().double()
res = fresh.load_state_dict(sd2, strict=False)
try:
    fresh.load_state_dict(sd2)
    strict_err = "none"
except RuntimeError as e:
    strict_err = "Missing key(s)" in str(e) and "Unexpected key(s)" in str(e)
print("state", len(sd), sorted(res.missing_keys), res.unexpected_keys, strict_err,
      torch.equal(fresh.blocks[1].fc.weight, net.blocks[1].fc.weight), "blocks.0.cache" in sd,
      sd["blocks.0.steps"].item(), sd["stem.1.num_batches_tracked"].dtype == torch.long)

# dtypes, deepcopy
twin = copy.deepcopy(net)
with torch.no_grad():
    twin.head.bias.add_(1.0)
dts = lambda m: sorted({str(p.dtype).split(".")[-1] for p in m.parameters()})
half = copy.deepcopy(net).half()
print("dtypes", dts(net.float()), dts(net.to(torch.float64)), dts(half), dts(net.double()),
      str(net.blocks[0].steps.dtype).split(".")[-1], str(half.stem[1].running_mean.dtype).split(".")[-1],
      f"{(twin.head.bias - net.head.bias).sum().item():.6f}", twin.blocks[0].fc.weight is not net.blocks[0].fc.weight,
      next(net.parameters()).device.type, net.training, net.eval().training, net.blocks[0].training)

# grad-mode nesting
v = torch.ones(2, dtype=torch.float64, requires_grad=True)
modes = []
with torch.no_grad():
    modes.append((v * 2).requires_grad)
    with torch.enable_grad():
        modes.append((v * 2).requires_grad)
    modes.append(torch.is_grad_enabled())
with torch.inference_mode():
    t = v * 2
    # ember: Tensor.is_inference() is missing (AttributeError), and inference tensors carry no
    # restrictions afterwards (torch refuses them in backward / in-place outside the mode)
    modes += [t.requires_grad, torch.is_inference_mode_enabled()]
    with torch.inference_mode(False):
        modes.append((v * 2).requires_grad)
with torch.set_grad_enabled(False):
    modes.append((v * 2).requires_grad)
torch.set_grad_enabled(True)
modes.append((v * 2).requires_grad)


@torch.no_grad()
def ng(z):
    return z * 2


modes += [ng(v).requires_grad]
print("modes", modes)

# gradient penalty (WGAN-GP), higher-order grads, functional jacobian / hessian
critic = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1)).double()
fill(critic)
real = torch.from_numpy(rng.standard_normal((4, 3)))
fake = torch.from_numpy(rng.standard_normal((4, 3)))
alpha = torch.from_numpy(rng.random((4, 1)))
inter = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
score = critic(inter)
g, = torch.autograd.grad(score, inter, grad_outputs=torch.ones_like(score), create_graph=True)
gp = ((g.norm(2, dim=1) - 1) ** 2).mean()
(critic(fake).mean() - critic(real).mean() + 10 * gp).backward()
s = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
y3 = s.sin() * s ** 3
d1, = torch.autograd.grad(y3, s, create_graph=True)
d2, = torch.autograd.grad(d1, s, create_graph=True)
d3, = torch.autograd.grad(d2, s)
fn = lambda z: torch.stack([z[0] * z[1].exp(), z.pow(2).sum().sqrt(), (z[0] - z[2]).tanh()])
z0 = torch.tensor([0.3, -0.5, 1.2], dtype=torch.float64)
J = torch.autograd.functional.jacobian(fn, z0)
H = torch.autograd.functional.hessian(lambda z: (z ** 3).sum() + z[0] * z[1] * z[2], z0)
vjp = torch.autograd.functional.vjp(fn, z0, torch.ones(3, dtype=torch.float64))[1]
print("grads", f"{gp.item():.10f}", f"{critic[0].weight.grad.abs().sum().item():.10f}",
      f(torch.stack([d1, d2, d3])), f(J), f(H), f(vjp))

with torch.autograd.detect_anomaly():
    q = torch.tensor([1.0, 4.0], dtype=torch.float64, requires_grad=True)
    q.sqrt().sum().backward()
r = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True)
u = r * r
u.retain_grad()
w2 = u.cumsum(0)
w2.backward(torch.tensor([1.0, 0.0, 2.0], dtype=torch.float64))
print("retain", f(q.grad), f(u.grad), f(r.grad), u.is_leaf, r.grad_fn is None, w2.requires_grad)

# tensor utilities
A = torch.from_numpy(rng.standard_normal((4, 6)))
c3 = torch.chunk(A, 3, dim=1)
sp = torch.split(A, [1, 3], dim=0)
st = torch.stack(c3, dim=0)
es = torch.einsum("ij,kj->ik", A, A)
eb = torch.einsum("bij,bjk->bik", st, st.transpose(1, 2))
xs = torch.linspace(0, 1, 6, dtype=torch.float64)
print("utils", len(c3), tuple(c3[0].shape), [tuple(t.shape) for t in sp], tuple(st.shape),
      f"{es.trace().item():.10f}", f"{eb.sum().item():.10f}", f(A[0].cumsum(0)), f(A[0].diff()),
      f(A[0].diff(n=2)), f(torch.logcumsumexp(A[0], 0)), f"{torch.trapezoid(xs ** 2, xs).item():.10f}",
      f"{torch.trapezoid(xs ** 2, dx=0.2).item():.10f}", f(torch.cumulative_trapezoid(xs, xs)),
      f(torch.cumprod(A[1], 0)), f(torch.cummax(A[2], 0).values), torch.cummin(A[2], 0).indices.tolist(),
      [tuple(t.shape) for t in torch.tensor_split(A, 3, dim=1)], [tuple(t.shape) for t in A.unbind(0)][:1],
      tuple(torch.block_diag(A[:2, :2], A[:1, :3]).shape), f(torch.kron(A[:1, :2], A[:2, :1])))

# reprs
print("trepr", one(torch.tensor([[1.5, -2.25], [3.0, 4.125]])), one(torch.tensor([1, 2, 3])),
      one(torch.tensor([0.1, 0.25], requires_grad=True)), one(torch.tensor([True, False])),
      one(torch.tensor(2.5)), one(torch.tensor([1.0, 2.0]) * torch.tensor(3.0, requires_grad=True)),
      one(torch.zeros(2, 0)), one(torch.tensor([1e-6, 1.0])), one(torch.tensor([0.5, float("nan"), float("inf")])),
      one(torch.arange(6).reshape(2, 3)), one(torch.tensor([123.456, 0.001])))

# module reprs (compared as text)
mods = [nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False), nn.ConvTranspose2d(4, 2, 4, 2, 1),
        nn.MaxPool2d(2), nn.AdaptiveAvgPool2d((1, 1)), nn.GroupNorm(2, 8), nn.LayerNorm([4, 5]),
        nn.Embedding(10, 3, padding_idx=0), nn.LSTM(3, 4, 2, batch_first=True, bidirectional=True),
        nn.GRU(3, 4), nn.MultiheadAttention(8, 2, batch_first=True), nn.LeakyReLU(0.2), nn.PReLU(),
        nn.Upsample(scale_factor=2, mode="bilinear"), nn.Unflatten(1, (2, 3)), nn.Bilinear(2, 3, 4),
        nn.TransformerEncoderLayer(8, 2, 16, batch_first=True), nn.ReflectionPad1d(2), nn.RMSNorm(4),
        nn.CrossEntropyLoss(label_smoothing=0.1), nn.GELU(approximate="tanh"), nn.Softmax(dim=1)]
mods += [nn.EmbeddingBag(5, 2), nn.LPPool1d(2, 3, stride=2), nn.ZeroPad2d(1),
         nn.ConstantPad1d(2, 3.5), nn.Embedding(5, 2, sparse=True), nn.Hardshrink(),
         nn.Softshrink(0.3)]
seq = nn.Sequential(nn.Linear(2, 2), nn.Tanh())
seq.append(nn.Sigmoid())
seq.insert(0, nn.Identity())
print("mrepr", " ".join(one(m) for m in mods), one(seq), one(seq[1:]), one(nn.ModuleDict({"a": nn.ReLU()})))
torch.set_printoptions(sci_mode=False)
print("sci", one(torch.tensor([1e-5, 1.0])), one(torch.arange(2000.)))
torch.set_printoptions(sci_mode=None)
print("jit", torch.jit.is_scripting(), torch.jit.is_tracing())
torch.set_printoptions(precision=2)
p2 = one(torch.tensor([1.23456, 2.5]))
torch.set_printoptions(profile="default")
print("printopts", p2, one(torch.tensor([1.23456])))
