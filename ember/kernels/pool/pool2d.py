"""Pooling kernels on ndarrays (NCHW / NCL): max, average and adaptive, forward and backward.

Windows are strided views of a padded copy; reductions run once per kernel tap over whole arrays
(no Python loop over elements). Output sizes, ``ceil_mode`` (the last window must start inside
the input or the left padding), the padding limit and the argmax convention (flat index into the
H*W plane, first maximum wins, NaN propagates, the last NaN gives the index) follow torch.
Errors are ValueError naming the op.
"""
import numpy as np
from numpy.lib.stride_tricks import as_strided

from ember.kernels.runtime import threadpool, threads
from ember.kernels.lru import remembered
from ember.kernels.opmath import in_float32


def _pair(v, name, op):
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return (int(v), int(v))
    t = tuple(int(a) for a in v)
    if len(t) == 1:
        return t * 2
    if len(t) != 2:
        raise ValueError(f"{op}: {name} must be an int or 2 ints, got {v!r}")
    return t


def _out(size, k, s, p, d, ceil_mode):
    span = size + 2 * p - d * (k - 1) - 1
    n = (span + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (n - 1) * s >= size + p:
        n -= 1
    return n


_checked = {}
_CHECKED_MAX = 512


def _params(op, x_shape, kernel_size, stride, padding, dilation, ceil_mode):
    """Validate and return (k, s, p, d, (Ho, Wo)) for 2-d pooling.

    Valid arguments are remembered per input shape (a batch of one spends longer here than in
    its kernel); the key holds each argument with its class, so a bool or float that the checks
    refuse never meets the entry of an int; unhashable arguments (lists) are not kept."""
    key = (x_shape, kernel_size.__class__, kernel_size, stride.__class__, stride,
           padding.__class__, padding, dilation.__class__, dilation, ceil_mode.__class__,
           ceil_mode)
    return remembered(_checked, _CHECKED_MAX, key, _check_params, op, x_shape, kernel_size,
                      stride, padding, dilation, ceil_mode)


def _check_params(op, x_shape, kernel_size, stride, padding, dilation, ceil_mode):
    if len(x_shape) != 4:
        raise ValueError(f"{op}: expected a 4-d input (N, C, H, W), got shape {tuple(x_shape)}")
    k = _pair(kernel_size, "kernel_size", op)
    s = k if stride is None or (not np.isscalar(stride) and len(stride) == 0) else \
        _pair(stride, "stride", op)
    p, d = _pair(padding, "padding", op), _pair(dilation, "dilation", op)
    if min(k) < 1 or min(s) < 1 or min(d) < 1 or min(p) < 0:
        raise ValueError(f"{op}: kernel_size {k}, stride {s} and dilation {d} must be positive "
                         f"and padding {p} non-negative")
    if p[0] > k[0] // 2 or p[1] > k[1] // 2:
        raise ValueError(f"{op}: padding {p} should be at most half of the kernel size {k}")
    H, W = x_shape[2:]
    out = (_out(H, k[0], s[0], p[0], d[0], ceil_mode), _out(W, k[1], s[1], p[1], d[1], ceil_mode))
    if min(out) < 1:
        raise ValueError(f"{op}: input {tuple(x_shape)} is too small for kernel {k}, stride {s}, "
                         f"padding {p}, dilation {d}: output size {out}")
    return k, s, p, d, out


def _padded(x, k, s, p, d, out, fill):
    """x padded by p (top/left) and enough (bottom/right) to hold every window, with ``fill``."""
    N, C, H, W = x.shape
    Hn = max(H + p[0], (out[0] - 1) * s[0] + d[0] * (k[0] - 1) + 1)
    Wn = max(W + p[1], (out[1] - 1) * s[1] + d[1] * (k[1] - 1) + 1)
    xp = np.full((N, C, Hn, Wn), fill, x.dtype)
    xp[:, :, p[0]:p[0] + H, p[1]:p[1] + W] = x
    return xp


def _padded_if_needed(x, k, s, p, d, out, fill=-np.inf):
    """``x`` itself when every window lies inside it without padding, else a copy padded with
    ``fill``."""
    H, W = x.shape[2:]
    if p == (0, 0) and (out[0] - 1) * s[0] + d[0] * (k[0] - 1) < H and \
            (out[1] - 1) * s[1] + d[1] * (k[1] - 1) < W:
        return x
    return _padded(x, k, s, p, d, out, fill)


def _tap(a, r, c, s, d, out):
    """View of a (N, C, Hn, Wn) array at kernel tap (r, c): (N, C, Ho, Wo)."""
    sn, sc, sh, sw = a.strides
    base = a[:, :, r * d[0]:, c * d[1]:]
    return as_strided(base, a.shape[:2] + out, (sn, sc, sh * s[0], sw * s[1]), writeable=False)


def _running_max(taps, out_shape, dtype, start):
    """Max over (value view, flat index) taps with torch's rule: first max wins, NaN propagates
    and the last NaN in window order gives the index (torch's walk replaces on ``v > max`` or NaN).

    Values: one ``np.maximum`` pass per tap. Indices: taps visited last to first, each writing
    where it equals the max, so the first maximum wins; then first to last where NaN. ``start``
    is the index reported where every tap is -inf (the window's first valid element, never a
    padding position).
    """
    y = np.array(taps[0][0], dtype=dtype, order="C")
    for v, _ in taps[1:]:
        np.maximum(y, v, out=y)
    idx = np.empty(out_shape, np.int64)
    nan = np.isnan(y)
    has_nan = nan.any()
    for v, i in reversed(taps):
        np.copyto(idx, i, where=v == y)
    if has_nan:
        for v, i in taps:
            np.copyto(idx, i, where=np.isnan(v))
    neg_inf = y == -np.inf
    if neg_inf.any():
        np.copyto(idx, np.broadcast_to(start, out_shape), where=neg_inf)
    return y, idx


USE_NUMBA = True
MIN_NUMBA_SIZE = 4096      # window elements read (outputs x window) from which the Numba kernels
                           # run (the 2x2 one at any size); the NumPy form is a pass per tap
SCATTER_PARALLEL_SIZE = 1 << 18   # gradient elements from which the scatter splits over threads
# output elements from which the 2x2 forward splits over ember's threads: it reads each input
# once (~0.7 ns per input element, one thread), so a pool hand-over (~0.1 ms) pays only on large
# layers. LeNet-5 at batch 64, default threads, eager no_grad forward: 1.56-1.66 ms with its first
# pool (75k outputs) split, 1.35-1.44 ms unsplit (load ~1.4, interleaved)
POOL_2X2_PARALLEL_SIZE = 1 << 18
# output elements (scatter: gradient elements) from which the 2x2 forward and the scatter split
# over Numba's TBB layer, whose hand-over costs a few microseconds, not the pool's ~0.1 ms:
# LeNet-5's pools at batch 64 on two threads, 2x2 forward 249 -> 128 us (75k outputs) and
# 125 -> 65 us (25.6k); a batch of one (1,176 outputs, 12 us) stays on one thread
POOL_2X2_TBB_SIZE = 8192
VALUES_PARALLEL_SIZE = 1 << 16   # output elements from which the values-only kernel splits
VALUES_TBB_SIZE = 1 << 14   # ... on Numba's TBB threads (~5 us a hand-over, ember's pool ~50)


def _kernels():
    """The Numba module (``pool2d_numba``), or None when Numba is unavailable or disabled, or
    while its first import runs on the compile thread (NumPy meanwhile)."""
    if not USE_NUMBA:
        return None
    from ember.kernels.runtime.compiler import kernel_module
    return kernel_module("ember.kernels.pool.pool2d_numba")


_signatures = {}


def _signature(name, *args):
    """``compiler.signature`` of a call to kernel ``name`` whose arrays are C-contiguous
    and aligned, kept per dtype (``numba.typeof`` per call costs more than the small kernels)."""
    key = (name, args[0].dtype.str)
    sig = _signatures.get(key)
    if sig is None:
        from ember.kernels.runtime import compiler
        sig = _signatures[key] = compiler.signature(*args)
    return sig


_runnable_keys = set()


def _runnable(nb, name, *args):
    """Whether kernel ``name`` of ``nb`` can run these arguments now (``compiler.ready``; a
    ``prange`` driver's compile queued behind those queued NOW), remembered once True: its
    check hashes Numba types, which costs more than a small pool."""
    key = (name, args[0].dtype.str)
    if key in _runnable_keys:
        return True
    from ember.kernels.runtime import compiler
    ok = compiler.ready(getattr(nb, name), _signature(name, *args),
                        later=name.endswith("_parallel"))
    if ok:
        _runnable_keys.add(key)
    return ok


def _is_2x2(shape, k, s, p, d, out):
    """Whether ``pool2d_numba.planes_2x2`` computes this pool: 2x2 windows at stride 2, no
    padding or dilation, every window inside the plane. It runs at any size (a batch of one:
    (1, 6, 28, 28) 12 us against 150 us for the NumPy taps)."""
    return (k == s == (2, 2) and p == (0, 0) and d == (1, 1) and 2 * out[0] <= shape[2]
            and 2 * out[1] <= shape[3])


def _max_pool2d_numba(nb, x, k, s, p, d, out):
    """Max pooling with indices by the Numba kernel: planes split over Numba's TBB layer when it
    runs, else over ember's thread pool."""
    x = np.ascontiguousarray(x)
    shape = x.shape[:2] + out
    y = np.empty(shape, x.dtype)
    idx = np.empty(shape, np.int64)
    planes = x.shape[0] * x.shape[1]
    if _is_2x2(x.shape, k, s, p, d, out):
        if not _runnable(nb, "planes_2x2", x, y, idx, 0, 0):
            return None
        n = threads.working_threads()
        parts = (threads.tbb_parts(planes, n)
                 if y.size >= POOL_2X2_TBB_SIZE and not threadpool.inside() else 0)
        if parts and _runnable(nb, "planes_2x2_parallel", x, y, idx, 0):
            nb.planes_2x2_parallel(x, y, idx, parts)
        elif y.size < POOL_2X2_PARALLEL_SIZE or n <= 1:
            nb.planes_2x2(x, y, idx, 0, planes)   # one chunk, in this thread
        else:
            threadpool.run_chunks(lambda lo, hi: nb.planes_2x2(x, y, idx, lo, hi), planes,
                                  min(planes, 4 * n), n)
        return y, idx
    args = (x, k[0], k[1], s[0], s[1], p[0], p[1], d[0], d[1], y, idx)
    n = threads.working_threads()
    if not _runnable(nb, "planes", *args, 0, 0):
        return None   # compiling in the background: the NumPy path (the same results) runs
    # the parallel kernel queued once the serial one is ready (its compile re-optimises it);
    # while it compiles the serial one over ember's threads: the NumPy taps cost ~10x
    # (ResNet-18's stem pool: 32 against 2-3 ms)
    parts = 0 if threadpool.inside() else threads.tbb_parts(planes, n)
    if parts and _runnable(nb, "planes_parallel", *args, 0):
        nb.planes_parallel(*args, parts)
        return y, idx
    threadpool.run_chunks(lambda lo, hi: nb.planes(*args, lo, hi), planes, min(planes, 4 * n), n)
    return y, idx


def _max_2x2(x, out):
    """Max pooling with indices over 2x2 windows at stride 2 inside the plane (``_is_2x2``), by
    whole-array passes over the four tap views: the NumPy path while ``planes_2x2`` compiles (or
    without Numba). The first maximum in window order wins, as in ``_running_max``, and an
    all -inf window reports its first element. None when a window holds NaN (``_running_max``
    then gives torch's last-NaN index). LeNet-5's first pool, (64, 6, 28, 28) float32, one
    thread, best of 30: 0.78 ms against 2.0 ms for the general taps (a cold process runs it)."""
    Ho, Wo = out
    W = x.shape[3]
    v00, v01 = x[:, :, 0:2 * Ho:2, 0:2 * Wo:2], x[:, :, 0:2 * Ho:2, 1:2 * Wo:2]
    v10, v11 = x[:, :, 1:2 * Ho:2, 0:2 * Wo:2], x[:, :, 1:2 * Ho:2, 1:2 * Wo:2]
    top, bottom = np.maximum(v00, v01), np.maximum(v10, v11)
    y = np.maximum(top, bottom)
    if np.isnan(y).any():
        return None
    # offset in the plane of each window's first maximum; a tie keeps the earlier tap
    idx = np.where(bottom > top, np.add(v11 > v10, W, dtype=np.int64), v01 > v00)
    idx += (np.arange(Ho, dtype=np.int64)[:, None] * (2 * W)
            + np.arange(Wo, dtype=np.int64)[None, :] * 2)
    return y, idx


def max_pool2d_forward(x, kernel_size, stride, padding, dilation, ceil_mode):
    """Max pooling of x (N, C, H, W); returns (y, indices) with indices into each H*W plane.

    Raises ValueError for bad arguments or an input too small for the window.
    """
    op = "max_pool2d"
    k, s, p, d, out = _params(op, x.shape, kernel_size, stride, padding, dilation, ceil_mode)
    nb = _kernels() if x.dtype.kind == "f" and x.dtype.itemsize >= 4 else None
    if nb is not None and (x.shape[0] * x.shape[1] * out[0] * out[1] * k[0] * k[1] >= MIN_NUMBA_SIZE
                           or _is_2x2(x.shape, k, s, p, d, out)):
        result = _max_pool2d_numba(nb, x, k, s, p, d, out)
        if result is not None:
            return result
    if x.dtype.kind == "f" and _is_2x2(x.shape, k, s, p, d, out):
        result = _max_2x2(x, out)
        if result is not None:
            return result
    H, W = x.shape[2:]
    xp = _padded_if_needed(x, k, s, p, d, out)
    rows = np.arange(out[0]) * s[0] - p[0]
    cols = np.arange(out[1]) * s[1] - p[1]
    first_r = np.maximum(0, -(rows // d[0]))
    first_c = np.maximum(0, -(cols // d[1]))
    start = (rows + first_r * d[0])[:, None] * W + (cols + first_c * d[1])[None, :]
    taps = [(_tap(xp, r, c, s, d, out), (rows + r * d[0])[:, None] * W + (cols + c * d[1]))
            for r in range(k[0]) for c in range(k[1])]
    return _running_max(taps, x.shape[:2] + out, x.dtype, start)


def _max_pool2d_values_numba(nb, x, k, s, p, d, out):
    """``max_pool2d_values`` by ``pool2d_numba.planes_values``, planes split over Numba's TBB
    threads from ``VALUES_TBB_SIZE`` output elements (``planes_values_parallel``), else (while it
    compiles, off TBB) over ember's pool from ``VALUES_PARALLEL_SIZE``; None while it compiles.
    AMD EPYC (Zen 4), two threads, us one thread / ember's pool / TBB, 3x3/2 pools: SqueezeNet's
    (1, 64, 111, 111) 239 / 194 / 125, (1, 128, 55, 55) 144 / 142 / 77, (1, 256, 27, 27) 83 /
    79 / 46; ResNet's stem (1, 64, 112, 112) 229 / 191 / 120; GoogLeNet's (1, 832, 14, 14) 125 /
    137 / 68."""
    x = np.ascontiguousarray(x)
    y = np.empty(x.shape[:2] + out, x.dtype)
    args = (x, k[0], k[1], s[0], s[1], p[0], p[1], d[0], d[1], y)
    if not _runnable(nb, "planes_values", *args, 0, 0):
        return None
    planes, n = x.shape[0] * x.shape[1], threads.working_threads()
    parts = 0
    if y.size >= VALUES_TBB_SIZE and n > 1 and not threadpool.inside():
        parts = threads.tbb_parts(planes, n)
    if parts and _runnable(nb, "planes_values_parallel", *args, 0):
        nb.planes_values_parallel(*args, parts)
    elif y.size < VALUES_PARALLEL_SIZE or n <= 1:
        nb.planes_values(*args, 0, planes)
    else:
        threadpool.run_chunks(lambda lo, hi: nb.planes_values(*args, lo, hi), planes,
                              min(planes, 4 * n), n)
    return y


def max_pool2d_values(x, kernel_size, stride, padding, dilation, ceil_mode):
    """Max pooling values only (no indices), for inference: the Numba kernel, else one
    ``np.maximum`` pass per kernel tap.

    NaN propagates as in torch. Raises ValueError like ``max_pool2d_forward``.
    """
    k, s, p, d, out = _params("max_pool2d", x.shape, kernel_size, stride, padding, dilation,
                              ceil_mode)
    if x.dtype in (np.float32, np.float64):
        nb = _kernels()
        y = None if nb is None else _max_pool2d_values_numba(nb, x, k, s, p, d, out)
        if y is not None:
            return y
    xp = _padded_if_needed(x, k, s, p, d, out)
    y = None
    for r in range(k[0]):
        for c in range(k[1]):
            v = _tap(xp, r, c, s, d, out)
            if y is None:
                y = np.array(v, order="C")
            else:
                np.maximum(y, v, out=y)
    return y


def _scatter_numba(gy, indices, input_shape):
    """``_scatter`` by the Numba kernel (planes over ember's threads), or None when it cannot
    run now (float32/float64 only; compiling in the background). LeNet's first pool 0.17 ->
    0.075 ms, its second 0.05 -> 0.03 ms. Raises ValueError for an index outside its plane."""
    if gy.dtype not in (np.float32, np.float64) or gy.size < MIN_NUMBA_SIZE:
        return None
    nb = _kernels()
    if nb is None:
        return None
    N, C, H, W = input_shape
    P = N * C
    g = np.ascontiguousarray(gy).reshape(P, -1)
    at = np.ascontiguousarray(indices, np.int64).reshape(P, -1)
    gx = np.empty((P, H * W), gy.dtype)      # (each plane zeroed by the kernel)
    if not _runnable(nb, "scatter", g, at, gx, 0, 0):
        return None
    n = threads.working_threads()
    tbb = (threads.tbb_parts(P, n) if g.size >= POOL_2X2_TBB_SIZE and not threadpool.inside()
           else 0)
    if tbb and _runnable(nb, "scatter_parallel", g, at, gx, 0):
        bad = [nb.scatter_parallel(g, at, gx, tbb)]
    else:
        # ~1 ns per element: a hand-over to the pool (~0.1 ms) pays only on large gradients
        parts = min(P, 4 * n) if g.size >= SCATTER_PARALLEL_SIZE else 1
        bad = threadpool.run_chunks(lambda lo, hi: nb.scatter(g, at, gx, lo, hi), P, parts, n)
    if any(bad):
        raise ValueError(f"max_pool2d_backward: indices outside the {H}x{W} input planes")
    return gx.reshape(input_shape)


def _scatter(gy, indices, input_shape):
    """Sum ``gy`` into the flat per-plane positions ``indices`` (``np.add.at`` on flat indices:
    measured 0.14 ms against 2.7 ms for ``np.bincount`` with weights on a LeNet-sized plane set;
    the Numba kernel, ``_scatter_numba``, when it can run)."""
    N, C, H, W = input_shape
    if N * C == 0:
        return np.zeros(input_shape, gy.dtype)   # an empty batch (or no channels)
    out = _scatter_numba(gy, indices, input_shape)
    if out is not None:
        return out
    planes = np.arange(N * C, dtype=np.int64)[:, None] * (H * W)
    flat = (indices.reshape(N * C, -1) + planes).ravel()
    gx = np.zeros(N * C * H * W, gy.dtype)
    np.add.at(gx, flat, gy.ravel())
    return gx.reshape(input_shape)


def max_pool2d_backward(gy, indices, input_shape):
    """Gradient of max_pool2d: gy summed into the argmax positions of each (N, C) plane.

    Raises ValueError when gy and indices differ in shape.
    """
    if gy.shape != indices.shape:
        raise ValueError(f"max_pool2d_backward: grad_output {gy.shape} and indices "
                         f"{indices.shape} differ")
    return _scatter(gy, indices, tuple(input_shape))


def _avg_divisor(size, k, s, p, out, count_include_pad):
    start = np.arange(out) * s - p
    end = np.minimum(start + k, size + p)
    if count_include_pad:
        return end - start
    return np.minimum(end, size) - np.maximum(start, 0)


def _avg_setup(op, shape, kernel_size, stride, padding, ceil_mode, count_include_pad,
               divisor_override):
    k, s, p, d, out = _params(op, shape, kernel_size, stride, padding, 1, ceil_mode)
    if divisor_override:
        div = np.full(out, float(divisor_override))
    else:
        H, W = shape[2:]
        div = np.outer(_avg_divisor(H, k[0], s[0], p[0], out[0], count_include_pad),
                       _avg_divisor(W, k[1], s[1], p[1], out[1], count_include_pad))
    return k, s, p, d, out, div


@in_float32
def avg_pool2d_forward(x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                       divisor_override):
    """Average pooling of x (N, C, H, W) with torch's divisor rules.

    Raises ValueError for bad arguments or an input too small for the window. Integer inputs
    give integer means truncated toward zero, as torch's CPU kernel.
    """
    if x.dtype.kind in "iub":
        y = avg_pool2d_forward(x.astype(np.float64), kernel_size, stride, padding, ceil_mode,
                               count_include_pad, divisor_override)
        return np.trunc(y).astype(x.dtype)
    k, s, p, d, out, div = _avg_setup("avg_pool2d", x.shape, kernel_size, stride, padding,
                                      ceil_mode, count_include_pad, divisor_override)
    xp = _padded_if_needed(x, k, s, p, d, out, 0)
    Wn = xp.shape[3]
    rows = np.zeros(x.shape[:2] + (out[0], Wn), x.dtype)
    for r in range(k[0]):
        rows += xp[:, :, r:r + s[0] * (out[0] - 1) + 1:s[0], :]
    y = np.zeros(x.shape[:2] + out, x.dtype)
    for c in range(k[1]):
        y += rows[:, :, :, c:c + s[1] * (out[1] - 1) + 1:s[1]]
    y /= div.astype(x.dtype)
    return y


@in_float32
def avg_pool2d_backward(gy, input_shape, kernel_size, stride, padding, ceil_mode,
                        count_include_pad, divisor_override):
    """Gradient of avg_pool2d: gy / divisor spread evenly over each window.

    Raises ValueError when gy is not the pooling's output shape.
    """
    op = "avg_pool2d_backward"
    input_shape = tuple(input_shape)
    k, s, p, d, out, div = _avg_setup(op, input_shape, kernel_size, stride, padding, ceil_mode,
                                      count_include_pad, divisor_override)
    if gy.shape != input_shape[:2] + out:
        raise ValueError(f"{op}: grad_output has shape {gy.shape}, expected {input_shape[:2] + out}")
    N, C, H, W = input_shape
    g = gy / div.astype(gy.dtype)
    Hn = max(H + p[0], (out[0] - 1) * s[0] + k[0])
    Wn = max(W + p[1], (out[1] - 1) * s[1] + k[1])
    cols = np.zeros((N, C, out[0], Wn), gy.dtype)
    for c in range(k[1]):
        cols[:, :, :, c:c + s[1] * (out[1] - 1) + 1:s[1]] += g
    gxp = np.zeros((N, C, Hn, Wn), gy.dtype)
    for r in range(k[0]):
        gxp[:, :, r:r + s[0] * (out[0] - 1) + 1:s[0], :] += cols
    return np.ascontiguousarray(gxp[:, :, p[0]:p[0] + H, p[1]:p[1] + W])


def _adaptive_size(op, shape, output_size):
    if len(shape) != 4:
        raise ValueError(f"{op}: expected a 4-d input (N, C, H, W), got shape {tuple(shape)}")
    if isinstance(output_size, (int, np.integer)):
        output_size = (output_size, output_size)
    out = tuple(shape[2 + i] if o is None else int(o) for i, o in enumerate(output_size))
    if len(out) != 2 or min(out) < 1:
        raise ValueError(f"{op}: output_size must be 2 positive ints, got {output_size!r}")
    if min(shape[2:]) < 1:
        raise ValueError(f"{op}: input {tuple(shape)} has an empty spatial dimension")
    return out


def _bounds(size, out):
    i = np.arange(out)
    return (i * size) // out, -((-(i + 1) * size) // out)


def _averaging_matrix(size, out, dtype):
    start, end = _bounds(size, out)
    pos = np.arange(size)
    inside = (pos[None, :] >= start[:, None]) & (pos[None, :] < end[:, None])
    return (inside / (end - start)[:, None]).astype(dtype)


@in_float32
def adaptive_avg_pool2d_forward(x, output_size):
    """Adaptive average pooling to ``output_size`` (int, pair, None keeps that input size).

    Raises ValueError for a non-4-d input or a bad output size.
    """
    out = _adaptive_size("adaptive_avg_pool2d", x.shape, output_size)
    ph = _averaging_matrix(x.shape[2], out[0], x.dtype)
    pw = _averaging_matrix(x.shape[3], out[1], x.dtype)
    return np.ascontiguousarray(np.matmul(np.matmul(ph, x), pw.T))


@in_float32
def adaptive_avg_pool2d_backward(gy, input_shape):
    """Gradient of adaptive_avg_pool2d for an input of ``input_shape``.

    Raises ValueError for a non-4-d input shape.
    """
    input_shape = tuple(input_shape)
    out = _adaptive_size("adaptive_avg_pool2d_backward", input_shape, gy.shape[2:])
    ph = _averaging_matrix(input_shape[2], out[0], gy.dtype)
    pw = _averaging_matrix(input_shape[3], out[1], gy.dtype)
    return np.ascontiguousarray(np.matmul(np.matmul(ph.T, gy), pw))


def adaptive_max_pool2d_forward(x, output_size):
    """Adaptive max pooling; returns (y, indices) with indices into each H*W plane.

    Raises ValueError for a non-4-d input or a bad output size.
    """
    out = _adaptive_size("adaptive_max_pool2d", x.shape, output_size)
    H, W = x.shape[2:]
    if out[0] and out[1] and H % out[0] == 0 and W % out[1] == 0:   # equal windows: max_pool2d's
        k = (H // out[0], W // out[1])
        return max_pool2d_forward(x, k, k, 0, 1, False)
    (rs, re), (cs, ce) = _bounds(H, out[0]), _bounds(W, out[1])
    nb = _kernels() if x.dtype.kind == "f" and x.dtype.itemsize >= 4 else None
    if nb is not None:      # a pass per window element below: 10.4 ms against torch's 1.3
        x = np.ascontiguousarray(x)
        y = np.empty(x.shape[:2] + out, x.dtype)
        idx = np.empty(y.shape, np.int64)
        args = (x, rs.astype(np.int64), re.astype(np.int64), cs.astype(np.int64),
                ce.astype(np.int64), y, idx)
        if _runnable(nb, "adaptive_planes", *args, 0, 0):
            planes, n = x.shape[0] * x.shape[1], threads.working_threads()
            threadpool.run_chunks(lambda lo, hi: nb.adaptive_planes(*args, lo, hi), planes,
                                  min(planes, 4 * n), n)
            return y, idx
    kh, kw = int((re - rs).max()), int((ce - cs).max())
    rows = np.minimum(rs[:, None] + np.arange(kh), re[:, None] - 1)
    cols = np.minimum(cs[:, None] + np.arange(kw), ce[:, None] - 1)
    g = x[:, :, rows, :][..., cols]
    taps = [(g[:, :, :, r, :, c], rows[:, r][:, None] * W + cols[:, c][None, :])
            for r in range(kh) for c in range(kw)]
    return _running_max(taps, x.shape[:2] + out, x.dtype, taps[0][1])


def adaptive_max_pool2d_backward(gy, indices, input_shape):
    """Gradient of adaptive_max_pool2d: gy summed into the argmax positions.

    Raises ValueError when gy and indices differ in shape.
    """
    if gy.shape != indices.shape:
        raise ValueError(f"adaptive_max_pool2d_backward: grad_output {gy.shape} and indices "
                         f"{indices.shape} differ")
    return _scatter(gy, indices, tuple(input_shape))


# ---------------------------------------------------------------------------------------- 1-d
def _check3d(op, shape):
    if len(shape) != 3:
        raise ValueError(f"{op}: expected a 3-d input (N, C, L), got shape {tuple(shape)}")


def _one(v, name, op):
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return (1, int(v))
    t = tuple(int(a) for a in v)
    if len(t) != 1:
        raise ValueError(f"{op}: {name} must be an int or 1 int, got {v!r}")
    return (1,) + t


def _squeeze(a):
    return a.reshape(a.shape[0], a.shape[1], a.shape[3])


def max_pool1d_forward(x, kernel_size, stride, padding, dilation, ceil_mode):
    """Max pooling of x (N, C, L); returns (y, indices into L). Raises ValueError."""
    _check3d("max_pool1d", x.shape)
    stride = None if stride is None or (not np.isscalar(stride) and len(stride) == 0) else \
        _one(stride, "stride", "max_pool1d")
    pad = (0, _one(padding, "padding", "max_pool1d")[1])
    y, idx = max_pool2d_forward(x[:, :, None], _one(kernel_size, "kernel_size", "max_pool1d"),
                                stride, pad, _one(dilation, "dilation", "max_pool1d"), ceil_mode)
    return _squeeze(y), _squeeze(idx)


def max_pool1d_backward(gy, indices, input_shape):
    """Gradient of max_pool1d. Raises ValueError when gy and indices differ in shape."""
    N, C, L = input_shape
    return max_pool2d_backward(gy[:, :, None], indices[:, :, None], (N, C, 1, L))[:, :, 0]


def avg_pool1d_forward(x, kernel_size, stride, padding, ceil_mode, count_include_pad):
    """Average pooling of x (N, C, L). Raises ValueError."""
    _check3d("avg_pool1d", x.shape)
    stride = None if stride is None or (not np.isscalar(stride) and len(stride) == 0) else \
        _one(stride, "stride", "avg_pool1d")
    pad = (0, _one(padding, "padding", "avg_pool1d")[1])
    return _squeeze(avg_pool2d_forward(x[:, :, None], _one(kernel_size, "kernel_size", "avg_pool1d"),
                                       stride, pad, ceil_mode, count_include_pad, None))


def avg_pool1d_backward(gy, input_shape, kernel_size, stride, padding, ceil_mode,
                        count_include_pad):
    """Gradient of avg_pool1d. Raises ValueError when gy has the wrong shape."""
    N, C, L = input_shape
    stride = None if stride is None or (not np.isscalar(stride) and len(stride) == 0) else \
        _one(stride, "stride", "avg_pool1d")
    pad = (0, _one(padding, "padding", "avg_pool1d")[1])
    return avg_pool2d_backward(gy[:, :, None], (N, C, 1, L),
                               _one(kernel_size, "kernel_size", "avg_pool1d"), stride, pad,
                               ceil_mode, count_include_pad, None)[:, :, 0]


def adaptive_avg_pool1d_forward(x, output_size):
    """Adaptive average pooling of x (N, C, L) to ``output_size``. Raises ValueError."""
    _check3d("adaptive_avg_pool1d", x.shape)
    return _squeeze(adaptive_avg_pool2d_forward(x[:, :, None], (1, _one(output_size, "output_size",
                                                                        "adaptive_avg_pool1d")[1])))


def adaptive_avg_pool1d_backward(gy, input_shape):
    """Gradient of adaptive_avg_pool1d."""
    N, C, L = input_shape
    return adaptive_avg_pool2d_backward(gy[:, :, None], (N, C, 1, L))[:, :, 0]


def adaptive_max_pool1d_forward(x, output_size):
    """Adaptive max pooling of x (N, C, L); returns (y, indices into L). Raises ValueError."""
    _check3d("adaptive_max_pool1d", x.shape)
    y, idx = adaptive_max_pool2d_forward(x[:, :, None], (1, _one(output_size, "output_size",
                                                                 "adaptive_max_pool1d")[1]))
    return _squeeze(y), _squeeze(idx)


def adaptive_max_pool1d_backward(gy, indices, input_shape):
    """Gradient of adaptive_max_pool1d."""
    N, C, L = input_shape
    return adaptive_max_pool2d_backward(gy[:, :, None], indices[:, :, None], (N, C, 1, L))[:, :, 0]
