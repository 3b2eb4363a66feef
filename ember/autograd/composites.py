"""Ops declared ``composite`` in derivatives.yaml: written in other spec ops, so their gradients,
tracing and export come from those ops (as torch's CompositeImplicitAutograd ops do)."""
import ember.autograd._generated as G
from ember.errors import public as _public

_REDUCTIONS = ("none", "mean", "sum")


def _static_sizes(t, dims, op, why):
    """``t``'s sizes ``dims`` as plain ints for a constant ``op`` computes from them in Python
    (``why``): an active tracer guards them, so the trace warns when called with other sizes
    there (see ember.jit.guards)."""
    from ember.autograd.state import STATE
    tracer = STATE.tracer
    if tracer is not None and hasattr(tracer, "shape_read"):
        tracer.shape_read(t, dims, op, why)
    return tuple(t._data.shape[d] for d in dims)


def _reduce(loss, reduction, op):
    if reduction == "mean":
        return G.mean(loss)
    if reduction == "sum":
        return G.sum(loss)
    if reduction == "none":
        return loss
    raise ValueError(f"{op}: {reduction!r} is not a valid value for reduction "
                     f"(expected one of {_REDUCTIONS})")


def _check_same_shape(op, input, target):
    if hasattr(target, "_data") and input._data.shape != target._data.shape:
        import warnings
        warnings.warn(f"{op}: using a target size ({list(target._data.shape)}) that is different "
                      f"to the input size ({list(input._data.shape)}); this will likely lead to "
                      "incorrect results due to broadcasting.", stacklevel=4)


def mse_loss(input, target, reduction="mean"):
    _check_same_shape("mse_loss", input, target)
    d = G.sub(input, target)
    return _reduce(G.mul(d, d), reduction, "mse_loss")


def l1_loss(input, target, reduction="mean"):
    _check_same_shape("l1_loss", input, target)
    return _reduce(G.abs(G.sub(input, target)), reduction, "l1_loss")


def smooth_l1_loss(input, target, reduction="mean", beta=1.0):
    _check_same_shape("smooth_l1_loss", input, target)
    d = G.abs(G.sub(input, target))
    if beta == 0:
        return _reduce(d, reduction, "smooth_l1_loss")
    quad = G.div(G.mul(G.mul(d, d), 0.5), beta)
    lin = G.sub(d, 0.5 * beta)
    return _reduce(G.where(G.lt(d, beta), quad, lin), reduction, "smooth_l1_loss")


def binary_cross_entropy(input, target, weight=None, reduction="mean"):
    if tuple(input._data.shape) != tuple(target._data.shape):
        raise ValueError(f"binary_cross_entropy: target size ({list(target._data.shape)}) must be "
                         f"the same as input size ({list(input._data.shape)})")
    logx = G.clamp(G.log(input), -100.0, None)
    log1mx = G.clamp(G.log(G.sub(1.0, input)), -100.0, None)
    loss = G.neg(G.add(G.mul(target, logx), G.mul(G.sub(1.0, target), log1mx)))
    if weight is not None:
        loss = G.mul(loss, weight)
    return _reduce(loss, reduction, "binary_cross_entropy")


def binary_cross_entropy_with_logits(input, target, weight=None, reduction="mean",
                                     pos_weight=None):
    if tuple(input._data.shape) != tuple(target._data.shape):
        raise ValueError(f"binary_cross_entropy_with_logits: target size "
                         f"({list(target._data.shape)}) must be the same as input size "
                         f"({list(input._data.shape)})")
    # log(sigmoid(x)) = -softplus(-x); log(1 - sigmoid(x)) = -softplus(x)
    log_sig = G.neg(G.softplus(G.neg(input), 1.0, 20.0))
    log_1m = G.neg(G.softplus(input, 1.0, 20.0))
    pos = G.mul(target, log_sig)
    if pos_weight is not None:
        pos = G.mul(pos, pos_weight)
    loss = G.neg(G.add(pos, G.mul(G.sub(1.0, target), log_1m)))
    if weight is not None:
        loss = G.mul(loss, weight)
    return _reduce(loss, reduction, "binary_cross_entropy_with_logits")


def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean",
                  label_smoothing=0.0):
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be between 0.0 and 1.0, got "
                         f"{label_smoothing}")
    cdim = 1 if input.dim() > 1 else 0
    if target._data.dtype.kind != "f" and label_smoothing <= 0:
        # one op: its backward is softmax - onehot in one pass (no dense nll gradient)
        return G.cross_entropy_loss(input, target, weight, reduction, ignore_index)[0]
    logp = G.log_softmax(input, cdim, None)
    if target._data.dtype.kind == "f":  # class probabilities
        if tuple(target._data.shape) != tuple(input._data.shape):
            raise ValueError(f"cross_entropy: probability targets must have the input's shape "
                             f"{list(input._data.shape)}, got {list(target._data.shape)}")
        n_cls = input._data.shape[cdim]
        if label_smoothing > 0:
            _static_sizes(input, (cdim,), "cross_entropy", "label_smoothing / classes")
            target = G.add(G.mul(target, 1 - label_smoothing), label_smoothing / n_cls)
        prod = G.mul(logp, target)
        if weight is not None:
            shape = [1] * input.dim()
            shape[cdim] = n_cls
            prod = G.mul(prod, G.reshape(weight, tuple(shape)))
        loss = G.neg(G.sum(prod, (cdim,), False))
        if reduction == "mean":  # traced sizes: the divisor follows the input's shape
            n = input.shape[0] if input.dim() > 1 else 1
            for s in input.shape[2:]:
                n *= s
            return G.div(G.sum(loss), n)
        return _reduce(loss, reduction, "cross_entropy")
    nll = G.nll_loss(logp, target, weight, reduction, ignore_index)
    if label_smoothing <= 0:
        return nll
    n_cls = _static_sizes(input, (cdim,), "cross_entropy", "label_smoothing / classes")[0]
    lp = logp
    if weight is not None:
        shape = [1] * input.dim()
        shape[cdim] = n_cls
        lp = G.mul(lp, G.reshape(weight, tuple(shape)))
    smooth = G.neg(G.sum(lp, (cdim,), False))
    valid = G.ne(target, ignore_index)
    smooth = G.where(valid, smooth, G.mul(smooth, 0.0))
    if reduction == "mean":
        if weight is not None:
            w = G.where(valid, G.index_select(weight, 0, G.where(valid, target, 0).reshape(-1))
                        .reshape(target._data.shape), 0.0 * G.sum(weight))
            smooth = G.div(G.sum(smooth), G.sum(w))
        else:
            smooth = G.div(G.sum(smooth), G.sum(G.to(valid, smooth._data.dtype)))
    elif reduction == "sum":
        smooth = G.sum(smooth)
    return G.add(G.mul(nll, 1 - label_smoothing), G.mul(smooth, label_smoothing / n_cls))


def expand_as(input, other):
    return G.expand(input, tuple(other.shape))


def view_as(input, other):
    return G.view(input, tuple(other.shape))


def reshape_as(input, other):
    return G.reshape(input, tuple(other.shape))


def square(input):
    if input._data.dtype == np.bool_:  # torch: bool squares to int64 (as pow(x, 2))
        input = G.to(input, np.dtype(np.int64))
    return G.mul(input, input)


def _opmath(*xs):
    """``(xs, out)``: the Tensors among ``xs`` cast to the dtype torch computes a one-kernel
    floating op in (their common dtype; float32 for float16/bfloat16), and the dtype to round
    the result to (None when it is the compute dtype, or the common dtype is not floating)."""
    from ember.kernels.dtypes import promote_categories
    from ember.kernels.opmath import F32, is_reduced
    from ember.tensor import Tensor
    ts = [x for x in xs if isinstance(x, Tensor)]
    common = promote_categories([t._data.dtype for t in ts if t._data.ndim],
                                [t._data.dtype for t in ts if not t._data.ndim])
    if common is None or common.kind not in "fV":
        return xs, None
    compute = F32 if is_reduced(common) else common
    return (tuple(G.to(x, compute) if isinstance(x, Tensor) and x._data.dtype != compute else x
                  for x in xs), common if compute != common else None)


def addcmul(input, tensor1, tensor2, value=1):
    """``input + value * tensor1 * tensor2`` (float16/bfloat16 computed in float32 and rounded
    once, as torch's kernel)."""
    (input, tensor1, tensor2), low = _opmath(input, tensor1, tensor2)
    out = G.add(input, G.mul(G.mul(tensor1, tensor2), value))
    return out if low is None else G.to(out, low)


def addcdiv(input, tensor1, tensor2, value=1):
    """``input + value * tensor1 / tensor2`` (float16/bfloat16 computed in float32 and rounded
    once, as torch's kernel)."""
    (input, tensor1, tensor2), low = _opmath(input, tensor1, tensor2)
    out = G.add(input, G.mul(G.div(tensor1, tensor2), value))
    return out if low is None else G.to(out, low)


def relu6(input):
    return G.hardtanh(input, 0.0, 6.0)


def mish(input):
    return G.mul(input, G.tanh(G.softplus(input, 1.0, 20.0)))


def hardsigmoid(input):
    return G.div(G.clamp(G.add(input, 3.0), 0.0, 6.0), 6.0)


def hardswish(input):
    return G.mul(input, hardsigmoid(input))


def logsigmoid(input):
    return G.neg(G.softplus(G.neg(input), 1.0, 20.0))


def softsign(input):
    return G.div(input, G.add(G.abs(input), 1.0))


def _broadcast_shape(a, b):
    """NumPy's broadcast of shapes ``a`` and ``b`` (SymInts stay traced)."""
    import numpy as np
    np.broadcast_shapes(tuple(int.__int__(s) for s in a), tuple(int.__int__(s) for s in b))
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    return tuple(x if y == 1 else y for x, y in zip(a, b))


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    shape = _broadcast_shape(tuple(x1.shape), tuple(x2.shape))  # traced sizes
    x1, x2 = G.expand(x1, shape), G.expand(x2, shape)
    # torch's order: each input divided by its norm first, then the sum of products (the
    # product of the norms, or the dot product, overflows float16 where this does not)
    n1 = G.clamp(G.norm(x1, 2, (dim,), True), eps, None)
    n2 = G.clamp(G.norm(x2, 2, (dim,), True), eps, None)
    return G.sum(G.mul(G.div(x1, n1), G.div(x2, n2)), (dim,), False)


def kl_div(input, target, reduction="mean", log_target=False):
    if log_target:
        loss = G.mul(G.exp(target), G.sub(target, input))
    else:
        safe = G.where(G.gt(target, 0), target, 1.0)
        loss = G.where(G.gt(target, 0), G.mul(target, G.sub(G.log(safe), input)), 0.0)
    if reduction == "batchmean":
        return G.div(G.sum(loss), input.shape[0] if input.dim() else 1)  # traced batch size
    return _reduce(loss, reduction, "kl_div")


def huber_loss(input, target, reduction="mean", delta=1.0):
    d = G.abs(G.sub(input, target))
    quad = G.mul(G.mul(d, d), 0.5)
    lin = G.mul(G.sub(d, 0.5 * delta), delta)
    return _reduce(G.where(G.lt(d, delta), quad, lin), reduction, "huber_loss")


# ---------------------------------------------------------------- nn layers
import numpy as np  # noqa: E402


def _nn_const(arr):
    from ember.autograd.formulas import _const
    return _const(arr)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """torch.nn.functional.batch_norm: normalise with batch statistics (training) or the running
    ones; in training the running statistics are updated in place (outside autograd)."""
    out, mean, var = G.native_batch_norm(input, weight, bias, running_mean, running_var,
                                         training, momentum, eps)
    _update_running(input, running_mean, running_var, training, momentum, mean, var)
    return out


def native_batch_norm_outputs(input, weight, bias, running_mean, running_var, training,
                              momentum, eps):
    """torch.native_batch_norm: (output, save_mean, save_invstd), the running statistics
    updated in place in training; in evaluation the saved statistics are empty, as torch."""
    out, mean, var = G.native_batch_norm(input, weight, bias, running_mean, running_var,
                                         training, momentum, eps)
    _update_running(input, running_mean, running_var, training, momentum, mean, var)
    if not training:
        empty = G.zeros((0,), input._data.dtype)
        return out, empty, G.clone(empty)
    return out, mean, G.rsqrt(G.add(var, eps))


def _update_running(input, running_mean, running_var, training, momentum, mean, var):
    from ember.autograd.grad_mode import no_grad
    if training and running_mean is not None and running_var is not None:
        n = input.numel() // input.shape[1]  # traced: the correction follows the batch size
        with no_grad():
            m = momentum
            G.copy_(running_mean, G.add(G.mul(running_mean, 1.0 - m),
                                        G.mul(G.to(mean, running_mean._data.dtype, False), m)))
            unbiased = G.div(G.mul(G.to(var, running_var._data.dtype, False), n),
                             max(n - 1, 1))
            G.copy_(running_var, G.add(G.mul(running_var, 1.0 - m), G.mul(unbiased, m)))


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """torch.nn.functional.group_norm (float16/bfloat16 computed in float32 and rounded once,
    as torch's kernel)."""
    (x32, w32, b32), low = _opmath(input, weight, bias)
    if low is not None:
        return G.to(group_norm(x32, num_groups, w32, b32, eps), low)
    shape = tuple(input.shape)  # traced sizes (instance_norm passes a traced num_groups)
    if len(shape) < 2 or shape[1] % num_groups:
        raise RuntimeError(f"group_norm: expected an input (N, C, ...) with C divisible by "
                           f"num_groups={num_groups}, got shape {list(shape)}")
    # traced batch size; an empty batch cannot infer the -1 (torch gives an empty result)
    rest = -1 if input._data.size else int(np.prod(shape[1:], dtype=np.int64)) // num_groups
    x = G.reshape(input, (input.shape[0], num_groups, rest))
    mean = G.mean(x, (2,), True)
    xc = G.sub(x, mean)
    y = G.mul(xc, G.rsqrt(G.add(G.mean(G.mul(xc, xc), (2,), True), eps)))
    y = G.reshape(y, tuple(input.shape))
    pshape = (1, shape[1]) + (1,) * (len(shape) - 2)
    if weight is not None:
        y = G.mul(y, G.reshape(weight, pshape))
    if bias is not None:
        y = G.add(y, G.reshape(bias, pshape))
    return y


def pixel_shuffle(input, upscale_factor):
    r = upscale_factor
    *lead, c, h, w = input.shape  # traced, so a trace follows the input's shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible "
                           f"by the square of upscale_factor, but input.size(-3)={c} is not "
                           f"divisible by {r * r}")
    n = len(lead)
    x = G.reshape(input, tuple(lead) + (c // (r * r), r, r, h, w))
    x = G.permute(x, tuple(range(n)) + tuple(n + i for i in (0, 3, 1, 4, 2)))
    return G.reshape(x, tuple(lead) + (c // (r * r), h * r, w * r))


def pixel_unshuffle(input, downscale_factor):
    r = downscale_factor
    *lead, c, h, w = input.shape  # traced, so a trace follows the input's shape
    if h % r or w % r:
        raise RuntimeError(f"pixel_unshuffle expects height and width to be divisible by "
                           f"downscale_factor={r}, got {h}x{w}")
    n = len(lead)
    x = G.reshape(input, tuple(lead) + (c, h // r, r, w // r, r))
    x = G.permute(x, tuple(range(n)) + tuple(n + i for i in (0, 2, 4, 1, 3)))
    return G.reshape(x, tuple(lead) + (c * r * r, h // r, w // r))


def _nearest_index(size_in, size_out):
    scale = np.float32(size_in / size_out)
    src = np.floor(np.arange(size_out, dtype=np.float32) * scale).astype(np.int64)
    return np.minimum(src, size_in - 1)


def _static_out(output_size, op):
    """The output size as plain ints (sizes computed from a traced shape are guarded)."""
    from ember.autograd.state import STATE
    tracer = STATE.tracer
    out = []
    for s in output_size:
        if hasattr(s, "expr") and hasattr(tracer, "shape_guard"):
            tracer.shape_guard("value", s, None, int.__int__(s), f"{op}: output size")
        out.append(int.__int__(s))
    return out


def upsample_nearest2d(input, output_size):
    # index arrays built in NumPy from the sizes: a trace holds them for these sizes only
    ih, iw = _static_sizes(input, (-2, -1), "upsample_nearest2d", "index arrays")
    oh, ow = _static_out(output_size, "upsample_nearest2d")
    rows = _nearest_index(ih, oh)
    cols = _nearest_index(iw, ow)
    return G.getitem(input, (Ellipsis, rows[:, None], cols[None, :]))


def _linear_taps(size_in, size_out, align_corners, dtype):
    dst = np.arange(size_out, dtype=np.float64)
    if align_corners:
        src = dst * ((size_in - 1) / (size_out - 1)) if size_out > 1 else dst * 0.0
    else:
        src = np.maximum((dst + 0.5) * (size_in / size_out) - 0.5, 0.0)
    i0 = np.minimum(np.floor(src).astype(np.int64), size_in - 1)
    i1 = np.minimum(i0 + 1, size_in - 1)
    lam = (src - i0).astype(dtype)
    return i0, i1, lam


def upsample_bilinear2d(input, output_size, align_corners=False):
    # index arrays and weights built in NumPy: a trace holds them for these sizes only
    ih, iw = _static_sizes(input, (-2, -1), "upsample_bilinear2d", "index arrays")
    oh, ow = _static_out(output_size, "upsample_bilinear2d")
    dt = input._data.dtype
    r0, r1, lr = _linear_taps(ih, oh, align_corners, dt)
    c0, c1, lc = _linear_taps(iw, ow, align_corners, dt)
    lr = _nn_const(lr[:, None])
    lc = _nn_const(lc)
    top = G.getitem(input, (Ellipsis, r0, slice(None)))
    bot = G.getitem(input, (Ellipsis, r1, slice(None)))
    x = G.add(top, G.mul(G.sub(bot, top), lr))
    left = G.getitem(x, (Ellipsis, c0))
    right = G.getitem(x, (Ellipsis, c1))
    return G.add(left, G.mul(G.sub(right, left), lc))


# every composite raises ember's errors naming it (ember.errors.public)
for _n, _f in list(globals().items()):
    if not _n.startswith("_") and callable(_f) and getattr(_f, "__module__", None) == __name__:
        globals()[_n] = _public(_f)
del _n, _f
