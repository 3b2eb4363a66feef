"""Framework-level idioms: custom Functions, hooks, checkpointing, parametrizations, init."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import parametrizations
from torch.utils.checkpoint import checkpoint

rng = np.random.default_rng(3)


class ClampGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, limit):
        ctx.save_for_backward(x)
        ctx.limit = limit
        return x.tanh()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return (g * (1 - x.tanh() ** 2)).clamp(-ctx.limit, ctx.limit), None


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleDict({"a": nn.Linear(6, 8), "b": nn.Linear(8, 8),
                                     "c": nn.Linear(8, 3)})
        self.register_buffer("scale", torch.tensor(0.5, dtype=torch.float64), persistent=False)
        parametrizations.weight_norm(self.layers["b"])

    def forward(self, x):
        h = ClampGrad.apply(self.layers["a"](x), 0.1)
        h = checkpoint(lambda t: F.silu(self.layers["b"](t)), h, use_reentrant=False)
        return self.layers["c"](h) * self.scale


def init_weights(m):
    if isinstance(m, nn.Linear):
        with torch.no_grad():
            m.weight.copy_(torch.tensor(rng.standard_normal(tuple(m.weight.shape)) * 0.3))
            nn.init.constant_(m.bias, 0.01)


net = Net().double()
net.apply(init_weights)
with torch.no_grad():
    g, v = net.layers["b"].parametrizations.weight.original0, \
        net.layers["b"].parametrizations.weight.original1
    g.copy_(torch.tensor(rng.random(tuple(g.shape)) + 0.5))
    v.copy_(torch.tensor(rng.standard_normal(tuple(v.shape))))
feats = {}
handle = net.layers["b"].register_forward_hook(lambda m, i, o: feats.__setitem__("b", o.detach()))
x = torch.tensor(rng.standard_normal((5, 6)), requires_grad=True)
out = net(x)
out.pow(2).sum().backward()
handle.remove()
net(x)
grads = {n: p.grad.abs().sum().item() for n, p in net.named_parameters()}
state = {k.replace("layers.", ""): v for k, v in net.state_dict().items()}
ok = torch.autograd.gradcheck(lambda t: ClampGrad.apply(t, 10.0), (x.detach().requires_grad_(),))


@torch.inference_mode()
def predict(model, inp):
    return model(inp).argmax(-1)


print("out", f"{out.sum().item():.12f}", f"{x.grad.abs().sum().item():.12f}")
print("grads", " ".join(f"{grads[n]:.12f}" for n in sorted(grads)))
print("keys", len(state), "scale" not in state, ok)
print("hook", tuple(feats["b"].shape), f"{feats['b'].sum().item():.12f}")
print("pred", predict(net, x).tolist())
