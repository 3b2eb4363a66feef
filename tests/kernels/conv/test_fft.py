"""Tiled FFT (overlap-save) convolution, forward and input gradient against torch: kernel sizes up to 7x7, dilation, groups, asymmetric padding, outputs spanning several tiles; strided problems refused."""
import os
import sys

import numpy as np
import pytest

from ember.kernels.conv import fft
from ember.kernels.conv.geometry import geometry

sys.path.insert(0, os.path.dirname(__file__))
from _torch_reference import assert_matches, problem, torch_directions  # noqa: E402

# (input shape, weight shape, stride, padding, dilation, groups)
CASES = [
    ((2, 3, 12, 10), (4, 3, 3, 3), 1, 1, 1, 1),
    ((1, 4, 30, 27), (6, 2, 7, 5), 1, (3, 1, 2, 0), 1, 2),
    ((2, 2, 40, 70), (3, 2, 3, 3), 1, 0, (2, 3), 1),      # several tiles each way
    ((1, 1, 5, 5), (1, 1, 5, 5), 1, 0, 1, 1),             # one output pixel
]
IDS = [str(i) for i in range(len(CASES))]
DIRECTIONS = ("forward", "input")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_every_direction_matches_torch(case, dtype):
    x, w, gy, g = problem(*case, dtype=dtype)
    y_ref, gx_ref, gw_ref = torch_directions(x, w, gy, g)
    for direction in DIRECTIONS:
        assert fft.supports(g, direction), (case, direction)
    if "forward" in DIRECTIONS:
        assert_matches(fft.forward(x, w, g), y_ref, dtype)
    if "input" in DIRECTIONS:
        assert_matches(fft.input_grad(gy, w, g), gx_ref, dtype)
    if "weight" in DIRECTIONS:
        assert_matches(fft.weight_grad(gy, x, g), gw_ref, dtype)


@pytest.mark.parametrize("case", [((2, 4, 8, 8), (4, 4, 3, 3), 2, 1, 1, 1), ((2, 4, 8, 8), (4, 4, 3, 3), (1, 2), 1, 1, 1)])
def test_unsupported_problems_are_refused(case):
    g = geometry("conv2d", *case)
    assert not any(fft.supports(g, d) for d in DIRECTIONS)

