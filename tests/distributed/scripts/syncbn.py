"""SyncBatchNorm over N ranks (unequal local batches) equals BatchNorm over the whole batch:
forward, input gradient, summed weight/bias gradients, running statistics."""
import numpy as np

import ember
import ember.distributed as dist
from ember import nn

dist.init_process_group("mpi")
r, n = dist.get_rank(), dist.get_world_size()
rng = np.random.default_rng(0)
sizes = [3 + 2 * k for k in range(n)]
X = rng.standard_normal((sum(sizes), 4, 5)) * 3 + 1
G = rng.standard_normal(X.shape)
lo = sum(sizes[:r])
sl = slice(lo, lo + sizes[r])
W, B = rng.standard_normal(4), rng.standard_normal(4)


def close(a, b, what):
    a = a.detach().numpy() if hasattr(a, "detach") else a
    b = b.detach().numpy() if hasattr(b, "detach") else b
    assert np.allclose(a, b, rtol=1e-10, atol=1e-10), (what, r, np.abs(a - b).max())


ref = nn.BatchNorm1d(4, momentum=0.3).double()
sync = nn.SyncBatchNorm.convert_sync_batchnorm(nn.Sequential(nn.BatchNorm1d(4, momentum=0.3))).double()
bn = sync[0]
assert type(bn).__name__ == "SyncBatchNorm"
for m in (ref, bn):
    m.weight.data = ember.from_numpy(W.copy())
    m.bias.data = ember.from_numpy(B.copy())
for step in range(2):
    x_all = ember.from_numpy(X * (step + 1)).requires_grad_()
    x = ember.from_numpy(X[sl] * (step + 1)).requires_grad_()
    y_all, y = ref(x_all), sync(x)
    close(y, y_all[sl], f"forward step {step}")
    (y_all * ember.from_numpy(G)).sum().backward()
    (y * ember.from_numpy(G[sl])).sum().backward()
    close(x.grad, x_all.grad[sl], "input gradient")
    for p, q in ((bn.weight, ref.weight), (bn.bias, ref.bias)):
        g = p.grad.detach().clone()
        dist.all_reduce(g)
        close(g, q.grad, "parameter gradient summed over ranks")
    close(bn.running_mean, ref.running_mean, "running_mean")
    close(bn.running_var, ref.running_var, "running_var")
    for m in (ref, bn):
        m.zero_grad()
sync.eval()
ref.eval()
close(sync(ember.from_numpy(X[sl])), ref(ember.from_numpy(X))[sl], "eval forward")
print(f"OK rank {r}")
