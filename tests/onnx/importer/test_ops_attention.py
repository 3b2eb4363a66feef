"""The attention importer (ember/onnx/importer/ops_attention.py) against ONNX's reference
evaluator: Attention (opset 23) on 4-d and 3-d inputs, grouped key/value heads, causal, a boolean
and an additive mask, a scale and softcap."""
import numpy as np
import pytest

from tests.onnx.importer.reference import helper, same_as_reference

RNG = np.random.default_rng(0)
Q = RNG.standard_normal((2, 4, 5, 8)).astype(np.float32)
K = RNG.standard_normal((2, 2, 6, 8)).astype(np.float32)
V = RNG.standard_normal((2, 2, 6, 8)).astype(np.float32)


@pytest.mark.parametrize("attrs", [{}, {"is_causal": 1}, {"scale": 0.3}, {"softcap": 2.0}])
def test_grouped_heads(attrs):
    same_as_reference([helper.make_node("Attention", ["q", "k", "v"], ["y"], **attrs)],
                      {"q": Q, "k": K, "v": V}, ["y"], opset=23, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_masks(kind):
    m = RNG.random((5, 6)) > 0.3
    m[:, 0] = True
    mask = m if kind == "bool" else np.where(m, 0.0, -1e4).astype(np.float32)
    same_as_reference([helper.make_node("Attention", ["q", "k", "v", "m"], ["y"])],
                      {"q": Q, "k": K, "v": V, "m": mask}, ["y"], opset=23, rtol=1e-5,
                      atol=1e-6)


def test_three_d_inputs_with_head_counts():
    q = Q.transpose(0, 2, 1, 3).reshape(2, 5, 32)
    k = K.transpose(0, 2, 1, 3).reshape(2, 6, 16)
    v = V.transpose(0, 2, 1, 3).reshape(2, 6, 16)
    same_as_reference([helper.make_node("Attention", ["q", "k", "v"], ["y"], q_num_heads=4,
                                        kv_num_heads=2)], {"q": q, "k": k, "v": v}, ["y"],
                      opset=23, rtol=1e-5, atol=1e-6)
