"""DDP on N ranks, each on its slice of the global batch, against one process on the whole batch:
gradients (float64, 1e-10) and parameters after SGD and Adam steps; tiny and large buckets;
no_sync accumulation; unused parameters; buffers broadcast from rank 0 at each forward;
state_dict keys."""
import numpy as np

import ember
import ember.distributed as dist
from ember import nn
from ember.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("mpi")
r, n = dist.get_rank(), dist.get_world_size()
ember.set_default_dtype(ember.float64)
B = 4 * n


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(5, 7)
        self.b = nn.Linear(7, 3)
        self.extra = nn.Linear(3, 3)   # used only when asked
        self.never = nn.Linear(2, 2)   # never used

    def forward(self, x, use_extra=False):
        h = self.b(ember.tanh(self.a(x)))
        return self.extra(h) if use_extra else h


def make(seed):
    ember.manual_seed(seed + 17 * r)   # different init per rank: DDP must broadcast rank 0's
    return Net()


def reference(seed):
    ember.manual_seed(seed)  # rank 0's init
    return Net()


rng = np.random.default_rng(1)
X = ember.from_numpy(rng.standard_normal((3, B, 5)))
Y = ember.from_numpy(rng.standard_normal((3, B, 3)))
sl = slice(r * (B // n), (r + 1) * (B // n))


def loss_of(model, x, y, **kw):
    return ((model(x, **kw) - y) ** 2).mean()


def close(a, b, what, tol=1e-10):
    a = a.detach().numpy() if hasattr(a, "numpy") else a
    b = b.detach().numpy() if hasattr(b, "numpy") else b
    assert np.allclose(a, b, rtol=tol, atol=tol), (what, r, np.abs(a - b).max())


def params(m):
    return [p for name, p in m.named_parameters() if not name.startswith(("never", "extra"))]


for cap in (1e-5, 25):
    for opt_name in ("SGD", "Adam"):
        ddp = DDP(make(1), bucket_cap_mb=cap, find_unused_parameters=True)
        if cap == 1e-5:
            assert len(ddp._buckets) == 8, len(ddp._buckets)  # one parameter per bucket
        else:
            assert len(ddp._buckets) == 1
        ref = reference(1)
        for p, q in zip(ddp.module.parameters(), ref.parameters()):
            close(p, q, "broadcast at construction", 0)
        Opt = getattr(ember.optim, opt_name)
        opt, ropt = Opt(ddp.parameters(), lr=0.05), Opt(ref.parameters(), lr=0.05)
        for step in range(3):
            opt.zero_grad()
            ropt.zero_grad()
            loss_of(ddp, X[step][sl], Y[step][sl]).backward()
            loss_of(ref, X[step], Y[step]).backward()
            for p, q in zip(params(ddp.module), params(ref)):
                close(p.grad, q.grad, f"grad {opt_name} cap={cap} step {step}")
            assert ddp.module.never.weight.grad is None and ddp.module.extra.weight.grad is None
            opt.step()
            ropt.step()
        for p, q in zip(ddp.module.parameters(), ref.parameters()):
            close(p, q, f"params after 3 {opt_name} steps cap={cap}")

# overlap: with one parameter per bucket every all-reduce has started, from the hooks, before
# backward ends; the buckets hold the parameters in reverse order
ddp = DDP(make(6), bucket_cap_mb=1e-5, find_unused_parameters=True)
assert [b.params[0] for b in ddp._buckets] == list(ddp.module.parameters())[::-1]
started = []
finish = ddp._finish_backward
ddp._finish_backward = lambda: (started.append(sum(b.work is not None for b in ddp._buckets)),
                                finish())
loss_of(ddp, X[0][sl], Y[0][sl]).backward()
assert started == [8], started  # all launched from hooks, unused ones at the first

# no_sync: two local micro-batches accumulated, then one synchronised
ddp, ref = DDP(make(2), bucket_cap_mb=1e-4, find_unused_parameters=True), reference(2)
with ddp.no_sync():
    loss_of(ddp, X[0][sl], Y[0][sl]).backward()
    local = [p.grad.numpy().copy() for p in params(ddp.module)]
loss_of(ref, X[0][sl], Y[0][sl]).backward()
for a, q in zip(local, params(ref)):
    close(a, q.grad, "no_sync leaves local grads")   # nothing was averaged
for q in ref.parameters():
    q.grad = None
loss_of(ddp, X[1][sl], Y[1][sl]).backward()
loss_of(ref, X[0], Y[0]).backward()
loss_of(ref, X[1], Y[1]).backward()
for p, q in zip(params(ddp.module), params(ref)):
    close(p.grad, q.grad, "no_sync accumulation then sync")

# a parameter used on rank 0 only: every rank gets the average (rank 0's gradient / n)
ddp, ref = DDP(make(3), find_unused_parameters=True), reference(3)
loss_of(ddp, X[0][sl], Y[0][sl], use_extra=(r == 0)).backward()
loss_of(ref, X[0][slice(0, B // n)], ember.zeros(B // n, 3) + Y[0][slice(0, B // n)],
        use_extra=True).backward()
close(ddp.module.extra.weight.grad, ref.extra.weight.grad / n, "partly used parameter")
assert ddp.module.never.weight.grad is None

# without find_unused_parameters a parameter without gradient is an error
ddp = DDP(make(4))
try:
    loss_of(ddp, X[0][sl], Y[0][sl]).backward()
except RuntimeError as e:
    assert "find_unused_parameters" in str(e) and "never.weight" in str(e), e
else:
    raise AssertionError("missing gradient accepted")

# buffers: each forward first broadcasts rank 0's (BatchNorm statistics), as torch does
ember.manual_seed(7 + r)
bn_ddp = DDP(nn.Sequential(nn.Linear(5, 4), nn.BatchNorm1d(4)))
bn_ref = nn.Sequential(nn.Linear(5, 4), nn.BatchNorm1d(4))
bn_ref.load_state_dict(bn_ddp.module.state_dict())   # rank 0's, broadcast at construction
xs = [ember.from_numpy(rng.standard_normal((4, 5)) + k) for k in range(n)]  # a batch per rank
bn_ddp(xs[r]).sum().backward()
rm = bn_ddp.module[1].running_mean.numpy().copy()
every = ember.zeros(n, 4)
dist.all_gather_into_tensor(every, ember.from_numpy(rm))
assert n == 1 or not np.allclose(every[0].numpy(), every[1].numpy())  # diverged locally
bn_ref(xs[0])                      # rank 0's statistics after its first batch
bn_ddp(xs[r]).sum().backward()     # start: rank 0's buffers, then this rank's batch
bn_ref(xs[r])
close(bn_ddp.module[1].running_mean, bn_ref[1].running_mean, "running_mean from rank 0")
close(bn_ddp.module[1].running_var, bn_ref[1].running_var, "running_var from rank 0")
assert int(bn_ddp.module[1].num_batches_tracked) == 2

keys = list(DDP(make(5), find_unused_parameters=True).state_dict())
assert keys[0] == "module.a.weight", keys
dist.destroy_process_group()
print(f"OK rank {r}")
