"""Implicit GEMM (shifted GEMMs over the flattened padded input) in every direction against torch: kernel sizes, dilation, groups, asymmetric padding; strided problems refused."""
import os
import sys

import numpy as np
import pytest

from ember.kernels.conv import implicit_gemm

sys.path.insert(0, os.path.dirname(__file__))
from _torch_reference import assert_directions_match, assert_refused  # noqa: E402

# (input shape, weight shape, stride, padding, dilation, groups)
CASES = [
    ((2, 3, 9, 8), (4, 3, 3, 3), 1, 1, 1, 1),
    ((3, 4, 11, 7), (4, 2, 3, 3), 1, (2, 0, 1, 2), 1, 2),
    ((2, 4, 10, 9), (8, 1, 3, 3), 1, (2, 0, 1, 1), (2, 1), 4),
    ((1, 2, 13, 12), (5, 2, 5, 4), 1, 2, 1, 1),
]
IDS = [str(i) for i in range(len(CASES))]
DIRECTIONS = ("forward", "input", "weight")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_every_direction_matches_torch(case, dtype):
    assert_directions_match(implicit_gemm, case, dtype, DIRECTIONS)


@pytest.mark.parametrize("case", [((2, 4, 8, 8), (4, 4, 3, 3), 2, 1, 1, 1), ((2, 4, 8, 8), (4, 4, 1, 1), (2, 1), 0, 1, 1)])
def test_unsupported_problems_are_refused(case):
    assert_refused(implicit_gemm, case, DIRECTIONS)

