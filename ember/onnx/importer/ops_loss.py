"""Loss ONNX ops: NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss."""
import ember
from ember.onnx.importer.registry import importer

_RED = ("none", "sum", "mean")


def _check(a, n):
    return None if a["reduction"] in _RED else ("reduction", f"= '{a['reduction']}' is not one "
                                                             f"of {_RED}")


def _nll(x, t, w, reduction, ignore):
    t = t.to(ember.int64)
    valid = None if ignore is None else t != ignore
    tc = t if valid is None else ember.where(valid, t, ember.zeros_like(t))
    picked = -ember.gather(x, 1, tc.unsqueeze(1)).squeeze(1)
    wt = ember.ones_like(picked) if w is None else \
        ember.index_select(w, 0, tc.reshape(-1)).reshape(*tc.shape)
    if valid is not None:
        wt = ember.where(valid, wt, ember.zeros_like(wt))
    loss = picked * wt
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / wt.sum()


@importer("NegativeLogLikelihoodLoss", since=12, check=_check,
          attrs={"reduction": "mean", "ignore_index": None})
def nll_loss(a, x, target, weight=None):
    return _nll(x, target, weight, a["reduction"], a["ignore_index"])


@importer("SoftmaxCrossEntropyLoss", since=12, check=_check, max_outputs=2,
          attrs={"reduction": "mean", "ignore_index": None})
def softmax_cross_entropy(a, scores, labels, weights=None):
    logp = ember.log_softmax(scores, 1)
    return _nll(logp, labels, weights, a["reduction"], a["ignore_index"]), logp
