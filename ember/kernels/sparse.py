"""Index kernels of sparse COO tensors: ndarrays in, ndarrays out (no Tensor, no autograd).

A COO tensor's ``indices`` is an int64 array of shape ``(sparse_dim, nnz)``; its values are
handled by ``ember.sparse`` through differentiable ops, so these kernels compute only where each
value goes."""
import numpy as np


def flat_index(indices, shape):
    """Row-major positions (int64, shape ``(nnz,)``) of the columns of ``indices`` in an array
    of ``shape`` (the sparse dimensions)."""
    if indices.shape[0] == 0:
        return np.zeros(indices.shape[1], np.int64)
    return np.ravel_multi_index(tuple(indices), tuple(shape)).astype(np.int64, copy=False)


def coalesce(indices, shape):
    """Sorted unique columns of ``indices`` and, for every column, the position of its unique
    column: ``(unique_indices (sparse_dim, n_unique), inverse (nnz,))``."""
    flat = flat_index(indices, shape)
    uniq, inverse = np.unique(flat, return_inverse=True)
    out = np.stack(np.unravel_index(uniq, tuple(shape))) if len(shape) else \
        np.zeros((0, uniq.size), np.int64)
    return out.astype(np.int64, copy=False).reshape(len(shape), uniq.size), \
        inverse.reshape(-1).astype(np.int64, copy=False)


def is_sorted_unique(indices, shape):
    """Whether the columns of ``indices`` are in row-major order without duplicates (what torch
    calls coalesced)."""
    flat = flat_index(indices, shape)
    return bool(np.all(flat[1:] > flat[:-1]))


def groups(indices, keep):
    """Group number of each column of ``indices`` by its rows ``keep`` (a list of row numbers):
    ``(group (nnz,), n_groups, the group's kept indices (len(keep), n_groups))``."""
    sub = indices[list(keep)]
    if sub.shape[1] == 0:
        return np.zeros(0, np.int64), 0, sub.astype(np.int64)
    uniq, inverse = np.unique(sub, axis=1, return_inverse=True)
    return inverse.reshape(-1).astype(np.int64, copy=False), uniq.shape[1], \
        uniq.astype(np.int64, copy=False)


def group_max(values, group, n_groups):
    """Per-group maximum of ``values`` along axis 0 (``-inf`` for an empty group)."""
    out = np.full((n_groups,) + values.shape[1:], -np.inf, values.dtype)
    np.maximum.at(out, group, values)
    return out
