"""Losses (a model may return one): nll_loss (NegativeLogLikelihoodLoss), cross_entropy
(SoftmaxCrossEntropyLoss) and pointwise losses decomposed."""
import numpy as np

from ember.onnx.registry import symbolic
from ember.onnx.symbolics._util import SymbolicError, out_dtype


def _reduce(g, node, x, reduction, batch=None):
    if reduction == "none":
        return x
    if reduction == "sum":
        return g.reduce("ReduceSum", x, None, False)
    if reduction == "mean":
        return g.reduce("ReduceMean", x, None, False)
    if reduction == "batchmean":
        s = g.reduce("ReduceSum", x, None, False)
        return g.op("Div", s, g.cast(g.dim(batch, 0), out_dtype(node)))
    raise SymbolicError(f"reduction {reduction!r} is not supported")


def _c(g, node, v):
    return g.const(np.array(v, out_dtype(node)))


@symbolic("nll_loss")
def sym_nll_loss(g, node, x, target, weight=None, reduction="mean", ignore_index=-100):
    return g.op("NegativeLogLikelihoodLoss", x, g.cast(target, np.int64), weight,
                reduction=reduction, ignore_index=int(ignore_index))


@symbolic("cross_entropy")
def sym_cross_entropy(g, node, x, target, weight=None, ignore_index=-100, reduction="mean",
                      label_smoothing=0.0):
    if label_smoothing:
        raise SymbolicError("cross_entropy with label_smoothing is not exportable")
    if node.args[1].dtype.kind == "f":
        raise SymbolicError("cross_entropy with probability targets is not exportable")
    return g.op("SoftmaxCrossEntropyLoss", x, g.cast(target, np.int64), weight,
                reduction=reduction, ignore_index=int(ignore_index))


@symbolic("cross_entropy_loss")
def sym_cross_entropy_loss(g, node, x, target, weight=None, reduction="mean", ignore_index=-100):
    """cross_entropy at class indices (ember's one-op form): SoftmaxCrossEntropyLoss, and the
    per-position log-sum-exp output as ReduceLogSumExp (float64, as ember's)."""
    one_d = len(node.args[0].shape) == 1
    xs = g.unsqueeze(x, [0]) if one_d else x
    ts = g.unsqueeze(g.cast(target, np.int64), [0]) if one_d else g.cast(target, np.int64)
    loss = g.op("SoftmaxCrossEntropyLoss", xs, ts, weight, reduction=reduction,
                ignore_index=int(ignore_index))
    if one_d and reduction == "none":
        loss = g.squeeze(loss, [0])
    lse = g.reduce("ReduceLogSumExp", x, [0 if one_d else 1], False)
    g.set_type(lse, node.args[0].dtype, node.outputs[1].shape)
    return loss, g.cast(lse, node.outputs[1].dtype)


@symbolic("mse_loss")
def sym_mse_loss(g, node, x, t, reduction="mean"):
    d = g.op("Sub", x, t)
    return _reduce(g, node, g.op("Mul", d, d), reduction)


@symbolic("l1_loss")
def sym_l1_loss(g, node, x, t, reduction="mean"):
    return _reduce(g, node, g.op("Abs", g.op("Sub", x, t)), reduction)


def _huber(g, node, x, t, delta, scale_by_beta):
    d = g.op("Abs", g.op("Sub", x, t))
    dl = _c(g, node, delta)
    quad = g.op("Mul", _c(g, node, 0.5), g.op("Mul", d, d))
    lin = g.op("Sub", d, _c(g, node, 0.5 * delta))
    if scale_by_beta:
        quad = g.op("Div", quad, dl)
    else:
        lin = g.op("Mul", lin, dl)
    return g.op("Where", g.op("Less", d, dl), quad, lin)


@symbolic("smooth_l1_loss")
def sym_smooth_l1_loss(g, node, x, t, reduction="mean", beta=1.0):
    if beta == 0:
        return _reduce(g, node, g.op("Abs", g.op("Sub", x, t)), reduction)
    return _reduce(g, node, _huber(g, node, x, t, beta, True), reduction)


@symbolic("huber_loss")
def sym_huber_loss(g, node, x, t, reduction="mean", delta=1.0):
    return _reduce(g, node, _huber(g, node, x, t, delta, False), reduction)


@symbolic("binary_cross_entropy")
def sym_bce(g, node, x, t, weight=None, reduction="mean"):
    lo = _c(g, node, -100.0)
    one = _c(g, node, 1.0)
    lx = g.op("Max", g.op("Log", x), lo)
    l1x = g.op("Max", g.op("Log", g.op("Sub", one, x)), lo)
    loss = g.op("Neg", g.op("Add", g.op("Mul", t, lx), g.op("Mul", g.op("Sub", one, t), l1x)))
    if weight is not None:
        loss = g.op("Mul", loss, weight)
    return _reduce(g, node, loss, reduction)


@symbolic("binary_cross_entropy_with_logits")
def sym_bce_logits(g, node, x, t, weight=None, pos_weight=None, reduction="mean"):
    one = _c(g, node, 1.0)
    zero = _c(g, node, 0.0)
    # log(1 + exp(-|x|)) + max(-x, 0) = -log(sigmoid(x))
    log_sig_neg = g.op("Add", g.op("Softplus", g.op("Neg", g.op("Abs", x))),
                       g.op("Max", g.op("Neg", x), zero))
    if pos_weight is not None:
        lw = g.op("Add", one, g.op("Mul", g.op("Sub", pos_weight, one), t))
        loss = g.op("Add", g.op("Mul", g.op("Sub", one, t), x), g.op("Mul", lw, log_sig_neg))
    else:
        loss = g.op("Add", g.op("Mul", g.op("Sub", one, t), x), log_sig_neg)
    if weight is not None:
        loss = g.op("Mul", loss, weight)
    return _reduce(g, node, loss, reduction)


@symbolic("kl_div")
def sym_kl_div(g, node, x, t, reduction="mean", log_target=False):
    if log_target:
        loss = g.op("Mul", g.op("Exp", t), g.op("Sub", t, x))
    else:
        zero = _c(g, node, 0.0)
        pos = g.op("Greater", t, zero)
        safe = g.op("Where", pos, t, _c(g, node, 1.0))
        loss = g.op("Where", pos, g.op("Mul", t, g.op("Sub", g.op("Log", safe), x)), zero)
    return _reduce(g, node, loss, reduction, batch=x)
