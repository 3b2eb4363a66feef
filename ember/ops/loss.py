"""Loss functions written in other spec ops (declared ``composite`` in ember/ops/spec/loss.yaml),
so their gradients, tracing and export come from those ops."""
from ember.autograd._generated import functions as G
from ember.errors import EmberRuntimeError
from ember.errors import public as _public
from ember.ops.nn import _static_sizes


_REDUCTIONS = ("none", "mean", "sum")


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


def binary_cross_entropy_with_logits(input, target, weight=None, reduction="mean",
                                     pos_weight=None):
    if tuple(input._data.shape) != tuple(target._data.shape):
        raise ValueError(f"binary_cross_entropy_with_logits: target size "
                         f"({list(target._data.shape)}) must be the same as input size "
                         f"({list(input._data.shape)})")
    if target._data.dtype.kind not in "fc":
        raise EmberRuntimeError(f"binary_cross_entropy_with_logits: expected a floating target "
                                f"(the input's dtype, {input._data.dtype}), got "
                                f"{target._data.dtype}: result type can't be cast to the "
                                f"desired output type; convert it with target.float()")
    # -t log(sigmoid(x)) - (1 - t) log(1 - sigmoid(x)) = (1 - t) x - log(sigmoid(x)), as torch
    # composes it (log(1 - sigmoid(x)) = log(sigmoid(x)) - x); pos_weight scales the second term
    # by 1 + (pos_weight - 1) t
    log_sig = G.logsigmoid(input)
    if pos_weight is not None:
        log_sig = G.mul(log_sig, G.add(G.mul(G.sub(pos_weight, 1.0), target), 1.0))
    loss = G.sub(G.mul(G.sub(1.0, target), input), log_sig)
    if weight is not None:
        loss = G.mul(loss, weight)
    return _reduce(loss, reduction, "binary_cross_entropy_with_logits")


def _probabilities_must_be_float(target):
    raise EmberRuntimeError(f"Expected floating point type for target with class probabilities, "
                            f"got {target._data.dtype} (a target of the input's shape "
                            f"{list(target._data.shape)} holds class probabilities; class "
                            f"indices have no class dimension)")


def _float_targets_error(input, target):
    s = list(input._data.shape)
    want = s[:1] + s[2:] if len(s) > 1 else []
    raise EmberRuntimeError(f"expected target dtype to be Long or Byte, but got "
                            f"{target._data.dtype}: class-index targets are int64 of shape "
                            f"{want}, class-probability targets are floats of the input's shape "
                            f"{s}; got {target._data.dtype} of shape "
                            f"{list(target._data.shape)}")


def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean",
                  label_smoothing=0.0):
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be between 0.0 and 1.0, got "
                         f"{label_smoothing}")
    cdim = 1 if input.dim() > 1 else 0
    if target._data.dtype.kind != "f" and label_smoothing <= 0:
        if target._data.shape == input._data.shape:
            _probabilities_must_be_float(target)
        # one op: its backward is softmax - onehot in one pass (no dense nll gradient)
        return G.cross_entropy_loss(input, target, weight, reduction, ignore_index)[0]
    if target._data.dtype.kind == "f":  # class probabilities
        if tuple(target._data.shape) != tuple(input._data.shape):
            _float_targets_error(input, target)
    elif target._data.shape == input._data.shape:
        _probabilities_must_be_float(target)
    logp = G.log_softmax(input, cdim, None)
    if target._data.dtype.kind == "f":
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


def kl_div(input, target, reduction="mean", log_target=False):
    if log_target:
        loss = G.mul(G.exp(target), G.sub(target, input))
    else:
        loss = G.sub(G.xlogy(target, target), G.mul(target, input))   # NaN where target < 0
    if reduction == "batchmean":
        return G.div(G.sum(loss), input.shape[0] if input.dim() else 1)  # traced batch size
    return _reduce(loss, reduction, "kl_div")


def huber_loss(input, target, reduction="mean", delta=1.0):
    d = G.abs(G.sub(input, target))
    quad = G.mul(G.mul(d, d), 0.5)
    lin = G.mul(G.sub(d, 0.5 * delta), delta)
    return _reduce(G.where(G.lt(d, delta), quad, lin), reduction, "huber_loss")


# these raise ember's errors naming them (ember.errors.public)
for _n in ("mse_loss", "l1_loss", "smooth_l1_loss", "binary_cross_entropy_with_logits",
           "cross_entropy", "kl_div", "huber_loss"):
    globals()[_n] = _public(globals()[_n])
del _n
