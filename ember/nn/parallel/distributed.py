"""DistributedDataParallel: gradients averaged over ranks in buckets, each bucket's all-reduce
started non-blocking from the autograd hooks as soon as its last gradient is ready."""
import contextlib
import json

import numpy as np

from ember.errors import EmberRuntimeError, EmberValueError
from ember.nn.modules.module import Module


class _Bucket:
    __slots__ = ("params", "offsets", "buffer", "pending", "ready", "used", "work", "index")

    def __init__(self, index, params, dtype):
        self.index = index
        self.params = params
        self.offsets = []
        off = 0
        for p in params:
            self.offsets.append(off)
            off += p._data.size
        self.buffer = np.zeros(off, dtype)
        self.ready = [False] * len(params)
        self.used = [True] * len(params)
        self.pending = len(params)
        self.work = None

    def reset(self):
        self.ready = [False] * len(self.params)
        self.used = [True] * len(self.params)
        self.pending = len(self.params)
        self.work = None

    def slice(self, i):
        p = self.params[i]
        return self.buffer[self.offsets[i]:self.offsets[i] + p._data.size]


class DistributedDataParallel(Module):
    """Data parallelism over the ranks of ``process_group`` (default: the world), as torch's.

    At construction the parameters and buffers of rank 0 are broadcast to every rank, after
    checking that every rank's model has the same parameters (EmberRuntimeError naming the rank
    that differs). During backward each parameter's gradient is copied into its bucket (buckets of
    about ``bucket_cap_mb`` MiB, filled in reverse parameter order); a full bucket's all-reduce
    starts at once, non-blocking, and all are waited for and averaged when backward ends.
    ``no_sync()`` accumulates local gradients without communication. With
    ``find_unused_parameters=True`` parameters that got no gradient count as zeros (their
    ``.grad`` stays None only when no rank used them); without it, such a parameter is an error.
    ``broadcast_buffers`` re-broadcasts rank 0's buffers at every forward."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True,
                 process_group=None, bucket_cap_mb=25, find_unused_parameters=False,
                 check_reduction=False, gradient_as_bucket_view=False, static_graph=False):
        super().__init__()
        import ember.distributed as dist
        from ember.distributed.group import world_group
        if device_ids not in (None, [], ["cpu"]) or output_device not in (None, "cpu"):
            raise EmberValueError("DistributedDataParallel: ember runs on the CPU; device_ids and "
                                  f"output_device must be None, got {device_ids!r}, "
                                  f"{output_device!r}")
        if bucket_cap_mb is None or bucket_cap_mb <= 0:
            raise EmberValueError(f"DistributedDataParallel: bucket_cap_mb must be > 0, got "
                                  f"{bucket_cap_mb!r}")
        self.module = module
        object.__setattr__(self, "process_group",
                           world_group("DistributedDataParallel") if process_group is None
                           else process_group)
        object.__setattr__(self, "_dist", dist)
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.require_backward_grad_sync = True
        self.bucket_cap_mb = bucket_cap_mb
        self.dim = dim
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        self._param_names = {id(p): n for n, p in named}
        self._check_same_model(named)
        self._sync_module_states()
        self._build_buckets([p for _, p in named], int(bucket_cap_mb * 1024 * 1024))
        self._armed = False
        self._running = False
        self._unused = []
        self._handles = [p.register_post_accumulate_grad_hook(self._grad_ready)
                         for _, p in named]

    # ---- construction -----------------------------------------------------------------------
    def _check_same_model(self, named):
        from ember.distributed.objects import allgather_bytes
        g = self.process_group
        desc = [[n, list(p.shape), str(p._data.dtype)] for n, p in named]
        data = np.frombuffer(json.dumps(desc).encode(), np.uint8)
        every = [json.loads(bytes(b).decode())
                 for b in allgather_bytes(g, data, None, "DistributedDataParallel")]
        ref = every[0]
        for r, d in enumerate(every[1:], 1):
            if d == ref:
                continue
            rank = g.ranks[r]
            if len(d) != len(ref):
                raise EmberRuntimeError(
                    f"DistributedDataParallel: rank {rank} has {len(d)} parameters that require "
                    f"grad but rank {g.ranks[0]} has {len(ref)}; every rank must build the same "
                    "model")
            for (n0, s0, t0), (n1, s1, t1) in zip(ref, d):
                if (n0, s0, t0) != (n1, s1, t1):
                    raise EmberRuntimeError(
                        f"DistributedDataParallel: parameter {n1!r} on rank {rank} has shape "
                        f"{tuple(s1)} and dtype {t1}, but rank {g.ranks[0]} has {n0!r} with shape "
                        f"{tuple(s0)} and dtype {t0}; every rank must build the same model")

    def _sync_module_states(self):
        g = self.process_group
        if g.size() == 1:
            return
        src = g.ranks[0]
        for t in list(self.module.parameters()) + list(self.module.buffers()):
            self._dist.broadcast(t, src=src, group=g)

    def _build_buckets(self, params, cap):
        self._buckets = []
        self._where = {}
        current, size, dtype = [], 0, None
        for p in reversed(params):
            nbytes = p._data.nbytes
            if current and (size + nbytes > cap or p._data.dtype != dtype):
                self._buckets.append(_Bucket(len(self._buckets), current, dtype))
                current, size = [], 0
            current.append(p)
            size += nbytes
            dtype = p._data.dtype
        if current:
            self._buckets.append(_Bucket(len(self._buckets), current, dtype))
        for b in self._buckets:
            for i, p in enumerate(b.params):
                self._where[id(p)] = (b, i)

    # ---- training ----------------------------------------------------------------------------
    @contextlib.contextmanager
    def no_sync(self):
        """Within this context backward accumulates local gradients without communication; the
        first backward after it averages the accumulated gradients."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    def forward(self, *args, **kwargs):
        from ember.autograd.grad_mode import is_grad_enabled
        g = self.process_group
        if self.broadcast_buffers and g.size() > 1:
            src = g.ranks[0]
            for b in self.module.buffers():
                self._dist.broadcast(b, src=src, group=g)
        self._armed = is_grad_enabled() and self.require_backward_grad_sync
        out = self.module(*args, **kwargs)
        if self._armed and self.find_unused_parameters:
            self._unused = self._find_unused(out)
        return out

    def _find_unused(self, out):
        """The parameters the autograd graph of ``out`` does not reach (as torch's
        find_unused_parameters): they are marked ready, as zeros, when backward starts."""
        from ember.autograd.node import graph_leaves
        from ember.tensor import Tensor
        outputs, todo = [], [out]
        while todo:
            o = todo.pop()
            if isinstance(o, Tensor):
                outputs.append(o)
            elif isinstance(o, (list, tuple)):
                todo.extend(o)
            elif isinstance(o, dict):
                todo.extend(o.values())
        reached = {id(v) for v in graph_leaves(outputs)}
        return [(b, i) for b in self._buckets for i, p in enumerate(b.params)
                if id(p) not in reached]

    def _grad_ready(self, p):
        if not self._armed:
            return
        if not self._running:
            from ember.autograd.engine import queue_callback
            self._running = True
            self._next = 0
            for b in self._buckets:
                b.reset()
            queue_callback(self._finish_backward)
            for b, i in self._unused:
                self._mark_unused(b, i)
        b, i = self._where[id(p)]
        if b.ready[i]:
            return
        b.slice(i)[...] = p.grad._data.reshape(-1)
        b.ready[i] = True
        b.pending -= 1
        self._launch_ready()
        # MPI progresses non-blocking collectives only inside MPI calls: poke the ones in flight
        for k in range(self._next):
            w = self._buckets[k].work
            if w is not None and not w._done:
                w.is_completed()

    def _mark_unused(self, b, i):
        if not b.ready[i]:
            b.slice(i)[...] = 0
            b.ready[i] = True
            b.used[i] = False
            b.pending -= 1

    def _launch_ready(self):
        """Start the all-reduce of every full bucket, in bucket order (the same on every rank,
        as MPI requires of non-blocking collectives)."""
        from ember.tensor import Tensor
        while self._next < len(self._buckets) and self._buckets[self._next].pending == 0:
            b = self._buckets[self._next]
            b.work = self._dist.all_reduce(Tensor._make(b.buffer), group=self.process_group,
                                           async_op=True)
            self._next += 1

    def _finish_backward(self):
        self._running = False
        self._armed = False
        missing = [(b, i) for b in self._buckets for i in range(len(b.params)) if not b.ready[i]]
        if missing and not self.find_unused_parameters:
            for b in self._buckets:
                if b.work is not None:
                    b.work.wait()
            names = [self._param_names[id(b.params[i])] for b, i in missing]
            raise EmberRuntimeError(
                f"DistributedDataParallel: parameters {names} received no gradient in this "
                "backward; pass find_unused_parameters=True to DistributedDataParallel when part "
                "of the model may be unused")
        used = None
        if self.find_unused_parameters:
            from ember.tensor import Tensor
            for b, i in missing:
                self._mark_unused(b, i)
            self._launch_ready()
            used = np.concatenate([np.array(b.used, np.uint8) for b in self._buckets])
            self._dist.all_reduce(Tensor._make(used), op="MAX", group=self.process_group)
        n = self.process_group.size()
        k = 0
        from ember.tensor import Tensor
        for b in self._buckets:
            b.work.wait()
            b.buffer /= n
            for i, p in enumerate(b.params):
                flat_used = used is None or used[k]
                k += 1
                src = b.slice(i).reshape(p._data.shape)
                if p.grad is None:
                    if flat_used:
                        p.grad = Tensor._make(src.copy())
                    continue
                arr = p.grad._data
                if arr.flags.writeable and arr.shape == src.shape:
                    arr[...] = src
                    p.grad._bump()
                else:
                    p.grad = Tensor._make(src.copy())

    def __getstate__(self):
        raise EmberRuntimeError("DistributedDataParallel cannot be pickled; save "
                                "ddp.module.state_dict() (or ddp.state_dict()) instead")
