"""Depthwise convolution (groups == channels, one input channel per group) in every direction against torch, channel multipliers 1 and 2, strides, paddings, dilations; other groupings refused."""
import os
import sys

import numpy as np
import pytest

from ember.kernels.conv import depthwise

sys.path.insert(0, os.path.dirname(__file__))
from _torch_reference import assert_directions_match, assert_refused  # noqa: E402

# (input shape, weight shape, stride, padding, dilation, groups)
CASES = [
    ((2, 4, 9, 8), (4, 1, 3, 3), 1, 1, 1, 4),
    ((3, 3, 10, 7), (6, 1, 3, 2), (2, 1), (1, 0, 2, 1), (1, 2), 3),   # multiplier 2, asymmetric
    ((1, 5, 6, 6), (5, 1, 5, 5), 1, 2, 1, 5),
    ((2, 2, 11, 9), (4, 1, 3, 3), 2, 0, 2, 2),
    ((2, 3, 10, 7), (3, 1, 3, 2), (2, 1), (1, 0, 2, 1), (1, 2), 3),   # one filter per channel
    ((3, 16, 12, 12), (16, 1, 3, 3), 2, 1, 1, 16),
]
IDS = [str(i) for i in range(len(CASES))]
DIRECTIONS = ("forward", "input", "weight")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_every_direction_matches_torch(case, dtype):
    assert_directions_match(depthwise, case, dtype, DIRECTIONS)


@pytest.mark.parametrize("case", [((2, 4, 8, 8), (4, 4, 3, 3), 1, 1, 1, 1), ((2, 4, 8, 8), (4, 2, 3, 3), 1, 1, 1, 2),
                                  ((2, 1, 8, 8), (3, 1, 3, 3), 1, 1, 1, 1)])
def test_unsupported_problems_are_refused(case):
    assert_refused(depthwise, case, DIRECTIONS)
