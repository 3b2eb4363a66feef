"""Every collective against NumPy on every dtype, contiguous and not, on N ranks."""
import numpy as np

import ember
import ember.distributed as dist
from ember.distributed import ReduceOp

dist.init_process_group("mpi")
r, n = dist.get_rank(), dist.get_world_size()
DTYPES = [np.float32, np.float64, np.float16, np.complex64, np.complex128, np.int64, np.int32,
          np.int16, np.int8, np.uint8, np.bool_]


def value(rank, dt, shape=(3, 4)):
    a = (np.arange(np.prod(shape)).reshape(shape) % 5 + rank + 1)
    if dt == np.bool_:
        return (a + rank) % 2 == 0
    if np.issubdtype(dt, np.complexfloating):
        return (a + 1j * (a % 3 - 1)).astype(dt)
    return a.astype(dt)


def mean_of(vals, dt):
    m = np.stack(vals).astype(np.complex128).mean(0)
    return (m if np.issubdtype(dt, np.complexfloating) else m.real).astype(dt)


def check(got, want, what):
    got = got.numpy() if hasattr(got, "numpy") else got
    assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
    tol = 1e-3 if want.dtype == np.float16 else 0
    assert np.allclose(got.astype(np.complex128), want.astype(np.complex128), rtol=tol, atol=tol), \
        (what, r, got, want)


every = {dt: [value(k, dt) for k in range(n)] for dt in DTYPES}
for dt in DTYPES:
    vals = every[dt]
    ops = {"SUM": np.sum, "MIN": np.min, "MAX": np.max, "PRODUCT": np.prod}
    if dt == np.bool_:
        ops = {"SUM": np.any, "MAX": np.any, "MIN": np.all, "PRODUCT": np.all}
    if np.issubdtype(dt, np.complexfloating):
        ops = {"SUM": np.sum, "PRODUCT": np.prod}
        for name in ("MIN", "MAX"):
            try:
                dist.all_reduce(ember.from_numpy(value(r, dt)), op=getattr(ReduceOp, name))
            except TypeError as e:
                assert "not defined for complex" in str(e), e
            else:
                raise AssertionError(f"complex {name} accepted")
    for name, f in ops.items():
        want = f(np.stack(vals), axis=0).astype(dt)
        # the first contiguous call checks op and dtype, the second takes the fast path
        for layout in ("contiguous", "contiguous", "transposed"):
            base = value(r, dt).T.copy() if layout == "transposed" else value(r, dt)
            t = ember.from_numpy(base.copy()).t() if layout == "transposed" else ember.from_numpy(base.copy())
            dist.all_reduce(t, op=getattr(ReduceOp, name))
            check(t, want, f"all_reduce {name} {dt} {layout}")
    if np.issubdtype(dt, np.inexact):
        t = ember.from_numpy(value(r, dt))
        w = dist.all_reduce(t, op=ReduceOp.AVG, async_op=True)
        w.wait()
        assert w.is_completed()
        check(t, mean_of(vals, dt), f"AVG {dt}")
        for _ in range(2):  # checked path, then fast path
            t = ember.from_numpy(value(r, dt))
            assert dist.all_reduce(t, op=ReduceOp.AVG) is None
            check(t, mean_of(vals, dt), f"AVG {dt}")
    # broadcast from the last rank
    t = ember.from_numpy(value(r, dt))
    dist.broadcast(t, src=n - 1)
    check(t, vals[n - 1], f"broadcast {dt}")
    # all_gather (list) and into a tensor (cat and stack shapes)
    outs = [ember.from_numpy(np.zeros((3, 4), dt)) for _ in range(n)]
    dist.all_gather(outs, ember.from_numpy(value(r, dt)).t().t())
    for k in range(n):
        check(outs[k], vals[k], f"all_gather {dt}")
    out = ember.from_numpy(np.zeros((3 * n, 4), dt))
    dist.all_gather_into_tensor(out, ember.from_numpy(value(r, dt)))
    check(out, np.concatenate(vals), f"all_gather_into_tensor {dt}")
    # gather / scatter to and from rank 0
    lst = [ember.from_numpy(np.zeros((3, 4), dt)) for _ in range(n)] if r == 0 else None
    dist.gather(ember.from_numpy(value(r, dt)), lst, dst=0)
    if r == 0:
        for k in range(n):
            check(lst[k], vals[k], f"gather {dt}")
    t = ember.from_numpy(np.zeros((3, 4), dt))
    dist.scatter(t, [ember.from_numpy(v) for v in vals] if r == 0 else None, src=0)
    check(t, vals[r], f"scatter {dt}")
    # all_to_all_single, uneven: rank i sends rank j i + j + 1 rows of 2 (value 10 i + j), from
    # a non-contiguous input (a transposed view), into a contiguous output and a strided one
    ins = np.concatenate([np.full((r + j + 1, 2), r * 10 + j) for j in range(n)]).astype(dt)
    want = np.concatenate([np.full((j + r + 1, 2), j * 10 + r) for j in range(n)]).astype(dt)
    src = ember.from_numpy(ins.T.copy()).t()
    assert not src.is_contiguous()
    for strided in (False, True):
        out = ember.from_numpy(np.zeros((len(want), 4 if strided else 2), dt))
        out = out[:, ::2] if strided else out
        w = dist.all_to_all_single(out, src, [j + r + 1 for j in range(n)],
                                   [r + j + 1 for j in range(n)], async_op=strided)
        if strided:
            w.wait()
        check(out, want, f"all_to_all_single {dt} strided={strided}")
    out = ember.from_numpy(np.zeros((n, 3), dt))   # equal splits by default
    dist.all_to_all_single(out, ember.from_numpy(np.stack([value(r, dt)[0, :3]] * n)))
    check(out, np.stack([value(k, dt)[0, :3] for k in range(n)]), f"all_to_all_single eq {dt}")
    # non-contiguous inputs and outputs of the other collectives
    outs = [ember.from_numpy(np.zeros((3, 6), dt))[:, ::2] for _ in range(n)]
    dist.all_gather(outs, ember.from_numpy(value(r, dt).T.copy()).t()[:, :3])
    for k in range(n):
        check(outs[k], vals[k][:, :3], f"strided all_gather {dt}")
    t = ember.from_numpy(np.zeros((3, 8), dt))[:, ::2]
    t.copy_(ember.from_numpy(value(r, dt)))
    dist.broadcast(t, src=0)
    check(t, vals[0], f"strided broadcast {dt}")
    t = ember.from_numpy(np.zeros((4, 3), dt)).t()
    dist.scatter(t, [ember.from_numpy(v) for v in vals] if r == 0 else None, src=0)
    check(t, vals[r], f"strided scatter {dt}")
    if dt == np.bool_:
        continue
    # reduce to rank 1 and reduce_scatter_tensor
    t = ember.from_numpy(value(r, dt))
    cplx = np.issubdtype(dt, np.complexfloating)
    dist.reduce(t, dst=n - 1, op=ReduceOp.SUM if cplx else ReduceOp.MAX)
    if r == n - 1:
        check(t, (np.sum if cplx else np.max)(np.stack(vals), 0), f"reduce {dt}")
    big = [np.concatenate([value(k, dt, (2, 3)) * (j + 1) for j in range(n)]) for k in range(n)]
    want = np.sum(np.stack(big), 0, dtype=dt)[2 * r:2 * r + 2]
    for strided in (False, True):
        out = ember.from_numpy(np.zeros((2, 3), dt))
        inp = ember.from_numpy(big[r].T.copy()).t() if strided else ember.from_numpy(big[r])
        dist.reduce_scatter_tensor(out, inp)
        check(out, want, f"reduce_scatter_tensor {dt} strided={strided}")
    # all_gather_into_tensor, stacked output
    out = ember.from_numpy(np.zeros((n, 3, 4), dt))
    dist.all_gather_into_tensor(out, ember.from_numpy(value(r, dt)))
    check(out, np.stack(vals), f"all_gather_into_tensor stacked {dt}")
    # all_to_all with uneven sizes: rank i sends i + j + 1 elements to rank j
    ins = [ember.from_numpy(np.full(r + j + 1, r * 10 + j, dt)) for j in range(n)]
    outs = [ember.from_numpy(np.zeros(j + r + 1, dt)) for j in range(n)]
    dist.all_to_all(outs, ins)
    for j in range(n):
        check(outs[j], np.full(j + r + 1, j * 10 + r, dt), f"all_to_all {dt}")

# zero copy: a contiguous tensor's own ndarray is MPI's buffer, reduced in place
t = ember.ones(1000, dtype=ember.float64)
arr, version = t._data, t._version
w = dist.all_reduce(t, async_op=True)
w.wait()
assert t._data is arr and arr[0] == n and t._version == version + 1
for _ in range(2):  # blocking, checked then fast path: in place too
    arr, version = t._data, t._version
    dist.all_reduce(t, op=ReduceOp.MAX)
    assert t._data is arr and arr[0] == n and t._version == version + 1
view = ember.zeros(4, 6, dtype=ember.float64)[:, ::2]   # non-contiguous: written back
view.fill_(r + 1.0)
dist.all_reduce(view, op=ReduceOp.MAX)
check(view, np.full((4, 3), float(n)), "non-contiguous all_reduce")

# async_op=True on every collective: a Work whose wait() leaves the result in place
vals = [value(k, np.float64) for k in range(n)]
works, checks = [], []
t1 = ember.from_numpy(value(r, np.float64))
works.append(dist.broadcast(t1, src=n - 1, async_op=True))
checks.append(lambda: check(t1, vals[n - 1], "async broadcast"))
t2 = ember.from_numpy(value(r, np.float64))
works.append(dist.reduce(t2, dst=0, op=ReduceOp.SUM, async_op=True))
checks.append(lambda: r != 0 or check(t2, np.sum(vals, 0), "async reduce"))
lst = [ember.zeros(3, 4, dtype=ember.float64) for _ in range(n)]
works.append(dist.all_gather(lst, ember.from_numpy(value(r, np.float64)), async_op=True))
checks.append(lambda: [check(lst[k], vals[k], "async all_gather") for k in range(n)])
cat = ember.zeros(3 * n, 4, dtype=ember.float64)
works.append(dist.all_gather_into_tensor(cat, ember.from_numpy(value(r, np.float64)),
                                         async_op=True))
checks.append(lambda: check(cat, np.concatenate(vals), "async all_gather_into_tensor"))
rs = ember.zeros(1, 4, dtype=ember.float64)
works.append(dist.reduce_scatter_tensor(rs, ember.from_numpy(value(r, np.float64, (n, 4))),
                                        async_op=True))
checks.append(lambda: check(rs, np.sum([value(k, np.float64, (n, 4)) for k in range(n)],
                                       0)[r:r + 1], "async reduce_scatter_tensor"))
gl = [ember.zeros(3, 4, dtype=ember.float64) for _ in range(n)] if r == 0 else None
works.append(dist.gather(ember.from_numpy(value(r, np.float64)), gl, dst=0, async_op=True))
checks.append(lambda: r != 0 or [check(gl[k], vals[k], "async gather") for k in range(n)])
sc = ember.zeros(3, 4, dtype=ember.float64)
works.append(dist.scatter(sc, [ember.from_numpy(v) for v in vals] if r == 0 else None, src=0,
                          async_op=True))
checks.append(lambda: check(sc, vals[r], "async scatter"))
a2a = [ember.zeros(2, dtype=ember.float64) for _ in range(n)]
works.append(dist.all_to_all(a2a, [ember.full((2,), float(10 * r + j), dtype=ember.float64)
                                   for j in range(n)], async_op=True))
checks.append(lambda: [check(a2a[j], np.full(2, 10.0 * j + r), "async all_to_all")
                       for j in range(n)])
works.append(dist.barrier(async_op=True))
checks.append(lambda: None)
for w, c in zip(works, checks):
    assert isinstance(w, dist.Work), w
    assert w.wait() is True and w.is_completed()
    c()

# point to point: a ring
t = ember.arange(5, dtype=ember.float64) + r
w = dist.isend(t, dst=(r + 1) % n)
got = ember.zeros(5, dtype=ember.float64)
src = dist.recv(got, src=None)
w.wait()
assert src == (r - 1) % n, src
check(got, np.arange(5.0) + (r - 1) % n, "send/recv")
got2 = ember.zeros(5, dtype=ember.float64)
w = dist.irecv(got2, src=(r - 1) % n)
dist.send(t, dst=(r + 1) % n)
w.wait()
check(got2, np.arange(5.0) + (r - 1) % n, "isend/irecv")

# groups: the even ranks
evens = list(range(0, n, 2))
g = dist.new_group(evens)
t = ember.tensor([float(r)])
dist.all_reduce(t, group=g)
if r in evens:
    assert dist.get_rank(g) == evens.index(r) and dist.get_world_size(g) == len(evens)
    check(t, np.array([float(sum(evens))], np.float32), "group all_reduce")
    dist.broadcast(t, src=evens[-1], group=g)
else:
    assert dist.get_rank(g) == -1
    check(t, np.array([float(r)], np.float32), "non-member untouched")

dist.barrier()
dist.destroy_process_group()
print(f"OK rank {r}")
