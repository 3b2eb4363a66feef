"""Tiled transposed copies (ember.kernels.transpose) against NumPy's ``swapaxes``: through the
Numba kernel (``transpose_numba``, compiled by the tests' sync mode) and the NumPy tiles."""
import numpy as np
import pytest

from ember.kernels import transpose

rng = np.random.default_rng(0)


@pytest.mark.parametrize("shape", [(2304, 256), (300, 517), (64, 64), (65, 1000), (9, 40000),
                                   (100, 63), (5, 7), (2, 3, 257, 130), (0, 300), (1, 0, 5)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int16])
@pytest.mark.parametrize("kernel", [True, False])
def test_transposed_equals_numpy(shape, dtype, kernel, monkeypatch):
    if not kernel:
        monkeypatch.setattr(transpose, "_kernel", lambda a, out: None)
    a = (rng.standard_normal(shape) * 100).astype(dtype)
    got = transpose.transposed(a)
    want = np.swapaxes(a, -1, -2)
    assert got.flags.c_contiguous and got.dtype == a.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kernel", [True, False])
def test_transposed_of_a_view_into_a_strided_out(kernel, monkeypatch):
    """A non-contiguous source (a column slice) into a strided destination (a column slice of
    a wider buffer, as ``conv.direct.pack`` fills its padded rows): only those columns written."""
    if not kernel:
        monkeypatch.setattr(transpose, "_kernel", lambda a, out: None)
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


def test_kernel_takes_float_matrices_with_contiguous_rows():
    """The kernel runs float32 / float64 matrices whose rows are contiguous (any row stride);
    reversed rows, a column-major or read-only source or a strided destination row take the
    NumPy tiles, with the same values."""
    pytest.importorskip("numba")
    a = rng.standard_normal((300, 517)).astype(np.float32)
    assert transpose._kernel(a, np.empty((517, 300), np.float32)) is not None
    assert transpose._kernel(a[:, :260], np.empty((260, 720), np.float32)[:, :300]) is not None
    assert transpose._kernel(a.astype(np.int16), np.empty((517, 300), np.int16)) is None
    frozen = a.copy()
    frozen.setflags(write=False)   # (a read-only array is another Numba type)
    for src in (a[::-1], np.asfortranarray(a), a[:, ::2], frozen):
        assert transpose._kernel(src, np.empty(src.shape[::-1], np.float32)) is None
        np.testing.assert_array_equal(transpose.transposed(src), src.T)
    out = np.zeros((517, 600), np.float32)[:, ::2]
    assert transpose._kernel(a, out) is None
    np.testing.assert_array_equal(transpose.transposed(a, out=out), a.T)
