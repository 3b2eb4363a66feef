"""The signal importers (ember/onnx/importer/ops_signal.py) against ONNX's reference evaluator:
DFT forward, inverse and onesided in both opset forms, STFT with a window, MelWeightMatrix."""
import numpy as np
import pytest

from tests.onnx.importer.reference import TensorProto, helper, same_as_reference

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 16, 1)).astype(np.float32)


@pytest.mark.parametrize("inverse,onesided", [(0, 0), (1, 0), (0, 1)])
def test_dft_opset_20(inverse, onesided):
    same_as_reference([helper.make_node("DFT", ["x", "", "ax"], ["y"], inverse=inverse,
                                        onesided=onesided)],
                      {"x": X, "ax": np.array(1, np.int64)}, ["y"], opset=20, rtol=1e-4,
                      atol=1e-5)


def test_dft_opset_17_axis_attribute_and_length():
    same_as_reference([helper.make_node("DFT", ["x", "n"], ["y"], axis=1)],
                      {"x": X, "n": np.array(10, np.int64)}, ["y"], opset=17, rtol=1e-4,
                      atol=1e-5)


def test_stft_and_mel_weight_matrix():
    sig = RNG.standard_normal((1, 64, 1)).astype(np.float32)
    same_as_reference([helper.make_node("STFT", ["s", "step", "w", "len"], ["y"])],
                      {"s": sig, "step": np.array(8, np.int64),
                       "w": np.hanning(16).astype(np.float32), "len": np.array(16, np.int64)},
                      ["y"], opset=17, rtol=1e-4, atol=1e-4)
    same_as_reference([helper.make_node("MelWeightMatrix", ["m", "d", "r", "lo", "hi"], ["y"],
                                        output_datatype=TensorProto.FLOAT)],
                      {"m": np.array(8, np.int64), "d": np.array(32, np.int64),
                       "r": np.array(8000, np.int64), "lo": np.float32(100.0),
                       "hi": np.float32(3500.0)}, ["y"], opset=17, rtol=1e-5, atol=1e-6)
