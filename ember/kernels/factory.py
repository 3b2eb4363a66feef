"""Tensor factories. ``generator`` arguments are objects with NumPy Generator methods."""
import numpy as np

from ember.kernels.errors import KernelError


def _size(size):
    size = tuple(int(s) for s in size)
    for s in size:
        if s < 0:
            raise KernelError(f"negative dimension {s} in size {list(size)}")
    return size


def zeros(size, dtype):
    return np.zeros(_size(size), dtype)


def ones(size, dtype):
    return np.ones(_size(size), dtype)


def full(size, fill_value, dtype):
    return np.full(_size(size), fill_value, dtype)


def empty(size, dtype):
    return np.empty(_size(size), dtype)


def zeros_like(a, dtype=None):
    return np.zeros(a.shape, dtype or a.dtype)


def ones_like(a, dtype=None):
    return np.ones(a.shape, dtype or a.dtype)


def full_like(a, fill_value, dtype=None):
    return np.full(a.shape, fill_value, dtype or a.dtype)


def empty_like(a, dtype=None):
    return np.empty(a.shape, dtype or a.dtype)


def arange(start, end, step, dtype):
    if step == 0:
        raise KernelError("step must be nonzero")
    if (end - start) / step < 0:
        raise KernelError(f"upper bound and larger bound inconsistent with step sign: start="
                          f"{start}, end={end}, step={step}")
    return np.arange(start, end, step, dtype=dtype)


def linspace(start, end, steps, dtype):
    if steps < 0:
        raise KernelError(f"number of steps must be non-negative, got {steps}")
    return np.linspace(start, end, steps, dtype=dtype)


def eye(n, m, dtype):
    return np.eye(n, n if m is None else m, dtype=dtype)


def rand(size, generator, dtype):
    return generator.random(_size(size)).astype(dtype, copy=False)


def randn(size, generator, dtype):
    return generator.standard_normal(_size(size)).astype(dtype, copy=False)


def randint(low, high, size, generator, dtype):
    if high <= low:
        raise KernelError(f"random_ expects 'from' to be less than 'to', but got from={low} >= "
                          f"to={high}")
    return generator.integers(low, high, _size(size)).astype(dtype, copy=False)


def randperm(n, generator, dtype):
    return generator.permutation(n).astype(dtype, copy=False)


def normal(mean, std, size, generator, dtype):
    if np.any(np.asarray(std) < 0):
        raise KernelError(f"normal expects std >= 0.0, but found std {std}")
    return (generator.standard_normal(_size(size)) * std + mean).astype(dtype, copy=False)


def uniform_like(a, low, high, generator):
    return (generator.random(a.shape) * (high - low) + low).astype(a.dtype, copy=False)


def normal_like(a, mean, std, generator):
    return (generator.standard_normal(a.shape) * std + mean).astype(a.dtype, copy=False)


def bernoulli(a, generator):
    return (generator.random(a.shape) < a).astype(a.dtype)


def multinomial(probs, num_samples, replacement, generator):
    p = probs / probs.sum(axis=-1, keepdims=True)
    if p.ndim == 1:
        return generator.choice(p.shape[0], num_samples, replace=replacement, p=p).astype(np.int64)
    return np.stack([generator.choice(p.shape[1], num_samples, replace=replacement, p=row)
                     for row in p]).astype(np.int64)
