"""The loss importers (ember/onnx/importer/ops_loss.py) against ONNX's reference evaluator:
NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss with each reduction, class weights and an
ignore_index, and the log-probabilities output."""
import numpy as np
import pytest

from tests.onnx.importer.reference import helper, same_as_reference

RNG = np.random.default_rng(0)
X = RNG.standard_normal((4, 5, 3)).astype(np.float32)
T = RNG.integers(0, 5, (4, 3)).astype(np.int64)
T[0, 0] = 2
W = RNG.uniform(0.5, 1.5, 5).astype(np.float32)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss(reduction, weighted):
    ins = ["x", "t", "w"] if weighted else ["x", "t"]
    feeds = {"x": X, "t": T, **({"w": W} if weighted else {})}
    same_as_reference([helper.make_node("NegativeLogLikelihoodLoss", ins, ["y"],
                                        reduction=reduction, ignore_index=2)], feeds, ["y"],
                      rtol=1e-5)


@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_softmax_cross_entropy_with_log_prob(reduction):
    same_as_reference([helper.make_node("SoftmaxCrossEntropyLoss", ["x", "t", "w"],
                                        ["y", "logp"], reduction=reduction)],
                      {"x": X, "t": T, "w": W}, ["y", "logp"], rtol=1e-5, atol=1e-6)
