"""The ai.onnx.ml importers (ember/onnx/importer/ops_ml.py) against ONNX's reference evaluator:
ArrayFeatureExtractor, Binarizer, LabelEncoder (ints to strings and strings to floats) and a
small TreeEnsemble regressor."""
import numpy as np

from tests.onnx.importer.reference import helper, onnx, same_as_reference

ML = [("ai.onnx.ml", 5)]


def _node(op, ins, outs, **kw):
    return helper.make_node(op, ins, outs, domain="ai.onnx.ml", **kw)


def test_array_feature_extractor_and_binarizer():
    x = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    same_as_reference([_node("ArrayFeatureExtractor", ["x", "i"], ["f"]),
                       _node("Binarizer", ["x"], ["b"], threshold=1.5)],
                      {"x": x, "i": np.array([3, 0], np.int64)}, ["f", "b"], domains=ML)


def test_label_encoder_both_ways():
    same_as_reference([_node("LabelEncoder", ["x"], ["y"], keys_int64s=[1, 2, 3],
                             values_strings=["a", "b", "c"], default_string="?")],
                      {"x": np.array([3, 1, 7], np.int64)}, ["y"], domains=ML)
    same_as_reference([_node("LabelEncoder", ["x"], ["y"], keys_strings=["a", "b"],
                             values_floats=[0.5, 1.5], default_float=-1.0)],
                      {"x": np.array(["b", "z", "a"], dtype=object)}, ["y"], domains=ML)


def test_tree_ensemble_regressor():
    def t(a, dt=np.int64):
        return onnx.numpy_helper.from_array(np.array(a, dt))
    # one tree: x0 <= 0.5 ? (x1 <= 2 ? 1.0 : 2.0) : 3.0
    node = _node("TreeEnsemble", ["x"], ["y"], aggregate_function=1, post_transform=0,
                 n_targets=1, tree_roots=[0], nodes_featureids=[0, 1],
                 nodes_splits=t([0.5, 2.0], np.float32), nodes_modes=t([0, 0], np.uint8),
                 nodes_truenodeids=[1, 0], nodes_trueleafs=[0, 1], nodes_falsenodeids=[2, 1],
                 nodes_falseleafs=[1, 1], leaf_targetids=[0, 0, 0],
                 leaf_weights=t([1.0, 2.0, 3.0], np.float32))
    x = np.array([[0.0, 1.0], [0.2, 5.0], [0.9, 0.0]], np.float32)
    same_as_reference([node], {"x": x}, ["y"], domains=ML)
