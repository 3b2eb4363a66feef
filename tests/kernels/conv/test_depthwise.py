"""Depthwise convolution (groups == channels, one input channel per group) in every direction against torch, channel multipliers 1 and 2, strides, paddings, dilations; other groupings refused."""
import os
import sys

import numpy as np
import pytest

from ember.kernels.conv import depthwise
from ember.kernels.conv.geometry import geometry

sys.path.insert(0, os.path.dirname(__file__))
from _torch_reference import assert_matches, problem, torch_directions  # noqa: E402

# (input shape, weight shape, stride, padding, dilation, groups)
CASES = [
    ((2, 4, 9, 8), (4, 1, 3, 3), 1, 1, 1, 4),
    ((3, 3, 10, 7), (6, 1, 3, 2), (2, 1), (1, 0, 2, 1), (1, 2), 3),   # multiplier 2, asymmetric
    ((1, 5, 6, 6), (5, 1, 5, 5), 1, 2, 1, 5),
    ((2, 2, 11, 9), (4, 1, 3, 3), 2, 0, 2, 2),
]
IDS = [str(i) for i in range(len(CASES))]
DIRECTIONS = ("forward", "input", "weight")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_every_direction_matches_torch(case, dtype):
    x, w, gy, g = problem(*case, dtype=dtype)
    y_ref, gx_ref, gw_ref = torch_directions(x, w, gy, g)
    for direction in DIRECTIONS:
        assert depthwise.supports(g, direction), (case, direction)
    if "forward" in DIRECTIONS:
        assert_matches(depthwise.forward(x, w, g), y_ref, dtype)
    if "input" in DIRECTIONS:
        assert_matches(depthwise.input_grad(gy, w, g), gx_ref, dtype)
    if "weight" in DIRECTIONS:
        assert_matches(depthwise.weight_grad(gy, x, g), gw_ref, dtype)


@pytest.mark.parametrize("case", [((2, 4, 8, 8), (4, 4, 3, 3), 1, 1, 1, 1), ((2, 4, 8, 8), (4, 2, 3, 3), 1, 1, 1, 2),
                                  ((2, 1, 8, 8), (3, 1, 3, 3), 1, 1, 1, 1)])
def test_unsupported_problems_are_refused(case):
    g = geometry("conv2d", *case)
    assert not any(depthwise.supports(g, d) for d in DIRECTIONS)

