"""The optimizer importers of ai.onnx.preview.training (ember/onnx/importer/ops_training.py)
against ONNX's reference evaluator: Adagrad, Momentum (standard and Nesterov) and Adam, each
updating two tensors in one node."""
import numpy as np
import pytest

from tests.onnx.importer.reference import helper, same_as_reference

DOM = [("ai.onnx.preview.training", 1)]
RNG = np.random.default_rng(0)
X1, X2 = RNG.standard_normal(3).astype(np.float32), RNG.standard_normal((2, 2)).astype(np.float32)
G1, G2 = RNG.standard_normal(3).astype(np.float32), RNG.standard_normal((2, 2)).astype(np.float32)
COMMON = {"r": np.float32(0.1), "t": np.int64(3), "x1": X1, "x2": X2, "g1": G1, "g2": G2}


def _node(op, ins, outs, **kw):
    return helper.make_node(op, ins, outs, domain="ai.onnx.preview.training", **kw)


def test_adagrad():
    feeds = dict(COMMON, h1=np.abs(G1), h2=np.abs(G2))
    same_as_reference([_node("Adagrad", ["r", "t", "x1", "x2", "g1", "g2", "h1", "h2"],
                             ["y1", "y2", "k1", "k2"], decay_factor=0.1, epsilon=1e-6,
                             norm_coefficient=0.01)], feeds, ["y1", "y2", "k1", "k2"],
                      domains=DOM, rtol=1e-5)


@pytest.mark.parametrize("mode", ["standard", "nesterov"])
def test_momentum(mode):
    feeds = dict(COMMON, v1=G1 * 0.5, v2=G2 * 0.5)
    same_as_reference([_node("Momentum", ["r", "t", "x1", "x2", "g1", "g2", "v1", "v2"],
                             ["y1", "y2", "w1", "w2"], alpha=0.9, beta=0.8, mode=mode,
                             norm_coefficient=0.01)], feeds, ["y1", "y2", "w1", "w2"],
                      domains=DOM, rtol=1e-5)


def test_adam():
    feeds = dict(COMMON, v1=G1 * 0.1, v2=G2 * 0.1, h1=np.abs(G1), h2=np.abs(G2))
    same_as_reference([_node("Adam", ["r", "t", "x1", "x2", "g1", "g2", "v1", "v2", "h1", "h2"],
                             ["y1", "y2", "a1", "a2", "b1", "b2"], alpha=0.9, beta=0.999,
                             epsilon=1e-6, norm_coefficient=0.01, norm_coefficient_post=0.02)],
                      feeds, ["y1", "y2", "a1", "a2", "b1", "b2"], domains=DOM, rtol=1e-5)
