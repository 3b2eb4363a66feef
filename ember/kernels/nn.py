"""Neural-network kernels: softmax family, dropout, embedding, layer_norm, batch norm, nll_loss."""
import numpy as np

from ember import _dtype
from ember.kernels.dtypes import to_float
from ember.kernels import constants as C
from ember.kernels.errors import KernelError, KernelValueError
from ember.kernels.opmath import in_float32, is_reduced
from ember.kernels.reduction import norm_dims, shifted_log_sum_exp


def _dim(d, ndim):
    return norm_dims(d, ndim)[0] if ndim else None


@in_float32
def softmax(a, dim, dtype=None):
    a = to_float(a) if dtype is None else a.astype(_dtype.to_numpy_dtype(dtype))
    d = _dim(dim, a.ndim)
    if a.ndim == 0:
        return np.ones_like(a)
    if a.size and d == a.ndim - 1 and a.flags.c_contiguous and \
            _ce_numba_fits(a.reshape(-1, a.shape[-1])):
        out = np.empty(a.shape, a.dtype)
        c = a.shape[-1]
        if _ce_run("softmax", a.reshape(-1, c), out.reshape(-1, c)):
            return out
    elif _mid_fits(a, d):
        out = np.empty(a.shape, a.dtype)
        if _ce_run("softmax_mid", _mid(a, d), _mid(out, d)):
            return out
    e = np.exp(a - np.max(a, axis=d, keepdims=True)) if a.size else a.copy()
    e /= np.sum(e, axis=d, keepdims=True)
    return e


# float32 rows of at least CE_NUMBA_MIN_SIZE elements run nn_numba's kernels once compiled
# (log_softmax: the row's log-sum-exp, then x - lse, while the row is in cache). Else, from
# this many elements, a log_softmax over contiguous rows (the last dimension) runs in
# blocks of about _ROW_BLOCK elements (the exponentials stay in cache) split over ember's threads
# (NumPy's loops release the GIL): a language model's (700, 10000) float32 on 2 cores, forward
# 14.8 -> 6.0 ms, backward 11.0 -> 6.6 ms (blocks of 2^15: 10 / 10 ms, the GIL hand-overs).
ROWS_MIN_SIZE = 1 << 18
_ROW_BLOCK = 1 << 17


def _by_rows(fn, arrays, d):
    """Run ``fn(*row_blocks)`` over blocks of rows of the same-shape C-contiguous ``arrays``
    (the first is the output) when ``d`` is the last axis and they are large; False when not
    applicable (the caller then runs its whole-array path)."""
    a = arrays[0]
    if a.size < ROWS_MIN_SIZE or d != a.ndim - 1 or \
            not all(x.flags.c_contiguous and x.shape == a.shape for x in arrays):
        return False
    from ember.kernels.runtime import threadpool
    from ember.kernels.runtime.threads import working_threads
    c = a.shape[-1]
    rows = [x.reshape(-1, c) for x in arrays]
    n = rows[0].shape[0]
    step = max(1, _ROW_BLOCK // max(c, 1))

    def chunk(lo, hi):
        for r in range(lo, hi, step):
            fn(*(x[r:min(r + step, hi)] for x in rows))
    threads = working_threads()
    threadpool.run_chunks(chunk, n, min(4 * threads, max(1, n // step)), threads)
    return True


def _log_softmax_rows(out, x):
    s, log_sum = shifted_log_sum_exp(x, 1, np.max(x, axis=1, keepdims=True), out=out)
    s -= log_sum


@in_float32
def log_softmax(a, dim, dtype=None):
    a = to_float(a) if dtype is None else a.astype(_dtype.to_numpy_dtype(dtype))
    d = _dim(dim, a.ndim)
    if a.ndim == 0:
        return np.zeros_like(a)
    if a.size == 0:
        return a.copy()
    out = np.empty(a.shape, a.dtype)
    c = a.shape[-1]
    if d == a.ndim - 1 and a.flags.c_contiguous and _ce_numba_fits(a.reshape(-1, c)) and \
            _ce_run("log_softmax", a.reshape(-1, c), out.reshape(-1, c)):
        return out
    if _mid_fits(a, d) and _ce_run("log_softmax_mid", _mid(a, d), _mid(out, d)):
        return out
    if _by_rows(_log_softmax_rows, (out, a), d):
        return out
    if a.ndim == 2 and d == 1 and a.dtype.kind == "f":
        # rows' maxima read at argmax (the first NaN where there is one, as max): a max
        # reduction over short rows is slow ((128, 10): 14 us, argmax 2 us). Where a row holds
        # both zeros the sign picked may differ, which no result shows (exp, and s - lse > 0)
        m = a[np.arange(a.shape[0]), a.argmax(1)][:, None]
    else:
        m = np.maximum.reduce(a, axis=d, keepdims=True)
    s, log_sum = shifted_log_sum_exp(a, d, m, out=out)
    s -= log_sum
    return s


def _log_softmax_backward_rows(out, grad, result):
    np.exp(result, out=out)
    out *= np.sum(grad, axis=1, keepdims=True)
    np.subtract(grad, out, out=out)


def _contiguous_grad(grad):
    """``grad`` as C-contiguous rows for the row kernels: a copy where it is not (the gradient
    of a ``sum`` is ones broadcast with stride 0; one copy costs far less than the formula's
    four passes: (32, 64, 128) float32 softmax backward ~0.5 -> ~0.15 ms)."""
    return grad if grad.flags.c_contiguous else np.ascontiguousarray(grad)


def softmax_input_grad(grad, result, dim, dtype):
    """softmax's first-order backward (``backward_kernel``): ``result * (grad - sum(grad *
    result, dim))`` in one Numba pass per row (``nn_numba.softmax_backward_rows``) for float32
    C-contiguous rows over the last dimension, as ``_ce_run`` chooses; else None (the formula
    ``softmax_grad`` runs). An attention's (16, 4, 64, 64): four dispatched ops -> one pass."""
    if dtype != np.float32 or grad.dtype != np.float32 or result.dtype != np.float32 or \
            grad.shape != result.shape or result.ndim == 0 or not result.size:
        return None
    d = _dim(dim, result.ndim)
    if d != result.ndim - 1:
        if not _mid_fits(result, d):
            return None
        grad = _contiguous_grad(grad)
        out = np.empty(result.shape, np.float32)
        ok = _ce_run("softmax_backward_mid", _mid(grad, d), _mid(result, d), _mid(out, d))
        return out if ok else None
    if not _ce_numba_fits(result.reshape(-1, result.shape[-1])):
        return None
    grad = _contiguous_grad(grad)
    c = result.shape[-1]
    out = np.empty(result.shape, np.float32)
    if _ce_run("softmax_backward", grad.reshape(-1, c), result.reshape(-1, c),
               out.reshape(-1, c)):
        return out
    return None


def softmax_backward(grad, result, dim):
    """The internal op ``softmax_backward``: ``result * (grad - sum(grad * result, dim))`` in
    the operands' dtype, one Numba pass per row where ``softmax_input_grad`` fits (float32),
    else NumPy."""
    if grad.shape != result.shape or grad.dtype != result.dtype or result.dtype.kind != "f":
        raise KernelError(f"expected grad_output and output of one shape and floating dtype, "
                          f"got {grad.dtype}{list(grad.shape)} and "
                          f"{result.dtype}{list(result.shape)}")
    d = _dim(dim, result.ndim)
    out = softmax_input_grad(grad, result, d, result.dtype)
    if out is not None:
        return out
    return result * (grad - np.sum(grad * result, axis=d, keepdims=True))


def log_softmax_input_grad(grad, result, dim, dtype):
    """``log_softmax_backward`` cast to ``dtype``, the input's (``log_softmax(x, dim, dtype)``
    computes in another one): log_softmax's first-order backward (``backward_kernel``)."""
    out = log_softmax_backward(grad, result, dim)
    return out if out.dtype == dtype else out.astype(dtype)


@in_float32
def log_softmax_backward(grad, result, dim):
    """grad - exp(result) * sum(grad, dim): the gradient of log_softmax from its output, in
    their common dtype."""
    out = np.empty(result.shape, np.result_type(grad, result))
    d = _dim(dim, result.ndim)
    if result.size and grad.shape == result.shape and d == result.ndim - 1 and \
            grad.dtype == result.dtype and _ce_numba_fits(result.reshape(-1, result.shape[-1])):
        grad = _contiguous_grad(grad)
        c = result.shape[-1]
        if _ce_run("log_softmax_backward", grad.reshape(-1, c), result.reshape(-1, c),
                   out.reshape(-1, c)):
            return out
    elif result.size and grad.shape == result.shape and grad.dtype == result.dtype and \
            _mid_fits(result, d):
        grad = _contiguous_grad(grad)
        if _ce_run("log_softmax_backward_mid", _mid(grad, d), _mid(result, d), _mid(out, d)):
            return out
    if grad.shape == result.shape and _by_rows(_log_softmax_backward_rows,
                                               (out, grad, result), d):
        return out
    np.exp(result, out=out)
    out *= np.add.reduce(grad, axis=d, keepdims=True)
    np.subtract(grad, out, out=out)
    return out


def native_dropout(a, p, train, generator):
    """Return (output, mask): mask is 1/(1-p) where kept, 0 where dropped, in a's dtype."""
    if not 0.0 <= p <= 1.0:
        raise KernelError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not train or p == 0:
        return a.copy(), np.ones(a.shape, a.dtype)
    if p == 1:
        return np.zeros_like(a), np.zeros(a.shape, a.dtype)
    keep = generator.random(a.shape) >= p
    mask = keep.astype(a.dtype) * a.dtype.type(1.0 / (1.0 - p))
    return a * mask, mask


def embedding(indices, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    if indices.dtype.kind not in "iu":
        raise KernelError(f"Expected tensor for argument 'indices' to have one of the following "
                          f"scalar types: Long, Int; but got {indices.dtype} instead")
    if weight.ndim != 2:
        raise KernelError(f"'weight' must be 2-D, got shape {list(weight.shape)}")
    n = weight.shape[0]
    if indices.size and (indices.max() >= n or indices.min() < 0):
        raise IndexError(f"embedding: index out of range in self (num_embeddings={n}, got "
                         f"indices in [{indices.min()}, {indices.max()}])")
    return weight[indices]


_scatter_signatures = {}


def scatter_add_rows(out, idx, g):
    """``np.add.at(out, idx, g)`` over rows: ``nn_numba.scatter_add_rows`` for float32/float64
    rows once it is compiled (compiled in the background meanwhile), else ``np.add.at``. Both add
    the rows in index order, so the bits are the same whichever runs. A GPT's token embedding
    (65, 128) from 1024 rows, one thread: add.at 0.8 ms, the kernel ~0.03 ms."""
    if USE_NUMBA and g.ndim == 2 and out.dtype == g.dtype and \
            (g.dtype == np.float32 or g.dtype == np.float64) and idx.size and out.shape[0] and \
            -out.shape[0] <= idx.min() and idx.max() < out.shape[0]:
        nb = _ce_numba()
        if nb is not None:
            from ember.kernels.runtime import compiler
            idx = np.ascontiguousarray(idx, np.int64)
            g = np.ascontiguousarray(g)
            key = (g.dtype, g.flags.writeable, idx.flags.writeable)
            sig = _scatter_signatures.get(key)
            if sig is None:
                sig = _scatter_signatures[key] = compiler.signature(g, idx, out)
            if compiler.ready(nb.scatter_add_rows, sig):
                nb.scatter_add_rows(g, idx, out)
                return
    np.add.at(out, idx, g)


def embedding_backward(grad, indices, num_weights, padding_idx=None, scale_grad_by_freq=False):
    """Gradient of ``embedding`` w.r.t. its weight: rows scatter-added by index."""
    d = grad.shape[-1]
    flat_idx = indices.reshape(-1)
    g = grad.reshape(-1, d)
    if scale_grad_by_freq:
        counts = np.bincount(flat_idx % num_weights, minlength=num_weights)
        g = g / counts[flat_idx][:, None]
    out = np.zeros((num_weights, d), grad.dtype)
    scatter_add_rows(out, flat_idx, g)
    if padding_idx is not None and padding_idx >= 0:
        out[padding_idx] = 0
    elif padding_idx is not None:
        out[padding_idx + num_weights] = 0
    return out


@in_float32
def layer_norm(a, weight, bias, normalized_shape, eps=1e-5):
    normalized_shape = tuple(normalized_shape)
    k = len(normalized_shape)
    if a.shape[a.ndim - k:] != normalized_shape:
        raise KernelError(f"Given normalized_shape={list(normalized_shape)}, expected input with "
                          f"shape [*, {', '.join(map(str, normalized_shape))}], but got input of "
                          f"size{list(a.shape)}")
    rows = _ln_rows(a, normalized_shape)
    if rows is not None and _ln_params_fit(rows, weight, bias):
        c = rows.shape[1]
        out = np.empty(a.shape, a.dtype)
        w = np.ones(c, a.dtype) if weight is None else weight.reshape(c)
        b = np.zeros(c, a.dtype) if bias is None else bias.reshape(c)
        if _ce_run("layer_norm", rows, w, b, np.float32(eps), out.reshape(-1, c)):
            return out
    axes = tuple(range(a.ndim - k, a.ndim))
    mean = np.mean(a, axis=axes, keepdims=True)
    xc = a - mean
    var = np.mean(xc * xc, axis=axes, keepdims=True)
    out = xc * (1.0 / np.sqrt(var + eps)).astype(a.dtype)
    if weight is not None:
        out *= weight
    if bias is not None:
        out += bias
    return out


# layer_norm over float32 rows of at least LN_NUMBA_MIN_SIZE elements in all runs nn_numba's
# one-pass kernels once compiled (the statistics and the normalised row while it is in cache;
# the backward recomputes the statistics and writes dx and g * xhat in one pass over each row).
# (1024, 128) float32, forward / forward+backward: see docs/performance.md.
LN_NUMBA_MIN_SIZE = 1 << 12


def _ln_rows(a, normalized_shape):
    """``a`` as (N, C) rows over its normalized dims when the Numba kernels fit (float32,
    C-contiguous, large enough), else None."""
    c = 1
    for n in normalized_shape:
        c *= int(n)
    if a.dtype != np.float32 or not a.flags.c_contiguous or a.size < LN_NUMBA_MIN_SIZE or \
            c < 2:
        return None
    return a.reshape(-1, c)


def _ln_params_fit(rows, *params):
    return all(p is None or (p.dtype == np.float32 and p.size == rows.shape[1] and
                             p.flags.c_contiguous) for p in params)


def layer_norm_input_grads(grad, x, weight, bias, normalized_shape, eps, needs):
    """layer_norm's first-order backward (``backward_kernel``): ``layer_norm_backward``, float16/
    bfloat16 operands computed in float32 and each gradient rounded once to its input's dtype
    (as the formula does; not when another floating operand is wider); None for a complex
    input (the formula)."""
    arrays = (grad, x, weight)
    low = next((a.dtype for a in arrays if a is not None and is_reduced(a.dtype)), None)
    if low is not None and any(a is not None and a.ndim and a.dtype != low and
                               a.dtype.kind in "fcV" for a in arrays):
        low = None
    if low is not None:
        grad, x32, w32 = (a.astype(np.float32) if a is not None and a.dtype == low else a
                          for a in arrays)
    else:
        x32, w32 = x, weight
    if x32.dtype.kind != "f":
        return None
    out = layer_norm_backward(grad, x32, w32, tuple(normalized_shape), eps,
                              (needs[0], needs[1] and weight is not None,
                               needs[2] and bias is not None))
    if low is None:
        return out
    return tuple(None if g is None else g.astype(a.dtype)
                 for g, a in zip(out, (x, weight, bias)))


def layer_norm_backward(grad, x, weight, normalized_shape, eps, needs):
    """(input, weight, bias) gradients of ``layer_norm`` (None where not needed), its statistics
    recomputed from ``x``: float32 rows run nn_numba's one-pass kernel, others NumPy."""
    k = len(normalized_shape)
    lead = tuple(range(x.ndim - k))
    gx = gw = gb = None
    rows = _ln_rows(x, normalized_shape)
    if rows is not None and grad.shape == x.shape and grad.dtype == np.float32 and \
            grad.flags.c_contiguous and _ln_params_fit(rows, weight):
        c = rows.shape[1]
        dx = np.empty(x.shape, x.dtype)
        # each run of rows [lo, hi) leaves its column sums in sums[lo] and marks starts[lo]
        # (the rows of ``sums`` no run starts at stay unwritten)
        sums = np.empty((rows.shape[0], 2, c))
        starts = np.zeros(rows.shape[0], np.bool_)
        w = np.ones(c, x.dtype) if weight is None else weight.reshape(c)
        if _ce_run("layer_norm_backward", grad.reshape(-1, c), rows, w, np.float32(eps),
                   dx.reshape(-1, c), sums, starts):
            gx = dx if needs[0] else None
            if (needs[1] and weight is not None) or needs[2]:
                total = np.add.reduce(sums[starts], axis=0)
                shape = x.shape[x.ndim - k:]
                if needs[1] and weight is not None:
                    gw = total[0].astype(x.dtype).reshape(shape)
                if needs[2]:
                    gb = total[1].astype(x.dtype).reshape(shape)
            return gx, gw, gb
    axes = tuple(range(x.ndim - k, x.ndim))
    mean = np.mean(x, axis=axes, keepdims=True)
    xc = x - mean
    rstd = (1.0 / np.sqrt(np.mean(xc * xc, axis=axes, keepdims=True) + eps)).astype(x.dtype)
    xhat = xc * rstd
    if needs[1] and weight is not None:
        gw = np.sum(grad * xhat, axis=lead) if lead else grad * xhat
    if needs[2]:
        gb = np.sum(grad, axis=lead) if lead else grad.copy()
    if needs[0]:
        gxh = grad * weight if weight is not None else grad
        m1 = np.mean(gxh, axis=axes, keepdims=True)
        m2 = np.mean(gxh * xhat, axis=axes, keepdims=True)
        gx = (gxh - m1 - xhat * m2) * rstd
    return gx, gw, gb


def layer_norm_all_grads(grad, x, weight, normalized_shape, eps):
    """The internal op ``layer_norm_backward``: layer_norm's (input, weight, bias) gradients,
    all three, by ``layer_norm_backward`` (float32 rows: nn_numba's one-pass kernel)."""
    normalized_shape = tuple(normalized_shape)
    k = len(normalized_shape)
    if grad.shape != x.shape or x.shape[x.ndim - k:] != normalized_shape or \
            weight.shape != normalized_shape:
        raise KernelError(f"expected grad_output of the input's shape {list(x.shape)} and a "
                          f"weight of shape {list(normalized_shape)} (normalized_shape), got "
                          f"grad_output {list(grad.shape)}, weight {list(weight.shape)}")
    if x.dtype.kind != "f" or grad.dtype != x.dtype or weight.dtype != x.dtype:
        raise KernelError(f"expected grad_output, input and weight of one floating dtype, got "
                          f"{grad.dtype}, {x.dtype}, {weight.dtype}")
    return layer_norm_backward(grad, x, weight, normalized_shape, eps, (True, True, True))


def _target_shape_error(x, target):
    """torch's error for class-index targets that do not fit an (N, C, ...) input."""
    if x.ndim == 2 and target.ndim != 1:
        raise KernelError(f"0D or 1D target tensor expected, multi-target not supported (input "
                          f"shape {list(x.shape)}, target shape {list(target.shape)})")
    if x.ndim == 2:
        raise KernelValueError(f"Expected input batch_size ({x.shape[0]}) to match target "
                               f"batch_size ({target.shape[0] if target.ndim else 0}).")
    raise KernelError(f"Expected target size {[x.shape[0]] + list(x.shape[2:])}, got "
                      f"{list(target.shape)}")


def _nll_prepare(x, target, weight, ignore_index):
    if x.ndim == 1:
        if target.ndim > 1 or target.size != 1:
            raise KernelValueError(f"For 1D input, 1D target must have size 1, but got target "
                                   f"size: {target.size} (target shape {list(target.shape)})")
        x = x[None]
        target = target.reshape(1)
    elif x.ndim == 0:
        raise KernelError("input tensor should be 1D or more")
    if target.shape != (x.shape[0],) + x.shape[2:]:
        _target_shape_error(x, target)
    if target.dtype != np.int64 and target.dtype != np.uint8:
        raise KernelError(f"expected target dtype to be Long or Byte (int64 or uint8 class "
                          f"indices), but got {target.dtype}")
    c = x.shape[1]
    valid = target != ignore_index
    safe_t = np.where(valid, target, 0)
    if safe_t.size and (safe_t.max() >= c or safe_t.min() < 0):
        raise IndexError(f"Target {int(safe_t.max() if safe_t.max() >= c else safe_t.min())} is "
                         f"out of bounds for {c} classes.")
    w = np.ones(c, x.dtype) if weight is None else weight.astype(x.dtype, copy=False)
    wt = np.where(valid, w[safe_t], 0).astype(x.dtype)
    return x, safe_t, wt


def _nll_plain(shape, dtype, target, weight, reduction, ignore_index):
    """Whether ``nll_loss`` of a 2-D input (``shape``, float ``dtype``) at class indices
    ``target`` may take the plain path: no weight, a reduction, every target a valid class and
    none ``ignore_index`` (then every row counts once: the mean divides by the row count)."""
    if weight is not None or len(shape) != 2 or reduction not in ("mean", "sum") or \
            target.ndim != 1 or (target.dtype != np.int64 and target.dtype != np.uint8) or \
            target.shape[0] != shape[0] or not target.size or dtype.kind != "f":
        return False
    lo, hi = target.min(), target.max()
    return 0 <= lo and hi < shape[1] and not lo <= ignore_index <= hi


def nll_loss(x, target, weight=None, reduction="mean", ignore_index=-100):
    if _nll_plain(x.shape, x.dtype, target, weight, reduction, ignore_index):
        # the general path's sums on the same values (its weights are all ones): same bits
        total = -x[np.arange(x.shape[0]), target].sum()
        return np.asarray(total / x.dtype.type(x.shape[0]) if reduction == "mean" else total)
    xs, t, wt = _nll_prepare(x, target, weight, ignore_index)
    picked = np.take_along_axis(xs, t[:, None], axis=1)[:, 0]
    losses = -picked * wt
    if reduction == "none":
        return losses.reshape(target.shape) if x.ndim > 1 else losses.reshape(())
    if reduction == "sum":
        return np.asarray(losses.sum())
    if reduction == "mean":
        return np.asarray(losses.sum() / wt.sum())
    raise KernelError(f"{reduction} is not a valid value for reduction")


def nll_loss_backward(grad, target, weight, x_shape, reduction="mean", ignore_index=-100):
    """Gradient of ``nll_loss`` w.r.t. its input of shape ``x_shape``."""
    x_shape = tuple(x_shape)
    if grad.ndim == 0 and _nll_plain(x_shape, grad.dtype, target, weight, reduction,
                                     ignore_index):
        n = x_shape[0]
        out = np.zeros(x_shape, grad.dtype)
        out[np.arange(n), target] = -(grad / grad.dtype.type(n)) if reduction == "mean" else -grad
        return out
    x = np.empty((1,) * len(x_shape), grad.dtype)
    x = np.broadcast_to(x, x_shape)
    xs, t, wt = _nll_prepare(x, target, weight, ignore_index)
    if reduction == "none":
        g = grad.reshape(t.shape) * wt
    elif reduction == "sum":
        g = grad * wt
    else:
        g = grad * wt / wt.sum()
    out = np.zeros(xs.shape, grad.dtype)
    np.put_along_axis(out, t[:, None], -g[:, None].astype(grad.dtype), axis=1)
    return out.reshape(x_shape)


# ---------------------------------------------------------------------------- binary cross entropy
# torch's kernels (aten/src/ATen/native/Loss.cpp): the loss clamps each log at -100; the gradient
# is grad * (x - t) / max(x * (1 - x), EPSILON), finite at x == 0 and x == 1; EPSILON is
# float32(1e-12) in every dtype, as torch's kernel has it. float16 computes in float32 with
# EPSILON rounded to float16 (0: 1 / 0 and 0 / 0 there, as torch's).
_BCE_REDUCTIONS = ("none", "mean", "sum")


def _bce_check(x, t, weight, reduction):
    from ember.errors import EmberValueError
    if reduction not in _BCE_REDUCTIONS:
        raise EmberValueError(f"{reduction} is not a valid value for reduction")
    if x.shape != t.shape:
        raise EmberValueError(f"target size ({list(t.shape)}) must be the same as input size "
                              f"({list(x.shape)})")
    for name, a in (("input", x), ("target", t), ("weight", weight)):
        if a is not None and a.dtype != x.dtype:
            raise KernelError(f"expected {name} of dtype {x.dtype.name} (the input's), "
                              f"got {a.dtype.name}")
    if not (x.dtype.kind == "f" or is_reduced(x.dtype)):
        raise KernelError(f"not implemented for {x.dtype.name} input")
    w = None if weight is None else np.broadcast_to(weight, x.shape)
    if is_reduced(x.dtype):
        return (x.astype(np.float32), t.astype(np.float32),
                None if w is None else w.astype(np.float32))
    return x, t, w


def binary_cross_entropy(x, target, weight, reduction):
    """torch.nn.functional.binary_cross_entropy: -w (t log x + (1 - t) log(1 - x)), each log
    clamped at -100, reduced."""
    xs, t, w = _bce_check(x, target, weight, reduction)
    if xs.size and not ((xs >= 0) & (xs <= 1)).all():  # NaN fails too, as in torch
        raise KernelError("all elements of input should be between 0 and 1")
    one = xs.dtype.type(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        loss = ((t - one) * np.maximum(np.log1p(-xs), xs.dtype.type(-100))
                - t * np.maximum(np.log(xs), xs.dtype.type(-100)))
        if w is not None:
            loss = loss * w
        if reduction == "sum":
            loss = loss.sum()
        elif reduction == "mean":
            loss = loss.sum() / xs.dtype.type(loss.size) if loss.size else xs.dtype.type(np.nan)
    return np.asarray(loss).astype(x.dtype, copy=False)


def binary_cross_entropy_backward(grad, x, target, weight, reduction):
    """Gradient of ``binary_cross_entropy`` w.r.t. its input, torch's formula:
    grad * (x - t) / max(x (1 - x), EPSILON) * w (divided by the size for 'mean')."""
    xs, t, w = _bce_check(x, target, weight, reduction)
    eps = np.float32(C.BCE_EPSILON)  # torch's kernel: a float EPSILON, in every dtype
    eps = xs.dtype.type(x.dtype.type(eps) if is_reduced(x.dtype) else eps)
    g = grad.astype(xs.dtype, copy=False)
    one = xs.dtype.type(1)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        out = g * (xs - t) / np.maximum((one - xs) * xs, eps)
        if w is not None:
            out = out * w
        if reduction == "mean":
            out = out / xs.dtype.type(xs.size)
    return np.asarray(np.broadcast_to(out, x.shape)).astype(x.dtype)



# ---------------------------------------------------------------------------- cross entropy
# cross_entropy at class indices as one op: the forward keeps each row's log-sum-exp (float64,
# shape of the target), the backward writes w * (softmax - onehot) in one pass, without the
# dense log-probabilities and nll_loss's dense gradient. float32 rows of at least
# CE_NUMBA_MIN_SIZE elements run the Numba kernels (``nn_numba``, compiled in the background
# while NumPy serves); from CE_PARALLEL_SIZE they split over threads. A language model's
# (700, 10000) float32, 2 cores: see docs/performance.md.
CE_NUMBA_MIN_SIZE = 1 << 15
CE_PARALLEL_SIZE = 1 << 17
USE_NUMBA = True
_ce_signatures = {}


def _ce_numba():
    """``nn_numba``, or None when Numba is unavailable, disabled, or its first import is still
    running on the compile thread (NumPy meanwhile)."""
    if not USE_NUMBA:
        return None
    from ember.kernels.runtime.compiler import kernel_module
    return kernel_module("ember.kernels.nn_numba")


def _ce_run(name, rows, *args):
    """Run ``nn_numba``'s ``<name>_rows(rows, *args, lo, hi)`` over the rows of float32 ``rows``
    (``_split_run``); False when the caller runs NumPy. The kernel's sums and NumPy's differ in
    the last bits, so ``compiler.tier`` makes the choice per shape: the kernel when it can run,
    else NumPy (not compiled yet: queued on the compile thread under "background", and the
    kernel once it is; or Numba unavailable); under ``use_deterministic_algorithms`` the first
    choice is kept for the process. ``USE_NUMBA = False`` always runs NumPy."""
    if not USE_NUMBA:
        return False
    shapes = tuple(x.shape for x in args if isinstance(x, np.ndarray))
    return split_run(f"{name}_rows", f"{name}_parallel", rows, args, rows.shape[0],
                      rows.size >= CE_PARALLEL_SIZE, ("cross_entropy", name, rows.shape) + shapes,
                      _ce_signatures)


def split_run(kernel_name, driver_name, first, args, n, parallel_, tier_key, signatures,
              module=_ce_numba):
    """Run ``nn_numba``'s (``module()``'s: a kernel module or None) one-thread kernel
    ``kernel_name(first, *args, lo, hi)`` over ``n``
    items (rows or channels) as ``compiler.tier`` chooses under ``tier_key`` (the choice waits
    for the kernel only); False when the caller runs NumPy. Where ``parallel_`` and Numba's
    TBB layer splits the items, the ``prange`` driver ``driver_name(first, *args, parts)`` runs
    them, queued once the kernel is ready, behind the compiles queued NOW (its compile
    re-optimises the kernel it calls: 0.7-2 s each on a Zen 4, against 0.2-0.5 s for the
    kernel); until it is compiled the kernel runs over ember's pool in the driver's runs
    (``threadpool.driver_runs``: the same runs, the same bits). Elsewhere the kernel runs on
    ember's pool (or this thread) in blocks."""
    from ember.kernels.runtime import compiler, threadpool
    from ember.kernels.runtime.threads import working_threads, tbb_parts
    if not parallel_:
        serial = (module, kernel_name, tier_key) + tuple(
            (a.dtype, a.ndim, a.flags.c_contiguous, a.flags.writeable)
            if isinstance(a, np.ndarray) else type(a) for a in (first,) + tuple(args))
        fn = _serial_kernels.get(serial)
        if fn is not None and compiler.settled(tier_key) is True:
            fn(first, *args, 0, n)
            return True
    threads = working_threads() if parallel_ else 1
    parts = 0 if threadpool.inside() else tbb_parts(n, threads)

    def kernel(name, extra):
        nb = module()
        if nb is None:
            return None, None
        fn = getattr(nb, name)
        arrays = (first,) + tuple(a for a in args if isinstance(a, np.ndarray))
        key = (fn, first.dtype) + tuple(a.flags.writeable for a in arrays)
        sig = signatures.get(key)
        if sig is None:
            sig = signatures[key] = compiler.signature(first, *args, *extra)
        return fn, sig

    def choose():
        fn, sig = kernel(kernel_name, (0, 0))
        return fn is not None and compiler.ready(fn, sig)
    if not compiler.tier(tier_key, choose):
        return False
    fn, sig = kernel(kernel_name, (0, 0))
    # kept on the kernel: the variant a changed thread count needs compiles now if it must
    compiler.ready(fn, sig, force=True)
    if parts:
        driver, sig = kernel(driver_name, (0,))
        if compiler.ready(driver, sig, later=True):
            driver(first, *args, parts)
        else:
            threadpool.driver_runs(lambda lo, hi: fn(first, *args, lo, hi), n, parts, threads)
    else:
        threadpool.run_chunks(lambda lo, hi: fn(first, *args, lo, hi), n, min(n, 4 * threads),
                              threads)
        if not parallel_ and compiler.settled(tier_key) is True:
            if len(_serial_kernels) > SERIAL_KERNELS_MAX:
                _serial_kernels.clear()
            _serial_kernels[serial] = fn
    return True


# split_run's one-thread calls whose tier is settled on the kernel, by kernel, tier key and the
# arguments' types: the next such call runs the kernel straight, without the choice, the signature
# and the thread-count lookups (a (64, 10) float32 log-sum-exp: ~14 -> ~6 us a call)
_serial_kernels = {}
SERIAL_KERNELS_MAX = 4096


def _mid_fits(a, d):
    """Whether the softmax family over axis ``d`` of ``a``, not its last, runs ``nn_numba``'s
    ``*_mid`` kernels: float32, C-contiguous, of CE_NUMBA_MIN_SIZE elements or more. Before them
    (32, 64, 128) over dim 1 took 3x torch's time (five passes, two of them strided
    reductions)."""
    return a.dtype == np.float32 and a.size >= CE_NUMBA_MIN_SIZE and a.flags.c_contiguous \
        and d is not None and d < a.ndim - 1 and a.shape[d] > 1


def _mid(a, d):
    """C-contiguous ``a`` viewed as (outer, n, inner) around its axis ``d``."""
    outer = 1
    for k in a.shape[:d]:
        outer *= k
    return a.reshape(outer, a.shape[d], -1)


def _ce_numba_fits(rows):
    return rows.dtype == np.float32 and rows.size >= CE_NUMBA_MIN_SIZE and \
        rows.flags.c_contiguous and rows.shape[1] > 1


def _ce_rows(x, target, weight, ignore_index):
    """(rows (M, C) of ``x`` with the classes last, target (M,) made valid, weights (M,),
    valid (M,)) of cross_entropy's input (C,) or (N, C, d1, ...) and target (), (N, d1, ...)."""
    xs, t, wt = _nll_prepare(x, target, weight, ignore_index)
    valid = (target != ignore_index).reshape(-1)
    if xs.ndim > 2:
        xs = np.moveaxis(xs, 1, -1).reshape(-1, xs.shape[1])
    return xs, t.reshape(-1).astype(np.int64, copy=False), wt.reshape(-1), valid


def _in_row_blocks(fn, rows):
    """``fn(lo, hi)`` over row ranges: one call, or for ROWS_MIN_SIZE elements and more blocks
    of about _ROW_BLOCK elements (in cache) split over ember's threads."""
    n, c = rows.shape
    if rows.size < ROWS_MIN_SIZE:
        fn(0, n)
        return
    from ember.kernels.runtime import threadpool
    from ember.kernels.runtime.threads import working_threads
    step = max(1, _ROW_BLOCK // max(c, 1))

    def chunk(lo, hi):
        for r in range(lo, hi, step):
            fn(r, min(r + step, hi))
    threads = working_threads()
    threadpool.run_chunks(chunk, n, min(4 * threads, max(1, n // step)), threads)


def _lse_numpy(rows):
    """Log-sum-exp of each row, in float64 (from the row's max and sum in the rows' dtype)."""
    lse = np.empty(rows.shape[0], np.float64)

    def block(lo, hi):
        x = rows[lo:hi]
        if x.shape[1] <= 64:
            # short rows: the max read at argmax (the first NaN where there is one, as max)
            m = x[np.arange(x.shape[0]), x.argmax(1)]
        else:
            m = np.max(x, axis=1)
        with np.errstate(invalid="ignore"):
            log_sum = shifted_log_sum_exp(x, 1, m[:, None], log_dtype=np.float64)[1]
        lse[lo:hi] = m.astype(np.float64) + log_sum[:, 0]
    _in_row_blocks(block, rows)
    return lse


# cross entropy of (N, C) float32 logits under CE_NUMBA_MIN_SIZE elements, without class weights,
# reduced ("mean" / "sum"): one Numba pass for the loss and one for the gradient (the ce_loss /
# ce_grad rows) where the NumPy path makes ~20 calls ((64, 10): ~31 -> ~11 us forward, one
# process, warm)
def _ce_small_fits(x, target, weight, reduction):
    return weight is None and reduction != "none" and x.ndim == 2 and x.dtype == np.float32 \
        and x.flags.c_contiguous and 1 < x.shape[1] and 0 < x.size < CE_NUMBA_MIN_SIZE and \
        target.shape == x.shape[:1] and target.dtype == np.int64


def _ce_small_loss(x, target, reduction, ignore_index):
    """(loss, lse) of ``cross_entropy_loss`` by ``ce_loss_rows``; None while it compiles (the
    NumPy path runs). A target out of range raises torch's IndexError."""
    lse = np.empty(x.shape[0], np.float64)
    acc = np.zeros(4)
    if not _ce_run("ce_loss", x, target, np.int64(ignore_index), lse, acc):
        return None
    if acc[3]:
        raise IndexError(f"Target {int(acc[2])} is out of bounds for {x.shape[1]} classes.")
    if reduction == "sum":
        return np.asarray(acc[0], x.dtype), lse
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(acc[0] / acc[1], x.dtype), lse


def cross_entropy_loss(x, target, weight=None, reduction="mean", ignore_index=-100):
    """Softmax cross entropy of logits ``x`` (C,) or (N, C, d1, ...) at class indices
    ``target``; classes along dim 1 (dim 0 of a 1-D input). Returns (loss, lse): lse is each
    position's log-sum-exp over the classes (float64, the target's shape), for the backward."""
    if reduction not in ("none", "sum", "mean"):
        raise KernelError(f"{reduction} is not a valid value for reduction")
    x = to_float(x)
    if x.ndim == 0:
        raise KernelError("input tensor should be 1D or more")
    if _ce_small_fits(x, target, weight, reduction):
        out = _ce_small_loss(x, target, reduction, ignore_index)
        if out is not None:
            return out
    rows, t, wt, valid = _ce_rows(x, target, weight, ignore_index)
    m = rows.shape[0]
    if not rows.size:
        lse = np.full(m, -np.inf if rows.shape[1] == 0 else 0.0)
    elif _ce_numba_fits(rows):
        lse = np.empty(m, np.float64)
        if not _ce_run("lse", rows, lse):
            lse = _lse_numpy(rows)
    else:
        lse = _lse_numpy(rows)
    picked = rows[np.arange(m), t] if rows.shape[1] else np.zeros(m, x.dtype)
    with np.errstate(invalid="ignore"):
        losses = np.where(valid, (lse - picked) * wt, 0.0)
    lse_out = lse.reshape(target.shape)
    if reduction == "none":
        return losses.astype(x.dtype).reshape(target.shape), lse_out
    total = losses.sum()
    if reduction == "sum":
        return np.asarray(total, x.dtype), lse_out
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(total / wt.sum(dtype=np.float64), x.dtype), lse_out


def cross_entropy_loss_backward(grad, x, lse, target, weight=None, reduction="mean",
                                ignore_index=-100):
    """Gradient of ``cross_entropy_loss`` w.r.t. its logits ``x``: g * (softmax(x) - onehot)
    per position, g the incoming gradient times the target's weight (over the weights' sum for
    "mean"), in x's dtype."""
    x = to_float(x)
    dt = x.dtype
    if _ce_small_fits(x, target, weight, reduction) and grad.size == 1 and \
            lse.shape == target.shape:
        out = np.empty(x.shape, dt)
        g = grad.reshape(()).astype(np.float32)
        if reduction == "mean":   # in float32, as the NumPy path and torch divide
            with np.errstate(invalid="ignore", divide="ignore"):
                g = g / np.float32(np.count_nonzero(target != ignore_index))
        bad = np.zeros(2, np.int64)
        if _ce_run("ce_grad", x, lse.astype(np.float64, copy=False), target,
                   np.int64(ignore_index), np.float32(g), out, bad):
            if bad[1]:
                raise IndexError(f"Target {int(bad[0])} is out of bounds for {x.shape[1]} "
                                 f"classes.")
            return out
    rows, t, wt, valid = _ce_rows(x, target, weight, ignore_index)
    if reduction == "none":
        g = grad.reshape(-1) * wt
    elif reduction == "sum":
        g = grad * wt
    else:   # ignored positions get 0, also where every one is (0 / 0 elsewhere, as torch)
        with np.errstate(invalid="ignore", divide="ignore"):
            g = np.where(valid, grad * wt / wt.sum(), 0)
    g = np.ascontiguousarray(g, dt)
    lse = lse.reshape(-1)
    # lse as hi + lo in x's dtype: exp((x - hi) - lo) keeps the precision of x - max
    hi = lse.astype(dt)
    lo = (lse - hi).astype(dt)
    out = np.empty(rows.shape, dt)
    if not (_ce_numba_fits(rows) and
            _ce_run("grad", rows, hi, lo, t, g, out)):
        def block(a, b):
            o = out[a:b]
            with np.errstate(invalid="ignore"):
                np.subtract(rows[a:b], hi[a:b, None], out=o)
                o -= lo[a:b, None]
                np.exp(o, out=o)
                o *= g[a:b, None]
        _in_row_blocks(block, rows)
        if out.size:
            out[np.arange(rows.shape[0]), t] -= g
    if x.ndim == 1:
        return out.reshape(x.shape)
    if x.ndim > 2:
        shape = (x.shape[0],) + x.shape[2:] + (x.shape[1],)
        return np.ascontiguousarray(np.moveaxis(out.reshape(shape), -1, 1))
    return out


def cross_entropy_logits_grad(grad, x, lse, target, weight=None, reduction="mean",
                              ignore_index=-100):
    """The internal op ``cross_entropy_loss_backward``: ``cross_entropy_loss_backward`` with
    the operands checked (a floating ``x``, ``grad`` of ``x``'s dtype, ``lse`` one value per
    position)."""
    if x.dtype.kind != "f" or grad.dtype != x.dtype:
        raise KernelError(f"expected floating logits and grad_output of their dtype, got "
                          f"logits {x.dtype}, grad_output {grad.dtype}")
    if lse.size != target.size or lse.dtype.kind != "f":
        raise KernelError(f"expected a floating log-sum-exp per target position ({target.size}), "
                          f"got {lse.dtype}{list(lse.shape)}")
    return cross_entropy_loss_backward(grad, x, lse, target, weight, reduction, ignore_index)


# ---------------------------------------------------------------------------- batch norm
def _bn_axes(x):
    if x.ndim < 2:
        raise KernelError(f"batch_norm: expected an input with at least 2 dimensions (N, C, ...), "
                          f"got shape {list(x.shape)}")
    return (0,) + tuple(range(2, x.ndim))


def bn_param_shape(ndim, c):
    return (1, c) + (1,) * (ndim - 2)


# float32/float64 inputs of at least BN_NUMBA_MIN_SIZE elements run nn_numba's per-channel
# kernels once compiled (x viewed as (N, C, M); training forward: the mean and variance in two
# float64 passes over each channel while it is in cache, then the output; backward: sum(g) and
# sum(g * xhat), then the input's gradient; evaluation: one scale/shift pass), channels split
# over threads from BN_PARALLEL_SIZE elements. The NumPy path (several full passes and axis
# reductions) serves meanwhile and where the kernels do not fit; its results differ from the
# kernels' in the last bits (float32 pairwise sums against float64 ones, separate multiply and
# add against fused). ResNet-50's shapes at batch 8: see docs/performance.md.
BN_NUMBA_MIN_SIZE = 1 << 12
BN_PARALLEL_SIZE = 1 << 17
_bn_signatures = {}


def _bn_view(x, *params):
    """x as a C-contiguous (N, C, M) view (a copy when x is not contiguous) when the Numba
    kernels fit: float32/float64, at least BN_NUMBA_MIN_SIZE elements, each array of
    ``params`` None or of x's dtype with C elements; else None."""
    if not USE_NUMBA or x.dtype not in (np.float32, np.float64) or \
            x.size < BN_NUMBA_MIN_SIZE:
        return None
    c = x.shape[1]
    if any(p is not None and (p.dtype != x.dtype or p.size != c) for p in params):
        return None
    return np.ascontiguousarray(x).reshape(x.shape[0], c, -1)


def _bn_param(p, c, dtype, fill):
    if p is None:
        return np.full(c, fill, dtype)
    return np.ascontiguousarray(p.reshape(c))


def _bn_run(name, x3, *args):
    """Run ``nn_numba``'s ``bn_<name>_channels(x3, *args, lo, hi)`` over the channels of ``x3``
    (N, C, M) (``_split_run``); False when the caller runs NumPy. As ``_ce_run``:
    ``compiler.tier`` makes the choice per shape and dtype."""
    return split_run(f"bn_{name}_channels", f"bn_{name}_parallel", x3, args, x3.shape[1],
                      x3.size >= BN_PARALLEL_SIZE, ("batch_norm", name, x3.shape, x3.dtype.str),
                      _bn_signatures)


@in_float32
def native_batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps):
    """Batch normalisation over every axis but 1. Returns (output, mean, var) where mean and var
    are the batch statistics (biased var) when ``training``, else the running ones.

    Running statistics are not updated here (the caller does, from the returned mean and var).
    Raises KernelError for an input of fewer than 2 dims, a batch of one value per channel in
    training, or missing running statistics in evaluation.
    """
    axes = _bn_axes(x)
    c = x.shape[1]
    if training:
        n = x.size // max(c, 1)
        if n <= 1:
            raise KernelError(f"Expected more than 1 value per channel when training, got input "
                              f"size {list(x.shape)}")
        x3 = _bn_view(x, weight, bias)
        if x3 is not None:
            dt = x.dtype
            mean, var, scale, shift = (np.empty(c, dt) for _ in range(4))
            out = np.empty(x.shape, dt)
            if _bn_run("train", x3, _bn_param(weight, c, dt, 1), _bn_param(bias, c, dt, 0),
                       dt.type(eps), mean, var, scale, shift, out.reshape(x3.shape)):
                return out, mean, var
        # A one-pass float32 mean is off by a few units in the last place of a mean far from
        # zero (activations after ReLU), an error the normalised output and the gradients
        # scale by mean / std. Small inputs (those the Numba kernels leave, below
        # BN_NUMBA_MIN_SIZE elements) are normalised in float64 and rounded once; larger ones
        # (while the kernels compile) take two passes, a first mean m0 then the mean of
        # x - m0 as a correction (a sum of deviations: accurate relative to std), the sums
        # per (image, channel) matrix-vector products (BLAS: both passes cost less than
        # NumPy's float32 reduction over axes (0, 2, ...)), added over the batch in float64.
        shp = bn_param_shape(x.ndim, c)
        if x.size < BN_NUMBA_MIN_SIZE:
            x64 = x.astype(np.float64)
            mean = x64.mean(axis=axes)
            xc = x64 - mean.reshape(shp)
            var = np.square(xc).mean(axis=axes)
            scale = 1.0 / np.sqrt(var + eps)
            if weight is not None:
                scale *= weight
            out = xc * scale.reshape(shp)
            if bias is not None:
                out += bias.reshape(shp)
            return out.astype(x.dtype), mean.astype(x.dtype), var.astype(x.dtype)
        b, m = x.shape[0], n // x.shape[0]
        ones = np.ones(m, x.dtype)
        m0 = (np.matmul(x.reshape(b, c, m), ones).sum(axis=0, dtype=np.float64)
              / n).astype(x.dtype)
        xc = x - m0.reshape(shp)
        corr = np.matmul(xc.reshape(b, c, m), ones).sum(axis=0, dtype=np.float64) / n
        mean = (m0 + corr).astype(x.dtype)
        sq = np.matmul(xc.reshape(b, c, 1, m), xc.reshape(b, c, m, 1)).reshape(b, c)
        var = np.maximum(sq.sum(axis=0, dtype=np.float64) / n - corr * corr, 0.0).astype(x.dtype)
    else:
        if running_mean is None or running_var is None:
            raise KernelError("batch_norm: running_mean and running_var are required when not "
                              "training")
        mean = running_mean.astype(x.dtype)
        var = running_var.astype(x.dtype)
    invstd = 1.0 / np.sqrt(var + x.dtype.type(eps))
    scale = invstd if weight is None else weight * invstd
    shift = -mean * scale
    if bias is not None:
        shift = shift + bias
    shp = bn_param_shape(x.ndim, c)
    x3 = None if training else _bn_view(x, scale, shift)
    if x3 is not None:
        out = np.empty(x.shape, x.dtype)
        if _bn_run("affine", x3, np.ascontiguousarray(scale), np.ascontiguousarray(shift),
                   out.reshape(x3.shape)):
            return out, np.ascontiguousarray(mean, x.dtype), np.ascontiguousarray(var, x.dtype)
    if training:
        # (x - m0) * scale + (bias - corr * scale): x * scale + shift would cancel the rounding
        # of shift = bias - mean * scale (of mean * scale's size) against x * scale when
        # |mean| >> std
        out = xc * scale.reshape(shp).astype(x.dtype, copy=False)
        out += ((0.0 if bias is None else bias) - corr * scale).reshape(shp).astype(x.dtype)
        return out, np.ascontiguousarray(mean, x.dtype), np.ascontiguousarray(var, x.dtype)
    out = x * scale.reshape(shp).astype(x.dtype, copy=False)
    out += shift.reshape(shp).astype(x.dtype, copy=False)
    return out, np.ascontiguousarray(mean, x.dtype), np.ascontiguousarray(var, x.dtype)


@in_float32
def native_batch_norm_backward(grad, x, weight, mean, var, training, eps, needs):
    """Gradients of ``native_batch_norm`` for (input, weight, bias) as ndarrays (or None)."""
    axes = _bn_axes(x)
    shp = bn_param_shape(x.ndim, x.shape[1])
    invstd = (1.0 / np.sqrt(var + x.dtype.type(eps))).astype(x.dtype, copy=False)
    c = x.shape[1]
    x3 = _bn_view(x, weight, mean, invstd) if grad.shape == x.shape and \
        grad.dtype == x.dtype else None
    if x3 is not None:
        dt = x.dtype
        g3 = np.ascontiguousarray(grad).reshape(x3.shape)
        gx = np.empty(x.shape, dt) if needs[0] else np.empty(0, dt)
        gw, gb = np.empty(c, dt), np.empty(c, dt)
        if _bn_run("backward", x3, g3, np.ascontiguousarray(mean.reshape(c)),
                   np.ascontiguousarray(invstd.reshape(c)), _bn_param(weight, c, dt, 1),
                   bool(training), np.empty((c, 2), dt),
                   gx.reshape(x3.shape if needs[0] else (0, 0, 0)), gw, gb):
            return (gx if needs[0] else None, gw if needs[1] and weight is not None else None,
                    gb if needs[2] and len(needs) > 2 else None)
    xhat = (x - mean.reshape(shp)) * invstd.reshape(shp)
    gb = grad.sum(axis=axes)
    gw = (grad * xhat).sum(axis=axes)
    gx = None
    if needs[0]:
        w = invstd if weight is None else weight * invstd
        if training:
            n = x.size // x.shape[1]
            gx = (grad - (gb / n).reshape(shp) - xhat * (gw / n).reshape(shp)) * w.reshape(shp)
        else:
            gx = grad * w.reshape(shp)
    return (gx, gw if needs[1] and weight is not None else None,
            gb if needs[2] and len(needs) > 2 else None)
