"""The vision importers (ember/onnx/importer/ops_vision.py) against ONNX's reference evaluator:
RoiAlign in avg and max mode at both half-pixel settings, and DeformConv with offsets and a
mask."""
import numpy as np
import pytest

from tests.onnx.importer.reference import helper, same_as_reference

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 3, 8, 8)).astype(np.float32)
ROIS = np.array([[0.5, 1.0, 6.0, 7.5], [2.0, 0.0, 7.9, 4.0], [0.0, 0.0, 3.0, 3.0]], np.float32)
IDX = np.array([0, 1, 1], np.int64)


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("ctm", ["half_pixel", "output_half_pixel"])
def test_roi_align(mode, ctm):
    same_as_reference([helper.make_node("RoiAlign", ["x", "r", "i"], ["y"], mode=mode,
                                        output_height=3, output_width=2, sampling_ratio=2,
                                        spatial_scale=0.9, coordinate_transformation_mode=ctm)],
                      {"x": X, "r": ROIS, "i": IDX}, ["y"], opset=16, rtol=1e-5, atol=1e-6)


def test_deform_conv_with_offsets_and_mask():
    w = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
    off = RNG.uniform(-1.5, 1.5, (2, 2 * 9, 6, 6)).astype(np.float32)
    mask = RNG.uniform(0, 1, (2, 9, 6, 6)).astype(np.float32)
    b = RNG.standard_normal(4).astype(np.float32)
    same_as_reference([helper.make_node("DeformConv", ["x", "w", "o", "b", "m"], ["y"])],
                      {"x": X, "w": w, "o": off, "b": b, "m": mask}, ["y"], opset=19,
                      rtol=1e-4, atol=1e-5)
