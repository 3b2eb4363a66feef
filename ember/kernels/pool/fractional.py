"""Fractional max pooling (Graham, 2014) on ndarrays, 2-d (N, C, H, W) and 3-d (N, C, T, H, W),
as torch's CPU kernels: per (batch, plane) pseudo-random window starts from ``random_samples``
(N, C, nd) in [0, 1), each window of ``kernel_size``; indices are flat into each plane (volume).
Ties keep the first maximum, a NaN wins (the last NaN, as torch). Errors are KernelError."""
import numpy as np

from ..errors import KernelError


def _starts(samples, in_size, out_size, k, dtype):
    """(N, C, out) window starts for one axis from samples (N, C)."""
    if out_size > 1:
        alpha = dtype.type((in_size - k) / (out_size - 1))
        i = np.arange(out_size - 1, dtype=dtype)
        seq = ((i + samples[..., None]) * alpha).astype(np.int64) - \
            (samples[..., None] * alpha).astype(np.int64)
        last = np.full(samples.shape + (1,), in_size - k, np.int64)
        return np.concatenate([seq, last], -1)
    return np.full(samples.shape + (1,), in_size - k, np.int64)


def _pool(x, kernel_size, output_size, samples, nd):
    if x.ndim != nd + 2:
        raise KernelError(f"expected a {nd + 2}-d input, got shape {list(x.shape)}")
    if x.dtype.kind != "f" or samples.dtype != x.dtype:
        raise KernelError(f"expected a floating-point input and random samples of its dtype, got "
                          f"{x.dtype} and {samples.dtype}")
    k = tuple(int(a) for a in kernel_size)
    out = tuple(int(a) for a in output_size)
    if len(k) == 1:
        k = k * nd
    if len(out) == 1:
        out = out * nd
    n, c = x.shape[:2]
    sp = x.shape[2:]
    if len(k) != nd or len(out) != nd or min(k) < 1 or min(out) < 1:
        raise KernelError(f"kernel_size {list(k)} and output_size {list(out)} must be {nd} "
                          f"positive ints")
    for i in range(nd):
        if out[i] + k[i] - 1 > sp[i] - (nd == 3):   # torch: <= input in 2-d, < input in 3-d
            raise KernelError(f"output size {out[i]} with kernel size {k[i]} is too large for "
                              f"input size {sp[i]} (dim {i}): need output + kernel - 1 "
                              f"{'<' if nd == 3 else '<='} input")
    if samples.shape != (n, c, nd):
        raise KernelError(f"random_samples must have shape {[n, c, nd]}, got "
                          f"{list(samples.shape)}")
    # torch: 2-d uses sample 0 for W and 1 for H; 3-d uses 0, 1, 2 for T, H, W
    which = (1, 0) if nd == 2 else (0, 1, 2)
    starts = [_starts(samples[:, :, which[i]], sp[i], out[i], k[i], x.dtype) for i in range(nd)]
    strides = [int(np.prod(sp[i + 1:])) for i in range(nd)]
    best = np.full((n, c) + out, -np.inf, x.dtype)
    idx = np.zeros((n, c) + out, np.int64)
    for tap in np.ndindex(*k):
        v = x
        flat = 0
        for i in range(nd):
            pos = starts[i] + tap[i]  # (N, C, out_i)
            shape = [n, c] + [1] * nd
            shape[2 + i] = out[i]
            p = pos.reshape(shape)
            target = list(v.shape)
            target[2 + i] = out[i]
            v = np.take_along_axis(v, np.broadcast_to(p, target), axis=2 + i)
            flat = flat + p * strides[i]
        hit = (v > best) | np.isnan(v)
        np.copyto(best, v, where=hit)
        np.copyto(idx, np.broadcast_to(flat, idx.shape), where=hit)
    return best, idx


def fractional_max_pool2d(x, random_samples, kernel_size, output_size):
    """(y, indices into each H*W plane) of 2-d fractional max pooling."""
    return _pool(x, kernel_size, output_size, random_samples, 2)


def fractional_max_pool3d(x, random_samples, kernel_size, output_size):
    """(y, indices into each T*H*W volume) of 3-d fractional max pooling."""
    return _pool(x, kernel_size, output_size, random_samples, 3)
