"""Tensor factories. ``generator`` arguments are objects with NumPy Generator methods."""
import numpy as np

from ember.kernels.dtypes import fill_value as checked
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
    return np.full(_size(size), checked(fill_value, np.dtype(dtype), "fill_value"), dtype)


def empty(size, dtype):
    return np.empty(_size(size), dtype)


def zeros_like(a, dtype=None):
    return np.zeros(a.shape, dtype or a.dtype)


def ones_like(a, dtype=None):
    return np.ones(a.shape, dtype or a.dtype)


def full_like(a, fill_value, dtype=None):
    dtype = np.dtype(dtype or a.dtype)
    return np.full(a.shape, checked(fill_value, dtype, "fill_value"), dtype)


def empty_like(a, dtype=None):
    return np.empty(a.shape, dtype or a.dtype)


def arange(start, end, step, dtype):
    if step == 0:
        raise KernelError("step must be nonzero")
    if (end - start) / step < 0:
        raise KernelError(f"upper bound and lower bound inconsistent with step sign: start="
                          f"{start}, end={end}, step={step}")
    if np.dtype(dtype).kind in "iu":
        return _int_arange(start, end, step, np.dtype(dtype))
    return np.arange(start, end, step, dtype=dtype)


def _int_arange(start, end, step, dtype):
    """torch's integer arange: the values start from the bounds cast to int (truncated); the
    length is counted from those cast bounds for int64, from the original ones otherwise."""
    s, e, st = (int(v) for v in (start, end, step))
    if dtype == np.int64:
        if st == 0:
            raise KernelError(f"step must be nonzero (step {step} is 0 as {dtype})")
        sgn = (st > 0) - (st < 0)
        num = e - s + st - sgn  # C's truncating integer division, as torch
        n = abs(num) // abs(st) * (1 if (num >= 0) == (st > 0) else -1)
    else:
        n = int(np.ceil((float(end) - float(start)) / float(step)))
    return (s + st * np.arange(max(n, 0), dtype=np.int64)).astype(dtype)


def linspace(start, end, steps, dtype):
    if steps < 0:
        raise KernelError(f"number of steps must be non-negative, got {steps}")
    if np.dtype(dtype).kind in "iu" and steps > 1:
        # torch: integer bounds (truncated), a float64 step, each half counted from its own
        # end with one fused multiply-add (emulated in long double: exact below 2**11 steps)
        s, e = int(start), int(end)
        step = np.longdouble((float(e) - float(s)) / (steps - 1))
        i = np.arange(steps)
        v = np.where(i < steps // 2, np.longdouble(s) + step * i,
                     np.longdouble(e) - step * (steps - i - 1))
        return np.trunc(v.astype(np.float64)).astype(np.int64).astype(dtype)
    if np.dtype(dtype).kind in "iu" and steps == 1:
        return np.array([int(start)], dtype)
    return np.linspace(start, end, steps, dtype=dtype)


def eye(n, m, dtype):
    return np.eye(n, n if m is None else m, dtype=dtype)


def rand(size, generator, dtype):
    if np.dtype(dtype).kind == "c":  # as torch: real and imaginary parts each uniform in [0, 1)
        parts = generator.random(_size(size) + (2,))
        return (parts[..., 0] + 1j * parts[..., 1]).astype(dtype)
    return generator.random(_size(size)).astype(dtype, copy=False)


def randn(size, generator, dtype):
    if np.dtype(dtype).kind == "c":  # as torch: real and imaginary parts each of variance 1/2
        parts = generator.standard_normal(_size(size) + (2,)) * np.sqrt(0.5)
        return (parts[..., 0] + 1j * parts[..., 1]).astype(dtype)
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
        return _multinomial_row(p, num_samples, replacement, generator)
    return np.stack([_multinomial_row(row, num_samples, replacement, generator) for row in p])


def _multinomial_row(p, num_samples, replacement, generator):
    """``num_samples`` categories drawn from the normalised row ``p``. Without replacement and
    fewer nonzero categories than samples, torch draws every nonzero category first and then
    zero-probability ones (its exponential-race sampling ranks them last): the nonzero ones in
    drawn order, then the others in a random order."""
    nonzero = np.flatnonzero(p)
    if replacement or nonzero.size >= num_samples:
        return generator.choice(p.shape[0], num_samples, replace=replacement,
                                p=p).astype(np.int64)
    first = nonzero[generator.choice(nonzero.size, nonzero.size, replace=False, p=p[nonzero])]
    rest = generator.permutation(np.flatnonzero(p == 0))[:num_samples - nonzero.size]
    return np.concatenate([first, rest]).astype(np.int64)


def poisson(rates, generator):
    """Poisson counts of the float ``rates``, in their dtype (rates checked by the caller)."""
    return generator.poisson(rates.astype(np.float64)).astype(rates.dtype)


def binomial(count, prob, generator):
    """Binomial(count, prob) draws of float ``count`` and ``prob`` broadcast together, in their
    dtype (values checked by the caller)."""
    n = np.broadcast_to(count, np.broadcast_shapes(count.shape, prob.shape))
    return generator.binomial(n.astype(np.int64), prob.astype(np.float64)).astype(count.dtype)


# ---------------------------------------------------------------- in-place random fills
def cauchy_like(a, median, sigma, generator):
    return (median + sigma * np.tan(np.pi * (generator.random(a.shape) - 0.5))).astype(
        a.dtype, copy=False)


def exponential_like(a, lambd, generator):
    if not lambd > 0:
        raise KernelError(f"exponential_: expects lambd > 0.0, got lambd={lambd}")
    return (-np.log1p(-generator.random(a.shape)) / lambd).astype(a.dtype, copy=False)


def geometric_like(a, p, generator):
    if not 0 < p < 1:
        raise KernelError(f"geometric_: expects p to be in (0, 1), got p={p}")
    u = 1.0 - generator.random(a.shape)  # in (0, 1]
    return np.maximum(np.ceil(np.log(u) / np.log1p(-p)), 1.0).astype(a.dtype, copy=False)


def log_normal_like(a, mean, std, generator):
    if not std > 0:
        raise KernelError(f"log_normal_: expects std > 0.0, got std={std}")
    return np.exp(generator.standard_normal(a.shape) * std + mean).astype(a.dtype, copy=False)


def randint_like(a, low, high, generator):
    if low >= high:
        raise KernelError(f"randint_like: expects low < high, got low={low}, high={high}")
    return generator.integers(low, high, a.shape).astype(a.dtype, copy=False)


def logspace(start, end, steps, base, dtype):
    if steps < 0:
        raise KernelError(f"logspace: number of steps must be non-negative, got {steps}")
    integral = np.dtype(dtype).kind in "iub"
    if integral:  # as torch: integer bounds for an integer result
        start, end = int(start), int(end)
    out = np.power(float(base), np.linspace(float(start), float(end), steps))
    if integral:
        out = np.trunc(out)
    return out.astype(dtype)


def bincount(a, weights, minlength):
    if a.ndim != 1 or a.dtype.kind not in "iu":
        raise KernelError(f"bincount: expects a 1-d integer tensor, got shape {a.shape} and "
                          f"dtype {a.dtype}")
    if a.size and a.min() < 0:
        raise KernelError("bincount: the input must hold non-negative values")
    if minlength < 0:
        raise KernelError(f"bincount: minlength must be non-negative, got {minlength}")
    if weights is not None and weights.shape != a.shape:
        raise KernelError(f"bincount: weights of shape {weights.shape} must have the input's "
                          f"shape {a.shape}")
    out = np.bincount(a, weights, minlength)
    if weights is None:
        return out.astype(np.int64)
    return out.astype(weights.dtype if weights.dtype.kind == "f" else np.float64)


def histogram(a, edges, weight, bins, range, density):
    """(hist, bin_edges) as torch.histogram: the 1-d array of ``edges``, or ``bins`` equal bins
    over ``range`` (default: the input's min and max)."""
    if a.dtype.kind != "f":
        raise KernelError(f"histogram: expects a floating point input, got {a.dtype}")
    if weight is not None and weight.shape != a.shape:
        raise KernelError(f"histogram: weight of shape {weight.shape} must have the input's "
                          f"shape {a.shape}")
    flat = a.reshape(-1)
    w = None if weight is None else weight.reshape(-1)
    if edges is not None:
        if edges.ndim != 1 or edges.size < 1:
            raise KernelError(f"histogram: bins must be a 1-d tensor of edges, got shape "
                              f"{edges.shape}")
        if edges.dtype != a.dtype:
            raise KernelError(f"histogram: input and bins must have the same dtype, got input "
                              f"{a.dtype} and bins {edges.dtype}")
    else:
        if bins <= 0:
            raise KernelError(f"histogram: bins must be positive, got {bins}")
        if range is not None:
            lo, hi = float(range[0]), float(range[1])
        elif flat.size:
            lo, hi = float(flat.min()), float(flat.max())
        else:
            lo, hi = 0.0, 1.0
        if lo > hi:
            raise KernelError(f"histogram: max must be larger than min, got range ({lo}, {hi})")
        t = a.dtype.type
        lo, hi = t(lo), t(hi)
        if lo == hi:
            lo, hi = lo - t(0.5), hi + t(0.5)
        # torch's linspace in the input's dtype: from the start for the first half, from the end
        # for the second
        i = np.arange(bins + 1)
        step = (hi - lo) / t(bins)
        edges = np.where(i < (bins + 1) // 2, lo + i.astype(a.dtype) * step,
                         hi - (bins - i).astype(a.dtype) * step).astype(a.dtype)
    hist, _ = np.histogram(flat, edges, weights=w, density=density)
    return hist.astype(a.dtype), edges


def full_like_of(a, value):
    return np.full_like(a, value)


def histogramdd(arrays, weighted, density):
    """Counts of the rows of ``a`` (N, D) in the D-dimensional bins between ``edges``:
    ``arrays`` is [a, *edges] and then the weights when ``weighted``."""
    a, edges = arrays[0], arrays[1:len(arrays) - 1 if weighted else len(arrays)]
    weight = arrays[-1] if weighted else None
    if a.dtype.kind != "f":
        raise KernelError(f"histogramdd: expects a floating point input, got {a.dtype}")
    d = a.shape[-1] if a.ndim else 0
    if len(edges) != d:
        raise KernelError(f"histogramdd: expected {d} bin edge tensors for an input whose last "
                          f"dim is {d}, got {len(edges)}")
    for e in edges:
        if e.ndim != 1 or e.size < 1:
            raise KernelError(f"histogramdd: bin edges must be non-empty 1-d tensors, got shape "
                              f"{e.shape}")
    edges = [e.astype(a.dtype, copy=False) for e in edges]
    pts = a.reshape(-1, d)
    w = None if weight is None else weight.reshape(-1)
    if w is not None and w.shape[0] != pts.shape[0]:
        raise KernelError(f"histogramdd: weight must hold one value per point ({pts.shape[0]}), "
                          f"got shape {weight.shape}")
    # torch's binary search: a point counts when it lies in [edges[0], edges[-1]] in every dim
    # (no point does for decreasing edges); the last bin is closed
    shape = tuple(max(e.size - 1, 1) for e in edges)
    keep = np.ones(pts.shape[0], bool)
    flat = np.zeros(pts.shape[0], np.int64)
    for i, e in enumerate(edges):
        x = pts[:, i]
        keep &= (x >= e[0]) & (x <= e[-1])
        pos = np.clip(np.searchsorted(e, x, side="right") - 1, 0, shape[i] - 1)
        flat = flat * shape[i] + pos
    counts = np.bincount(flat[keep], None if w is None else w[keep],
                         int(np.prod(shape))).astype(np.float64)
    hist = counts.reshape(shape)
    if density:
        widths = [np.diff(e) if e.size > 1 else np.zeros(1) for e in edges]
        vol = np.ones(shape)
        for i, wd in enumerate(widths):
            vol = vol * wd.reshape((-1,) + (1,) * (len(shape) - 1 - i))
        with np.errstate(divide="ignore", invalid="ignore"):
            hist = hist / hist.sum() / vol
    return hist.astype(a.dtype)
