"""``SparseAdam``: torch's lazy Adam for the gradients of ``nn.Embedding(sparse=True)``.

torch's ``nn.Embedding(sparse=True)`` produces a sparse COO gradient holding the looked-up rows,
and SparseAdam updates the moments and the parameter on those rows only. ember's gradients are
dense (docs/optim.md), so the rows updated are the rows of the gradient (along dimension 0)
that hold a nonzero value: the rows a lookup reached, except one whose gradient is exactly
zero in every element (torch would still decay that row's moments and move it).
"""
import math

import numpy as np

from ember.optim.optimizer import Optimizer
from ember.tensor import Tensor
from ember.errors import EmberValueError


def _check_positive(name, value):
    if isinstance(value, Tensor) and value.numel() != 1:
        raise EmberValueError("Tensor lr must be 1-element")
    if not 0.0 < value:
        raise EmberValueError(f"Invalid {name}: {value}")


class SparseAdam(Optimizer):
    """Adam whose moments and parameters change only where the gradient is nonzero (whole rows
    along dimension 0), with torch's ``step`` counted per parameter. Raises ValueError for an
    invalid lr, eps or betas, a sparse parameter or a complex one, as torch."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False):
        _check_positive("learning rate", lr)
        _check_positive("epsilon value", eps)
        if not 0.0 <= betas[0] < 1.0:
            raise EmberValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise EmberValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, maximize=maximize))
        sparse_params, complex_params = [], []
        for index, group in enumerate(self.param_groups):
            for d_index, p in enumerate(group["params"]):
                if p.is_sparse:
                    sparse_params.append([index, d_index])
                if p.is_complex():
                    complex_params.append([index, d_index])
        if sparse_params:
            raise EmberValueError(f"Sparse params at indices {sparse_params}: SparseAdam requires "
                                  "dense parameter tensors")
        if complex_params:
            raise EmberValueError(f"Complex params at indices {complex_params}: SparseAdam does "
                                  "not support complex parameters")

    def step(self, closure=None):
        """One lazy Adam update of every parameter with a gradient; returns the closure's
        loss."""
        loss = self._closure(closure)
        for group in self.param_groups:
            b1, b2 = group["betas"]
            lr = float(group["lr"])
            for p in group["params"]:
                if p.grad is None:
                    continue
                st = self.state[p]
                if not st:
                    st["step"] = 0
                    st["exp_avg"] = Tensor._make(np.zeros_like(p._data))
                    st["exp_avg_sq"] = Tensor._make(np.zeros_like(p._data))
                st["step"] += 1
                grad = p.grad._data
                if group["maximize"]:
                    grad = -grad
                rows = _touched_rows(grad)
                if rows is None:
                    continue
                x, m, v = p._data, st["exp_avg"]._data, st["exp_avg_sq"]._data
                g, old_m, old_v = grad[rows], m[rows], v[rows]
                # torch's order of operations (torch.optim._functional.sparse_adam)
                m_update = (g - old_m) * (1 - b1)
                v_update = (g * g - old_v) * (1 - b2)
                m[rows] = old_m + m_update
                v[rows] = old_v + v_update
                numer = m_update + old_m
                denom = np.sqrt(v_update + old_v) + group["eps"]
                step = st["step"]
                step_size = lr * math.sqrt(1 - b2 ** step) / (1 - b1 ** step)
                x[rows] = x[rows] + -step_size * (numer / denom)
                p._bump()
        return loss


def _touched_rows(grad):
    """The indices along dimension 0 of the rows of ``grad`` holding a nonzero value (every
    element of a 0-d or 1-d gradient is its own row); None when there is none."""
    if grad.ndim == 0:
        return () if grad != 0 else None
    nonzero = grad != 0
    if grad.ndim > 1:
        nonzero = nonzero.reshape(grad.shape[0], -1).any(axis=1)
    rows = np.flatnonzero(nonzero)
    return rows if rows.size else None
