"""Winograd F(2x2, 3x3) in every direction against torch: odd and even output sizes (partial tiles), groups, asymmetric padding, a batch of one; other kernel sizes, strides and dilations refused."""
import os
import sys

import numpy as np
import pytest

from ember.kernels.conv import winograd2x2

sys.path.insert(0, os.path.dirname(__file__))
from _torch_reference import assert_directions_match, assert_refused  # noqa: E402

# (input shape, weight shape, stride, padding, dilation, groups)
CASES = [
    ((2, 3, 9, 8), (4, 3, 3, 3), 1, 1, 1, 1),
    ((1, 4, 7, 7), (6, 2, 3, 3), 1, (2, 0, 1, 2), 1, 2),
    ((3, 8, 12, 11), (8, 8, 3, 3), 1, 0, 1, 1),
    ((2, 2, 3, 3), (3, 2, 3, 3), 1, 0, 1, 1),             # one output pixel
]
IDS = [str(i) for i in range(len(CASES))]
DIRECTIONS = ("forward", "input", "weight")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_every_direction_matches_torch(case, dtype):
    assert_directions_match(winograd2x2, case, dtype, DIRECTIONS)


@pytest.mark.parametrize("case", [((2, 4, 8, 8), (4, 4, 5, 5), 1, 2, 1, 1), ((2, 4, 8, 8), (4, 4, 3, 3), 2, 1, 1, 1),
                                  ((2, 4, 9, 9), (4, 4, 3, 3), 1, 1, 2, 1)])
def test_unsupported_problems_are_refused(case):
    assert_refused(winograd2x2, case, DIRECTIONS)

