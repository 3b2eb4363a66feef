"""SyncBatchNorm: batch normalisation whose statistics span every rank's batch (on the CPU)."""
import numpy as np

from ember.autograd.function import Function
from ember.autograd.grad_mode import no_grad
from ember.errors import EmberValueError
from ember.nn.modules.normalization import _BatchNorm


def _allreduce(arr, group):
    from ember.distributed.collectives import all_reduce
    from ember.tensor import Tensor
    all_reduce(Tensor._make(arr), group=group)
    return arr


class _SyncBN(Function):
    """Forward: global mean (all-reduce of sum and count) then global biased variance
    (all-reduce of the squared deviations). Backward: all-reduce of sum(dy) and sum(dy * xmu);
    weight and bias gradients stay local (summed over ranks by DDP's averaging of the loss)."""

    @staticmethod
    def forward(ctx, x, weight, bias, eps, group, stats):
        a = x._data
        axes = (0,) + tuple(range(2, a.ndim))
        shape = (1, -1) + (1,) * (a.ndim - 2)
        acc = np.float64 if a.dtype == np.float64 else np.float32
        local = np.concatenate([a.sum(axes, dtype=acc), [a.size / a.shape[1]]]).astype(np.float64)
        tot = _allreduce(local, group)
        count = tot[-1]
        if count <= 1:
            raise EmberValueError("SyncBatchNorm: expected more than 1 value per channel over all "
                                  f"ranks when training, got input of size {tuple(x.shape)}")
        mean = (tot[:-1] / count).astype(acc)
        xmu = a - mean.reshape(shape)
        var = _allreduce((xmu * xmu).sum(axes, dtype=np.float64), group) / count
        invstd = (1.0 / np.sqrt(var + eps)).astype(acc)
        xhat = xmu * invstd.reshape(shape)
        w = None if weight is None else weight._data
        y = xhat if w is None else xhat * w.reshape(shape)
        if bias is not None:
            y = y + bias._data.reshape(shape)
        ctx.stats = (xhat, invstd, count, axes, shape, w, group, weight is not None,
                     bias is not None)
        from ember.tensor import Tensor
        stats.extend((mean, var * count / (count - 1)))
        return Tensor._make(y.astype(a.dtype, copy=False))

    @staticmethod
    def backward(ctx, dy):
        from ember.tensor import Tensor
        xhat, invstd, count, axes, shape, w, group, has_w, has_b = ctx.stats
        g = dy._data
        local_dy = g.sum(axes, dtype=np.float64)
        local_dyx = (g * xhat).sum(axes, dtype=np.float64)
        both = _allreduce(np.concatenate([local_dy, local_dyx]), group)
        c = g.shape[1]
        mean_dy = (both[:c] / count).reshape(shape)
        mean_dyx = (both[c:] / count).reshape(shape)
        scale = invstd.reshape(shape) if w is None else (invstd * w).reshape(shape)
        dx = ((g - mean_dy - xhat * mean_dyx) * scale).astype(g.dtype, copy=False)
        dw = Tensor._make(local_dyx.astype(g.dtype)) if has_w else None
        db = Tensor._make(local_dy.astype(g.dtype)) if has_b else None
        return Tensor._make(dx), dw, db, None, None, None


class SyncBatchNorm(_BatchNorm):
    """BatchNorm over (N, C, *) whose batch statistics (and their gradients) are all-reduced
    over ``process_group`` (default: the world), so N ranks normalise as one batch. Unlike
    torch's, it runs on the CPU. Eval mode, or a world of one rank, is plain batch_norm.
    Raises EmberValueError for input of fewer than 2 dimensions."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_group=None, device=None, dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)
        object.__setattr__(self, "process_group", process_group)

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise EmberValueError(f"SyncBatchNorm: expected at least 2D input (got "
                                  f"{input.dim()}D input)")

    def forward(self, input):
        import ember.distributed as dist
        self._check_input_dim(input)
        if input.shape[1] != self.num_features:
            raise EmberValueError(f"SyncBatchNorm: input has {input.shape[1]} channels, expected "
                                  f"{self.num_features}")
        group = self.process_group
        world = dist.get_world_size(group) if dist.is_initialized() else 1
        if not self.training or world == 1:
            return super().forward(input)
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.track_running_stats and self.num_batches_tracked is not None:
            with no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:
                momentum = 1.0 / float(self.num_batches_tracked)
        stats = []
        out = _SyncBN.apply(input, self.weight, self.bias, self.eps, group, stats)
        if self.track_running_stats:
            mean, var = stats
            rm, rv = self.running_mean._data, self.running_var._data
            rm[...] = (1 - momentum) * rm + momentum * mean
            rv[...] = (1 - momentum) * rv + momentum * var
            self.running_mean._bump()
            self.running_var._bump()
        return out

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """Return ``module`` with every BatchNorm*d replaced by a SyncBatchNorm holding the same
        parameters and running statistics."""
        from ember.nn.modules.normalization import BatchNorm1d, BatchNorm2d, BatchNorm3d
        out = module
        if isinstance(module, (BatchNorm1d, BatchNorm2d, BatchNorm3d)):
            out = cls(module.num_features, module.eps, module.momentum, module.affine,
                      module.track_running_stats, process_group)
            if module.affine:
                with no_grad():
                    out.weight = module.weight
                    out.bias = module.bias
            out.running_mean = module.running_mean
            out.running_var = module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return out
