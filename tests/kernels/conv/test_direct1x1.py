"""1x1 convolution as batched GEMMs in every direction against torch: strides, paddings (the sampled pixels zero-filled), groups; other kernel sizes refused."""
import os
import sys

import numpy as np
import pytest

from ember.kernels.conv import direct1x1

sys.path.insert(0, os.path.dirname(__file__))
from _torch_reference import assert_directions_match, assert_refused  # noqa: E402

# (input shape, weight shape, stride, padding, dilation, groups)
CASES = [
    ((2, 6, 7, 9), (4, 6, 1, 1), 1, 0, 1, 1),
    ((1, 6, 7, 9), (8, 3, 1, 1), 1, 0, 1, 2),            # a batch of one, two groups
    ((3, 4, 8, 7), (5, 4, 1, 1), (2, 3), 0, 1, 1),       # strided
    ((2, 4, 5, 6), (6, 2, 1, 1), 2, (1, 0, 2, 1), 1, 2), # padded and strided
]
IDS = [str(i) for i in range(len(CASES))]
DIRECTIONS = ("forward", "input", "weight")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_every_direction_matches_torch(case, dtype):
    assert_directions_match(direct1x1, case, dtype, DIRECTIONS)


@pytest.mark.parametrize("case", [((2, 4, 8, 8), (4, 4, 3, 3), 1, 1, 1, 1), ((2, 4, 8, 8), (4, 4, 1, 3), 1, 0, 1, 1)])
def test_unsupported_problems_are_refused(case):
    assert_refused(direct1x1, case, DIRECTIONS)

