"""Tiled transposed copies (ember.kernels.transpose) against NumPy's ``swapaxes``."""
import numpy as np
import pytest

from ember.kernels import transpose

rng = np.random.default_rng(0)


@pytest.mark.parametrize("shape", [(2304, 256), (300, 517), (64, 64), (65, 1000), (9, 40000),
                                   (100, 63), (5, 7), (2, 3, 257, 130), (0, 300), (1, 0, 5)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int16])
def test_transposed_equals_numpy(shape, dtype):
    a = (rng.standard_normal(shape) * 100).astype(dtype)
    got = transpose.transposed(a)
    want = np.swapaxes(a, -1, -2)
    assert got.flags.c_contiguous and got.dtype == a.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_transposed_of_a_view_into_a_strided_out():
    """A non-contiguous source (a column slice) into a strided destination (a column slice of
    a wider buffer, as ``conv.direct.pack`` fills its padded rows): only those columns written."""
    base = rng.standard_normal((700, 300)).astype(np.float32)
    a = base[:, :260]
    wide = np.zeros((260, 720), np.float32)
    out = transpose.transposed(a, out=wide[:, :700])
    assert out.base is wide or out is wide[:, :700] or np.shares_memory(out, wide)
    np.testing.assert_array_equal(wide[:, :700], a.T)
    assert not wide[:, 700:].any()


def test_tiles_are_used_from_the_threshold():
    """Tiled from MIN_TILED elements with both sides at least TILE long; NumPy's copy below."""
    assert transpose.tiled(200, 100) and transpose.tiled(2304, 512)
    assert not transpose.tiled(100, 100)          # 10,000 elements
    assert not transpose.tiled(40, 1000) and not transpose.tiled(1000, 40)
