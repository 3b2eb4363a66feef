"""Tiled FFT (overlap-save) convolution, forward and input gradient against torch: kernel sizes up to 7x7, dilation, groups, asymmetric padding, outputs spanning several tiles; strided problems refused."""
import os
import sys

import numpy as np
import pytest

from ember.kernels.conv import fft

sys.path.insert(0, os.path.dirname(__file__))
from _torch_reference import assert_directions_match, assert_refused  # noqa: E402

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
    assert_directions_match(fft, case, dtype, DIRECTIONS)


@pytest.mark.parametrize("case", [((2, 4, 8, 8), (4, 4, 3, 3), 2, 1, 1, 1), ((2, 4, 8, 8), (4, 4, 3, 3), (1, 2), 1, 1, 1)])
def test_unsupported_problems_are_refused(case):
    assert_refused(fft, case, DIRECTIONS)

